package dev.xlaactors.actors;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.typed.ActorRef;

/**
 * Times out the calls that went straight to the callback threads: one thread per runtime looks at the
 * executing runs' direct calls every {@code tick} and tells the run's supervisor of one past its
 * deadline, which aborts the run as for any callback timeout. This keeps timers off the calls' critical
 * path (arming and cancelling an actor timer per call costs two messages); a timeout fires at most one
 * tick late. Thread-safe.
 */
final class DirectCallWatchdog implements AutoCloseable {
  private final Map<RunState<?>, ActorRef<RunSupervisor.Command>> runs = new ConcurrentHashMap<>();
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

  /** The tick for these timeouts: a tenth of the shortest, between 1 ms and 100 ms. */
  static Duration tickFor(ActorsSettings settings) {
    Duration shortest = settings.callbackTimeouts().values().stream()
        .reduce(settings.defaultCallbackTimeout(), (a, b) -> a.compareTo(b) <= 0 ? a : b);
    long millis = Math.max(1, Math.min(100, shortest.toMillis() / 10));
    return Duration.ofMillis(millis);
  }

  void watch(RunState<?> state, ActorRef<RunSupervisor.Command> supervisor) {
    runs.put(state, supervisor);
  }

  void unwatch(RunState<?> state) {
    runs.remove(state);
  }

  private void sweep() {
    long now = System.nanoTime();
    runs.forEach((state, supervisor) -> {
      DirectCall call = state.directCall();
      if (call != null && now - call.deadlineNanos() > 0 && state.reportOverdue(call)) {
        supervisor.tell(new RunSupervisor.DirectCallTimedOut(call));
      }
    });
  }

  @Override
  public void close() {
    timer.shutdownNow();
  }
}
