package dev.xlaactors.graph;

import static org.junit.jupiter.api.Assertions.fail;

import java.util.Random;

/** Plain-Java reference arithmetic and comparison helpers for the graph tests. */
final class Reference {
  /** One seed per JVM run, printed so a failure can be replayed with -Dgraph.seed=... */
  static final long SEED = Long.getLong("graph.seed", System.nanoTime());

  static {
    System.out.println("graph tests: random seed " + SEED + " (replay with -Dgraph.seed=" + SEED + ")");
  }

  private Reference() {}

  static Random random(String test) {
    return new Random(SEED ^ test.hashCode());
  }

  static float[] floats(Random r, int n, float lo, float hi) {
    float[] out = new float[n];
    for (int i = 0; i < n; i++) {
      out[i] = lo + (hi - lo) * r.nextFloat();
    }
    return out;
  }

  static int[] ints(Random r, int n, int lo, int hi) {
    int[] out = new int[n];
    for (int i = 0; i < n; i++) {
      out[i] = lo + r.nextInt(hi - lo);
    }
    return out;
  }

  static int count(long... dims) {
    long n = 1;
    for (long d : dims) {
      n *= d;
    }
    return (int) n;
  }

  /** The multi-index of row-major position {@code flat}. */
  static long[] unravel(long flat, long[] dims) {
    long[] idx = new long[dims.length];
    for (int i = dims.length - 1; i >= 0; i--) {
      idx[i] = dims[i] == 0 ? 0 : flat % dims[i];
      flat = dims[i] == 0 ? 0 : flat / dims[i];
    }
    return idx;
  }

  static int ravel(long[] idx, long[] dims) {
    long flat = 0;
    for (int i = 0; i < dims.length; i++) {
      flat = flat * dims[i] + idx[i];
    }
    return (int) flat;
  }

  /** Reads {@code x} (shape {@code dims}) at {@code idx} aligned from the right, NumPy broadcasting. */
  static float broadcastRead(float[] x, long[] dims, long[] idx) {
    long[] own = new long[dims.length];
    int offset = idx.length - dims.length;
    for (int i = 0; i < dims.length; i++) {
      own[i] = dims[i] == 1 ? 0 : idx[i + offset];
    }
    return x[ravel(own, dims)];
  }

  /** Elementwise closeness with NaN equal to NaN and infinities equal only to themselves. */
  static void assertClose(float[] expected, float[] actual, double rtol, double atol, String what) {
    if (expected.length != actual.length) {
      fail(what + ": expected " + expected.length + " elements, got " + actual.length);
    }
    for (int i = 0; i < expected.length; i++) {
      float e = expected[i];
      float a = actual[i];
      if (Float.isNaN(e) || Float.isNaN(a)) {
        if (Float.isNaN(e) != Float.isNaN(a)) {
          fail(what + ": element " + i + " expected " + e + ", got " + a);
        }
        continue;
      }
      if (Float.isInfinite(e) || Float.isInfinite(a)) {
        if (e != a) {
          fail(what + ": element " + i + " expected " + e + ", got " + a);
        }
        continue;
      }
      if (Math.abs(e - a) > atol + rtol * Math.abs(e)) {
        fail(what + ": element " + i + " expected " + e + ", got " + a + " (rtol " + rtol + ", atol " + atol + ")");
      }
    }
  }

  /** As {@link #assertClose(float[], float[], double, double, String)}, for f64 (and interleaved complex) values. */
  static void assertClose(double[] expected, double[] actual, double rtol, double atol, String what) {
    if (expected.length != actual.length) {
      fail(what + ": expected " + expected.length + " elements, got " + actual.length);
    }
    for (int i = 0; i < expected.length; i++) {
      double e = expected[i];
      double a = actual[i];
      if (Double.isNaN(e) || Double.isNaN(a)) {
        if (Double.isNaN(e) != Double.isNaN(a)) {
          fail(what + ": element " + i + " expected " + e + ", got " + a);
        }
        continue;
      }
      if (Double.isInfinite(e) || Double.isInfinite(a)) {
        if (e != a) {
          fail(what + ": element " + i + " expected " + e + ", got " + a);
        }
        continue;
      }
      if (Math.abs(e - a) > atol + rtol * Math.abs(e)) {
        fail(what + ": element " + i + " expected " + e + ", got " + a + " (rtol " + rtol + ", atol " + atol + ")");
      }
    }
  }
}
