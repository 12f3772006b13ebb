package dev.xlaactors.runtime;

import java.util.Arrays;
import java.util.Random;

/**
 * A KV cache's shape for the attention kernels' tests: {@code [layers, 2, slots, kvHeads, positions, headDim]}
 * (keys at index 0 of the second dimension, values at 1), and the cache of random values those tests fill.
 */
record KvCacheShape(int layers, int slots, int kvHeads, int positions, int headDim) {
  long[] dims() {
    return new long[] {layers, 2, slots, kvHeads, positions, headDim};
  }

  int count() {
    return layers * 2 * slots * kvHeads * positions * headDim;
  }

  /** Where element d of position t of KV head g of slot s of layer l (kv 0: keys, 1: values) is. */
  int at(int l, int kv, int s, int g, int t, int d) {
    return ((((l * 2 + kv) * slots + s) * kvHeads + g) * positions + t) * headDim + d;
  }

  /**
   * Random values in [-1, 1) at every position below {@code used[s]} of each slot s, and NaN at every
   * position from it on (a kernel that read one would answer NaN).
   */
  float[] randomBelow(Random random, int[] used) {
    float[] values = new float[count()];
    for (int i = 0; i < values.length; i++) {
      values[i] = random.nextFloat() * 2 - 1;
    }
    for (int s = 0; s < slots; s++) {
      for (int l = 0; l < layers; l++) {
        for (int kv = 0; kv < 2; kv++) {
          for (int g = 0; g < kvHeads; g++) {
            Arrays.fill(values, at(l, kv, s, g, used[s], 0), at(l, kv, s, g, 0, 0) + positions * headDim, Float.NaN);
          }
        }
      }
    }
    return values;
  }

  /** The cache holding {@code values} as {@code dtype} (f32, f16 or bf16). */
  HostTensor tensor(float[] values, DType dtype) {
    return switch (dtype) {
      case F32 -> HostTensor.ofFloats(values, dims());
      case F16 -> HostTensor.ofHalfFloats(values, dims());
      case BF16 -> HostTensor.ofBFloat16s(values, dims());
      default -> throw new IllegalArgumentException("a cache holds f32, f16 or bf16, not " + dtype);
    };
  }

  /**
   * Softmax attention in double precision, the tests' reference: the query {@code q[from, from + headDim)}
   * against the keys and values of KV head g of slot s of layer l at positions [0, n) of {@code stored} (the
   * cache's values as its dtype holds them), with scores {@code q . k * scale}.
   */
  double[] attention(float[] stored, int l, int s, int g, int n, float[] q, int from, float scale) {
    double[] weights = new double[n];
    double top = Double.NEGATIVE_INFINITY;
    for (int t = 0; t < n; t++) {
      double dot = 0;
      for (int d = 0; d < headDim; d++) {
        dot += (double) q[from + d] * stored[at(l, 0, s, g, t, d)];
      }
      weights[t] = dot * scale;
      top = Math.max(top, weights[t]);
    }
    double total = 0;
    for (int t = 0; t < n; t++) {
      weights[t] = Math.exp(weights[t] - top);
      total += weights[t];
    }
    double[] out = new double[headDim];
    for (int d = 0; d < headDim; d++) {
      for (int t = 0; t < n; t++) {
        out[d] += weights[t] / total * stored[at(l, 1, s, g, t, d)];
      }
    }
    return out;
  }

  /** The MLIR tensor type of this cache as {@code dtype}. */
  String mlirType(DType dtype) {
    return tensorType(dtype == DType.F32 ? "f32" : dtype == DType.F16 ? "f16" : "bf16", dims());
  }

  /** An MLIR tensor type: {@code tensor<2x3xf32>}. */
  static String tensorType(String dtype, long... dims) {
    StringBuilder s = new StringBuilder("tensor<");
    for (long d : dims) {
      s.append(d).append('x');
    }
    return s.append(dtype).append('>').toString();
  }
}
