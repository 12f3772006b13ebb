package dev.xlaactors.bench;

import java.util.Arrays;
import java.util.Locale;

/**
 * Times one operation: a warm-up phase, then one {@link System#nanoTime()} sample per iteration, and
 * reports the median and p99 as a machine-readable {@code BENCH} line that {@code bench/run.sh} merges
 * with the JAX harness's lines of the same name.
 *
 * <p>Every phase is capped by wall time as well as by count, so a slow or shared machine shortens the
 * run instead of stretching it; the line says how many samples were actually taken.
 */
final class LatencyProbe {
  /** The operation under test; may throw, which aborts the benchmark. */
  @FunctionalInterface
  interface Operation {
    void runOnce() throws Exception;
  }

  /** Count and wall-time caps of one measurement. */
  record Budget(int warmupIterations, int iterations, double maxSeconds) {}

  /**
   * Medians and p99 of one measurement, in microseconds. {@code copies} is how many times the payload
   * is moved per operation: 2 for a round trip (there and back), 1 for a plain copy.
   */
  record Result(String name, long payloadBytes, int copies, int samples, double medianMicros, double p99Micros) {
    /**
     * Effective bandwidth: copies x payload / median (a host->device->host round trip moves the payload
     * twice). Zero for measurements without a payload.
     */
    double roundTripGigabytesPerSecond() {
      return payloadBytes == 0 ? 0 : (double) copies * payloadBytes / (medianMicros * 1e-6) / 1e9;
    }

    /**
     * The same measurement per step of an operation made of {@code steps} equal steps (a program that
     * calls a callback {@code steps} times): medians and p99 divided by {@code steps}.
     */
    Result perStep(int steps) {
      return new Result(name, payloadBytes, copies, samples, medianMicros / steps, p99Micros / steps);
    }

    /** The line run.sh parses; keep the keys in step with bench/jax_execute.py. */
    String toBenchLine() {
      return String.format(
          Locale.ROOT,
          "BENCH side=java name=%s median_us=%.3f p99_us=%.3f samples=%d bytes=%d gbps=%.3f",
          name,
          medianMicros,
          p99Micros,
          samples,
          payloadBytes,
          roundTripGigabytesPerSecond());
    }
  }

  private LatencyProbe() {}

  /** Warms {@code operation} up, then samples it; see {@link Budget} for when each phase stops. */
  static Result measure(String name, long payloadBytes, Budget budget, Operation operation) throws Exception {
    return measure(name, payloadBytes, 2, budget, operation);
  }

  /** As above, for an operation that moves its payload {@code copies} times. */
  static Result measure(String name, long payloadBytes, int copies, Budget budget, Operation operation)
      throws Exception {
    // Warm-up lets the JIT compile the call path and the allocator reach a steady state.
    long warmupDeadline = System.nanoTime() + (long) (budget.maxSeconds() * 0.25e9);
    for (int i = 0; i < budget.warmupIterations() && System.nanoTime() < warmupDeadline; i++) {
      operation.runOnce();
    }
    long[] samples = new long[budget.iterations()];
    int taken = 0;
    long deadline = System.nanoTime() + (long) (budget.maxSeconds() * 0.75e9);
    while (taken < samples.length) {
      long start = System.nanoTime();
      operation.runOnce();
      long end = System.nanoTime();
      samples[taken++] = end - start;
      if (end > deadline) {
        break;
      }
    }
    long[] sorted = Arrays.copyOf(samples, taken);
    Arrays.sort(sorted);
    return new Result(name, payloadBytes, copies, taken, percentile(sorted, 0.50) / 1e3, percentile(sorted, 0.99) / 1e3);
  }

  /** Nearest-rank percentile of sorted samples; the same definition as the JAX harness. */
  static double percentile(long[] sorted, double fraction) {
    int rank = (int) Math.ceil(fraction * sorted.length);
    return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
  }
}
