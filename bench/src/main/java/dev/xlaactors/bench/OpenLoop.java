package dev.xlaactors.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

/**
 * What the serve benches ({@link ServeBench}, {@link ServeLmBench}) share: the open-loop sender (requests
 * sent on a fixed schedule whatever the answers) and the percentile of their tables.
 */
final class OpenLoop {
  private OpenLoop() {}

  /** Sends request {@code i}, due at {@code dueNanos} ({@link System#nanoTime()}) by the schedule. */
  @FunctionalInterface
  interface Sender {
    void send(int i, long dueNanos);
  }

  /**
   * Calls {@code send} with 0 .. n-1, request i due at {@code i / rate} seconds after the first
   * ({@code rate} <= 0: all at once, a burst), on the calling thread. A sender that falls behind its
   * schedule catches up in a burst; returns how late each request went out, in milliseconds.
   */
  static List<Double> send(int n, double rate, Sender send) {
    List<Double> lateMillis = new ArrayList<>(n);
    long start = System.nanoTime();
    for (int i = 0; i < n; i++) {
      long due = rate > 0 ? start + (long) (i * 1e9 / rate) : start;
      long wait;
      while ((wait = due - System.nanoTime()) > 0) {
        LockSupport.parkNanos(wait);
      }
      lateMillis.add(rate > 0 ? (System.nanoTime() - due) / 1e6 : 0.0);
      send.send(i, due);
    }
    return lateMillis;
  }

  /** Nearest-rank percentile of {@code values} (NaN for none); the serve benches' one definition. */
  static double percentile(List<Double> values, double q) {
    if (values.isEmpty()) {
      return Double.NaN;
    }
    double[] v = values.stream().mapToDouble(Double::doubleValue).toArray();
    Arrays.sort(v);
    return v[Math.min(v.length - 1, (int) Math.ceil(q * v.length) - 1)];
  }
}
