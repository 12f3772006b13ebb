package dev.xlaactors.actors;

import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Counts and latencies of host callbacks, per callback name. Thread-safe; shared by the dispatcher and
 * the run supervisors of one {@link CallbackRuntime}. Latency percentiles are computed over the most
 * recent {@value #WINDOW} calls of each callback.
 */
public final class CallbackMetrics {
  static final int WINDOW = 4096;

  private final Map<String, Counter> counters = new ConcurrentHashMap<>();

  /**
   * A snapshot of one callback's figures.
   *
   * @param calls calls answered or failed
   * @param failures calls that failed for any reason (timeouts included)
   * @param timeouts calls that failed by timing out
   * @param medianLatency median latency from arrival at the supervisor to answer, over the window
   * @param p99Latency 99th percentile of that latency
   */
  public record Snapshot(long calls, long failures, long timeouts, Duration medianLatency, Duration p99Latency) {}

  void recordSuccess(String name, long latencyNanos) {
    counters.computeIfAbsent(name, n -> new Counter()).record(latencyNanos, false, false);
  }

  void recordFailure(String name, long latencyNanos, boolean timeout) {
    counters.computeIfAbsent(name, n -> new Counter()).record(latencyNanos, true, timeout);
  }

  /** Figures of every callback that has been called, by name. */
  public Map<String, Snapshot> snapshot() {
    Map<String, Snapshot> result = new TreeMap<>();
    counters.forEach((name, c) -> result.put(name, c.snapshot()));
    return result;
  }

  private static final class Counter {
    private final long[] latencies = new long[WINDOW];
    private long calls;
    private long failures;
    private long timeouts;

    synchronized void record(long latencyNanos, boolean failed, boolean timedOut) {
      latencies[(int) (calls % WINDOW)] = latencyNanos;
      calls++;
      if (failed) {
        failures++;
      }
      if (timedOut) {
        timeouts++;
      }
    }

    synchronized Snapshot snapshot() {
      int n = (int) Math.min(calls, WINDOW);
      long[] sorted = Arrays.copyOf(latencies, n);
      Arrays.sort(sorted);
      Duration median = n == 0 ? Duration.ZERO : Duration.ofNanos(sorted[n / 2]);
      Duration p99 = n == 0 ? Duration.ZERO : Duration.ofNanos(sorted[Math.min(n - 1, (int) Math.ceil(n * 0.99) - 1)]);
      return new Snapshot(calls, failures, timeouts, median, p99);
    }
  }
}
