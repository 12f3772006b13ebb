package dev.xlaactors.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The machine's memory read bandwidth, the limit of {@code bench/run.sh models}' roofline column: one thread
 * per core each sums its own share of a buffer far larger than the caches (default 1 GiB in all), all
 * threads in step (a barrier before each pass), several passes, the best pass kept. Each thread's share is
 * its own 16 MiB {@code long[]}s (smaller than G1's humongous limits make awkward), written before the first
 * pass so that every page is resident and first touched by the thread that reads it. Four accumulators per
 * loop keep the adds off the load path, so a pass measures the loads (checked on the 2-core bench machine
 * against a C loop of AVX2 loads compiled with -O3: the same within that shared machine's noise, 18-31 GB/s
 * against 24-26).
 *
 * <p>Prints one line, {@code BANDWIDTH read_gb_per_s=<best> median_gb_per_s=<x> threads=<n> bytes=<total>
 * passes=<n> checksum=<x>} (the checksum keeps the sums live), GB being 10^9 bytes. Usage: {@code
 * ReadBandwidthProbe [MiB] [passes]}; the JVM needs a heap a little over the buffer ({@code -Xmx1400m} for
 * the default).
 */
public final class ReadBandwidthProbe {
  private ReadBandwidthProbe() {}

  public static void main(String[] args) throws Exception {
    long mib = args.length > 0 ? Long.parseLong(args[0]) : 1024;
    int passes = args.length > 1 ? Integer.parseInt(args[1]) : 10;
    int threads = Runtime.getRuntime().availableProcessors();
    int chunkLongs = 2 << 20; // 16 MiB
    int chunksPerThread = (int) Math.max(1, mib * (1L << 20) / 8 / threads / chunkLongs);
    CyclicBarrier start = new CyclicBarrier(threads + 1);
    CyclicBarrier done = new CyclicBarrier(threads + 1);
    AtomicLong sink = new AtomicLong();
    List<Thread> workers = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      Thread w = new Thread(() -> {
        try {
          long[][] mine = new long[chunksPerThread][chunkLongs];
          for (long[] chunk : mine) {
            for (int i = 0; i < chunk.length; i++) {
              chunk[i] = i;
            }
          }
          for (int p = 0; p < passes + 1; p++) { // the first pass warms the JIT up and is not kept
            start.await();
            long s = 0;
            for (long[] chunk : mine) {
              s += sum(chunk);
            }
            sink.addAndGet(s);
            done.await();
          }
        } catch (Exception | OutOfMemoryError e) {
          e.printStackTrace();
          start.reset(); // the main thread fails instead of waiting for ever
          done.reset();
        }
      }, "read-bandwidth-" + t);
      w.setDaemon(true);
      w.start();
      workers.add(w);
    }
    long bytes = 8L * chunkLongs * chunksPerThread * threads;
    List<Double> gbPerSecond = new ArrayList<>();
    for (int p = 0; p < passes + 1; p++) {
      start.await();
      long t0 = System.nanoTime();
      done.await();
      double seconds = (System.nanoTime() - t0) / 1e9;
      if (p > 0) {
        gbPerSecond.add(bytes / seconds / 1e9);
      }
    }
    for (Thread w : workers) {
      w.join();
    }
    List<Double> sorted = new ArrayList<>(gbPerSecond);
    sorted.sort(null);
    System.out.printf(Locale.ROOT, "BANDWIDTH read_gb_per_s=%.2f median_gb_per_s=%.2f threads=%d bytes=%d passes=%d checksum=%d%n",
        sorted.get(sorted.size() - 1), sorted.get(sorted.size() / 2), threads, bytes, passes, sink.get() & 0xff);
  }

  /** The sum of {@code a}, four independent chains so that the loads, not the adds, set the pace. */
  private static long sum(long[] a) {
    long s0 = 0;
    long s1 = 0;
    long s2 = 0;
    long s3 = 0;
    int n = a.length & ~3;
    for (int i = 0; i < n; i += 4) {
      s0 += a[i];
      s1 += a[i + 1];
      s2 += a[i + 2];
      s3 += a[i + 3];
    }
    for (int i = n; i < a.length; i++) {
      s0 += a[i];
    }
    return s0 + s1 + s2 + s3;
  }
}
