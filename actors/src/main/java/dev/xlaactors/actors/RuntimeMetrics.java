package dev.xlaactors.actors;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BiConsumer;
import java.util.function.IntSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Counts and latencies of the runs and host callbacks of one {@link CallbackRuntime}: per callback name
 * and for runs as a whole. Thread-safe. Latency percentiles are computed over the most recent {@value
 * #WINDOW} events of each kind. {@link CallbackRuntime} also logs them periodically (see {@code
 * xla-actors.actors.metrics} in reference.conf).
 *
 * <p>A call is counted before its XLA thread is released, so the figures include every call of a run
 * by the time the run returns. A call that times out at the very moment its function returns may be
 * counted once as answered and once as failed.
 *
 * <p>{@link RuntimeMeters} shows these figures as Micrometer meters (for a Prometheus scrape, say).
 */
public final class RuntimeMetrics {
  static final int WINDOW = 4096;
  private static final Logger LOG = LoggerFactory.getLogger(RuntimeMetrics.class);

  private final Map<String, Counter> callbacks = new ConcurrentHashMap<>();
  private final Counter runs = new Counter();
  private final java.util.concurrent.atomic.AtomicLong supervisedRuns = new java.util.concurrent.atomic.AtomicLong();
  private volatile IntSupplier stuckThreads = () -> 0;
  /** Told of each callback name the first time it is recorded (RuntimeMeters registers its meters). */
  private final List<BiConsumer<String, Counter>> newCallbackListeners = new CopyOnWriteArrayList<>();

  /**
   * A snapshot of one kind of event.
   *
   * @param count events that ended (answered or failed)
   * @param failures events that failed for any reason (timeouts included)
   * @param timeouts events that failed by timing out
   * @param medianLatency median latency over the window (callbacks: arrival at the supervisor to answer;
   *     runs: start to end)
   * @param p99Latency 99th percentile of that latency
   */
  public record Snapshot(long count, long failures, long timeouts, Duration medianLatency, Duration p99Latency) {
    @Override
    public String toString() {
      return count + " (" + failures + " failed, " + timeouts + " timed out), median " + micros(medianLatency)
          + ", p99 " + micros(p99Latency);
    }

    private static String micros(Duration d) {
      return d.toNanos() / 1000 + " us";
    }
  }

  void recordCallback(String name, long latencyNanos, boolean failed, boolean timedOut) {
    Counter c = callbacks.get(name);
    if (c == null) {
      c = firstCall(name);
    }
    c.record(latencyNanos, failed, timedOut);
  }

  /** The counter of a name not seen before (or just added by another thread); tells the listeners once. */
  private Counter firstCall(String name) {
    Counter fresh = new Counter();
    Counter existing = callbacks.putIfAbsent(name, fresh);
    if (existing != null) {
      return existing;
    }
    for (BiConsumer<String, Counter> listener : newCallbackListeners) {
      try {
        listener.accept(name, fresh);
      } catch (RuntimeException e) { // a meter registry's failure must not fail the call
        LOG.warn("could not register the meters of callback '{}': {}", name, e.toString(), e);
      }
    }
    return fresh;
  }

  /** Adds a listener told of each callback name first recorded from now on. */
  void watchCallbacks(BiConsumer<String, Counter> listener) {
    newCallbackListeners.add(listener);
  }

  /** The counters of the callback names recorded so far. */
  Map<String, Counter> callbackCounters() {
    return Map.copyOf(callbacks);
  }

  void unwatchCallbacks(BiConsumer<String, Counter> listener) {
    newCallbackListeners.remove(listener);
  }

  Counter runCounter() {
    return runs;
  }

  void recordRun(long latencyNanos, boolean failed, boolean timedOut) {
    runs.record(latencyNanos, failed, timedOut);
  }

  void recordSupervisorSpawned() {
    supervisedRuns.incrementAndGet();
  }

  /**
   * Runs that needed a {@link RunSupervisor} actor: a call served by an actor (or not resolved at once),
   * a callback that failed or overran its timeout, a cancel, a run past its deadline, or a caller that
   * asked for the supervisor. Runs whose callbacks all went straight to their functions in time, and runs
   * without callbacks, need none and are not counted here (they are in {@link #runs()}).
   */
  public long supervisedRuns() {
    return supervisedRuns.get();
  }

  /** Figures of every callback that has been called, by name. */
  public Map<String, Snapshot> callbacks() {
    Map<String, Snapshot> result = new TreeMap<>();
    callbacks.forEach((name, c) -> result.put(name, c.snapshot()));
    return result;
  }

  void watchStuckThreads(IntSupplier stuck) {
    this.stuckThreads = stuck;
  }

  /**
   * Callback threads stuck right now: each still runs a function whose call was given up (it timed out
   * or its run was aborted) and did not return when interrupted. Another thread has taken each one's
   * place (up to {@code xla-actors.actors.callbacks.max-stuck-threads}).
   */
  public int stuckCallbackThreads() {
    return stuckThreads.getAsInt();
  }

  /** Figures of the runs. */
  public Snapshot runs() {
    return runs.snapshot();
  }

  @Override
  public String toString() {
    return "runs: " + runs() + " (" + supervisedRuns() + " with a supervisor actor); callbacks: " + callbacks() + "; stuck callback threads: " + stuckCallbackThreads();
  }

  /** Count, failures, timeouts and a window of latencies of one kind of event. */
  static final class Counter {
    private final long[] latencies = new long[WINDOW];
    private long count;
    private long failures;
    private long timeouts;
    /** The last snapshot, reused while no event has been recorded since (a scrape reads it several times). */
    private Snapshot last;

    synchronized void record(long latencyNanos, boolean failed, boolean timedOut) {
      latencies[(int) (count % WINDOW)] = latencyNanos;
      count++;
      if (failed) {
        failures++;
      }
      if (timedOut) {
        timeouts++;
      }
    }

    /** Events that ended without failing. */
    synchronized long succeeded() {
      return count - failures;
    }

    /** Events that failed other than by timing out. */
    synchronized long failedOtherwise() {
      return failures - timeouts;
    }

    synchronized long timeouts() {
      return timeouts;
    }

    /** The figures now; the window is sorted outside the lock, so a reader holds up recording only for a copy. */
    Snapshot snapshot() {
      long c;
      long f;
      long t;
      long[] sorted;
      synchronized (this) {
        if (last != null && last.count() == count) {
          return last;
        }
        c = count;
        f = failures;
        t = timeouts;
        sorted = Arrays.copyOf(latencies, (int) Math.min(count, WINDOW));
      }
      int n = sorted.length;
      Arrays.sort(sorted);
      Duration median = n == 0 ? Duration.ZERO : Duration.ofNanos(sorted[n / 2]);
      Duration p99 = n == 0 ? Duration.ZERO : Duration.ofNanos(sorted[Math.max(0, (int) Math.ceil(n * 0.99) - 1)]);
      Snapshot snapshot = new Snapshot(c, f, t, median, p99);
      synchronized (this) {
        if (last == null || last.count() < c) {
          last = snapshot;
        }
      }
      return snapshot;
    }
  }
}
