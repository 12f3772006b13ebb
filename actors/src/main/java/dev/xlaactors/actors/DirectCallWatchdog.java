package dev.xlaactors.actors;

import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Enforces the deadlines of executing runs that no actor watches: one thread per runtime looks at the
 * executing runs every {@code tick} and tells the run's supervisor (spawning it if the run has none
 * yet, see {@link RunState#supervisor()}) of a direct call past its deadline or of a run past its own,
 * which aborts the run as any timeout does. This keeps timers and actors off the critical path of a run
 * whose callbacks go straight to their functions (arming and cancelling an actor timer costs messages,
 * and a run that needs no supervisor spawns none); a timeout it reports fires at most one tick late.
 * Thread-safe.
 */
final class DirectCallWatchdog implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(DirectCallWatchdog.class);

  private final Set<RunState<?>> runs = ConcurrentHashMap.newKeySet();
  private final ScheduledExecutorService timer;

  DirectCallWatchdog(String name, Duration tick) {
    timer = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, name);
      t.setDaemon(true);
      return t;
    });
    long nanos = tick.toNanos();
    timer.scheduleAtFixedRate(this::sweep, nanos, nanos, TimeUnit.NANOSECONDS);
  }

  /**
   * The tick for these timeouts: a tenth of the shortest of the callback timeouts and the run timeout,
   * between 1 ms and 100 ms.
   */
  static Duration tickFor(ActorsSettings settings) {
    Duration shortest = settings.callbackTimeouts().values().stream()
        .reduce(settings.defaultCallbackTimeout(), (a, b) -> a.compareTo(b) <= 0 ? a : b);
    if (settings.runTimeout().compareTo(shortest) < 0) {
      shortest = settings.runTimeout();
    }
    long millis = Math.max(1, Math.min(100, shortest.toMillis() / 10));
    return Duration.ofMillis(millis);
  }

  /** Watches the run from now until {@link #unwatch}: it executes, with its deadline set. */
  void watch(RunState<?> state) {
    runs.add(state);
  }

  void unwatch(RunState<?> state) {
    runs.remove(state);
  }

  private void sweep() {
    long now = System.nanoTime();
    for (RunState<?> state : runs) {
      // One run's failure to report (the actor system terminating, say) must not end the sweeps: a
      // periodic task that throws is never run again.
      try {
        DirectCall call = state.directCall();
        if (call != null && now - call.deadlineNanos() > 0 && state.reportOverdue(call)) {
          state.supervisor().tell(new RunSupervisor.DirectCallTimedOut(call));
        }
        if (state.reportRunOverdue(now)) {
          state.supervisor().tell(new RunSupervisor.RunTimedOut());
        }
      } catch (RuntimeException e) {
        LOG.warn("could not report an overdue run to its supervisor: {}", e.toString());
      }
    }
  }

  @Override
  public void close() {
    timer.shutdownNow();
  }
}
