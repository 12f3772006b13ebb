package dev.xlaactors.runtime;

import static dev.xlaactors.runtime.TestPrograms.tensorType;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.ExecutionFailedException;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The bridge's native matmul handlers ({@code xla_actors.matmul_f32}, {@code xla_actors.matmul_bf16},
 * {@code xla_actors.matmul_f16}, {@code xla_actors.matmul_q8}) called by
 * custom calls in compiled programs, against a double-precision reference computed here: both weight
 * layouts, shapes whose sizes are not multiples of any vector length (the kernels' tails), shapes large
 * enough to be split over the kernel threads, and calls whose dtypes or shapes do not fit, which fail with an
 * error naming the operand (never crash). CI runs this class a second time with
 * {@code XLA_FLAGS=--xla_cpu_max_isa=AVX2}, which the kernels must honour.
 */
class MatmulKernelTest {
  private static XlaClient client;

  @BeforeAll
  static void start() {
    client = XlaClient.create();
  }

  @AfterAll
  static void stop() {
    client.close();
  }

  /** A program of one custom call to {@code target} with operands of the given types. */
  private static String program(String target, String attributes, String resultType, String... operandTypes) {
    StringBuilder params = new StringBuilder();
    StringBuilder names = new StringBuilder();
    for (int i = 0; i < operandTypes.length; i++) {
      params.append(i > 0 ? ", " : "").append("%a").append(i).append(": ").append(operandTypes[i]);
      names.append(i > 0 ? ", " : "").append("%a").append(i);
    }
    return "func.func @main(" + params + ") -> " + resultType + " {\n"
        + "  %0 = stablehlo.custom_call @" + target + "(" + names + ") {api_version = 4 : i32, backend_config = {"
        + attributes + "}} : (" + String.join(", ", operandTypes) + ") -> " + resultType + "\n"
        + "  return %0 : " + resultType + "\n}\n";
  }

  private static float[] random(Random random, int count) {
    float[] values = new float[count];
    for (int i = 0; i < count; i++) {
      values[i] = random.nextFloat() * 2 - 1;
    }
    return values;
  }

  private static float[] run(String program, HostTensor... inputs) {
    try (Executable exe = client.compile(program)) {
      List<HostTensor> out = exe.run(inputs);
      return out.get(0).toFloatArray();
    }
  }

  /**
   * Each element within {@code tolerance} times the sum of its terms' magnitudes: f32 sums in another order
   * differ by a few units of that, whatever cancellation makes of the result.
   */
  private static void assertClose(double[][] expected, float[] actual, double tolerance) {
    assertEquals(expected[0].length, actual.length);
    for (int i = 0; i < actual.length; i++) {
      double error = Math.abs(expected[0][i] - actual[i]);
      assertTrue(error <= tolerance * (1e-3 + expected[1][i]),
          "element " + i + ": expected " + expected[0][i] + ", got " + actual[i]);
    }
  }

  /** x [m, k] times w, where w(k, n) reads the weight of input k and output n. */
  private interface Weight {
    double at(int k, int n);
  }

  /** The products and, for each element, the sum of its terms' magnitudes. */
  private static double[][] reference(float[] x, int m, int k, int n, Weight w) {
    double[] y = new double[m * n];
    double[] magnitude = new double[m * n];
    for (int r = 0; r < m; r++) {
      for (int c = 0; c < n; c++) {
        double sum = 0;
        double abs = 0;
        for (int i = 0; i < k; i++) {
          double term = (double) x[r * k + i] * w.at(i, c);
          sum += term;
          abs += Math.abs(term);
        }
        y[r * n + c] = sum;
        magnitude[r * n + c] = abs;
      }
    }
    return new double[][] {y, magnitude};
  }

  @Test
  void f32ProductsMatchTheReferenceInBothWeightLayouts() {
    Random random = new Random(7);
    // {batch, rows, k, n}: odd sizes reach every tail (of k, and the dot form's register tiles of 3 activation
    // rows by 4 weight rows, by 8 on AVX-512 above one row: activation-row tails of 1 and 2, weight-row tails of 1
    // to 7); inputs past 1,024, which AVX-512 takes by blocks of 1,024 above one row (the last block with a tail);
    // a prompt chunk's 128 rows; the last ones are large enough to use the pool.
    int[][] shapes = {{3, 5, 70, 37}, {1, 4, 100, 6}, {1, 8, 72, 43}, {2, 64, 96, 35}, {1, 5, 2100, 19}, {1, 1, 768, 96},
        {1, 2, 256, 300}, {1, 1, 128, 1000}};
    for (int[] s : shapes) {
      int m = s[0] * s[1];
      int k = s[2];
      int n = s[3];
      float[] x = random(random, m * k);
      float[] w = random(random, k * n);
      HostTensor xs = HostTensor.ofFloats(x, s[0], s[1], k);
      String result = tensorType("f32", s[0], s[1], n);
      String xType = tensorType("f32", s[0], s[1], k);

      float[] plain = run(program("xla_actors.matmul_f32", "", result, xType, tensorType("f32", k, n)),
          xs, HostTensor.ofFloats(w, k, n));
      assertClose(reference(x, m, k, n, (i, c) -> w[i * n + c]), plain, 1e-6);

      float[] transposed = run(program("xla_actors.matmul_f32", "w_transposed = 1 : i32", result, xType,
          tensorType("f32", n, k)), xs, HostTensor.ofFloats(w, n, k));
      assertClose(reference(x, m, k, n, (i, c) -> w[c * k + i]), transposed, 1e-6);
    }
  }

  /**
   * matmul_bf16 and matmul_f16 widen each weight to the f32 of the same value as they load it, so their products
   * are matmul_f32's (dot form) on those values, to f32 rounding (the compiler may fuse a tail's multiply-add in
   * one and not the other), on every path: up to eight activation rows converting in registers, more through an
   * f32 tile of a block of weight rows.
   */
  @Test
  void halfWidthProductsAreTheF32ProductsOfTheSameValues() {
    Random random = new Random(13);
    // {batch, rows, k, n}: one to eight rows and more (a prompt chunk's 128), tails of k and of the weight rows (1
    // to 7), inputs past 1,024 (AVX-512's blocks of 1,024 above one row), products large enough to split, weights
    // in several blocks of the tile path (3,072 inputs: blocks of 40 rows).
    int[][] shapes = {{3, 5, 70, 37}, {1, 1, 100, 6}, {1, 2, 72, 43}, {1, 3, 96, 35}, {2, 64, 96, 35},
        {1, 5, 2100, 19}, {1, 1, 768, 96}, {1, 8, 768, 301}, {1, 1, 128, 1000}, {1, 128, 64, 29}, {1, 9, 3072, 90}};
    for (String dtype : List.of("bf16", "f16")) {
      for (int[] s : shapes) {
        int m = s[0] * s[1];
        int k = s[2];
        int n = s[3];
        float[] x = random(random, m * k);
        float[] drawn = random(random, n * k);
        HostTensor weights = dtype.equals("bf16") ? HostTensor.ofBFloat16s(drawn, n, k) : HostTensor.ofHalfFloats(drawn, n, k);
        float[] widened = weights.toFloatArray();
        HostTensor xs = HostTensor.ofFloats(x, s[0], s[1], k);
        String result = tensorType("f32", s[0], s[1], n);
        String xType = tensorType("f32", s[0], s[1], k);
        float[] half = run(program("xla_actors.matmul_" + dtype, "", result, xType, tensorType(dtype, n, k)), xs, weights);
        float[] f32 = run(program("xla_actors.matmul_f32", "w_transposed = 1 : i32", result, xType, tensorType("f32", n, k)),
            xs, HostTensor.ofFloats(widened, n, k));
        double[][] expected = reference(x, m, k, n, (i, c) -> widened[c * k + i]);
        assertClose(expected, half, 1e-6);
        double[][] asF32 = {new double[f32.length], expected[1]};
        for (int i = 0; i < f32.length; i++) {
          asF32[0][i] = f32[i];
        }
        assertClose(asF32, half, 2e-7);
      }
    }
  }

  @Test
  void q8ProductsMatchTheDequantisedReference() {
    Random random = new Random(11);
    // {batch, rows, k, n}: each of the kernel's paths (one activation row; two or three, in pairs; four or
    // more, through a dequantised tile, by blocks of 1,024 inputs on AVX-512), with weight-row tails of 1 to 7 and
    // products large enough to use the pool.
    int[][] shapes = {{2, 3, 96, 45}, {1, 1, 768, 130}, {1, 4, 256, 200}, {1, 1, 768, 1027}, {1, 2, 128, 77},
        {1, 3, 160, 1030}, {1, 8, 768, 517}, {1, 6, 2080, 21}};
    for (int[] s : shapes) {
      int m = s[0] * s[1];
      int k = s[2];
      int n = s[3];
      float[] x = random(random, m * k);
      byte[] q = new byte[n * k];
      random.nextBytes(q);
      q[0] = -128;  // the extremes of int8 convert exactly
      q[1] = 127;
      float[] scales = random(random, n * (k / 32));
      float[] y = runQ8("", s, x, q, scales);
      assertClose(reference(x, m, k, n, (i, c) -> q[c * k + i] * (double) scales[c * (k / 32) + i / 32]), y, 1e-6);
    }
  }

  /** One matmul_q8 call with {@code attributes}: x f32[batch, rows, k] of shape {batch, rows, k, n}, q s8[n, k], scales f32[n, k/32]. */
  private static float[] runQ8(String attributes, int[] shape, float[] x, byte[] q, float[] scales) {
    int k = shape[2];
    int n = shape[3];
    return run(program("xla_actors.matmul_q8", attributes, tensorType("f32", shape[0], shape[1], n), tensorType("f32", shape[0], shape[1], k),
            tensorType("i8", n, k), tensorType("f32", n, k / 32)),
        HostTensor.ofFloats(x, shape[0], shape[1], k), HostTensor.ofBytes(DType.S8, q, n, k), HostTensor.ofFloats(scales, n, k / 32));
  }

  /**
   * {@code activations = 1}: each row of x quantised to int8 by blocks of 32 at each call (llama.cpp's Q8_0
   * arithmetic), then multiplied by the int8 weights; on a CPU with AVX-512 VNNI one row is multiplied in
   * integers, more rows (and other CPUs) by the f32 kernels on the quantised values. Against the same
   * quantisation done here and a double-precision product, on every path of the kernel, with weights of -128
   * and 127, a block of zeros (scale 0) and an odd number of blocks; and not the weight-only product.
   */
  @Test
  void q8ProductsWithQuantisedActivationsMatchTheirReference() {
    Random random = new Random(12);
    int[][] shapes = {{1, 1, 768, 130}, {1, 1, 96, 45}, {1, 1, 3072, 1029}, {1, 2, 128, 77}, {1, 3, 160, 1030},
        {1, 8, 768, 517}, {2, 3, 96, 45}};
    for (int[] s : shapes) {
      int m = s[0] * s[1];
      int k = s[2];
      int n = s[3];
      float[] x = random(random, m * k);
      java.util.Arrays.fill(x, k - 32, k, 0f);  // the last block of the first row: zeros, scale 0
      x[5] = 3.5f;  // a block whose extreme is far from the rest
      byte[] q = new byte[n * k];
      random.nextBytes(q);
      q[0] = -128;
      q[1] = 127;
      q[k + 2] = -128;
      float[] scales = random(random, n * (k / 32));
      float[] quantised = quantiseQ8(x, k);
      float[] y = runQ8("activations = 1 : i32", s, x, q, scales);
      Weight w = (i, c) -> q[c * k + i] * (double) scales[c * (k / 32) + i / 32];
      assertClose(reference(quantised, m, k, n, w), y, 1e-6);
      double[][] weightOnly = reference(x, m, k, n, w);
      double largest = 0;
      for (int i = 0; i < y.length; i++) {
        largest = Math.max(largest, Math.abs(weightOnly[0][i] - y[i]) / (1e-3 + weightOnly[1][i]));
      }
      assertTrue(largest > 1e-4, "the activations were quantised: " + largest + " from the weight-only product");
    }
  }

  /** x [rows, k] quantised as the kernel does (blocks of 32: d = max |x| / 127, rint(x / d) in [-127, 127]), as f32 values. */
  private static float[] quantiseQ8(float[] x, int k) {
    float[] out = new float[x.length];
    for (int b = 0; b < x.length / 32; b++) {
      float amax = 0;
      for (int i = 0; i < 32; i++) {
        amax = Math.max(amax, Math.abs(x[b * 32 + i]));
      }
      float d = amax / 127f;
      float id = d > 0 ? 1f / d : 0f;
      for (int i = 0; i < 32; i++) {
        float v = (float) Math.min(127, Math.max(-127, Math.rint(x[b * 32 + i] * id)));
        out[b * 32 + i] = v * d;
      }
    }
    return out;
  }

  private static String failure(String program, HostTensor... inputs) {
    try (Executable exe = client.compile(program)) {
      return assertThrows(ExecutionFailedException.class, () -> exe.run(inputs)).getMessage();
    }
  }

  @Test
  void callsThatDoNotFitFailWithTheOperandAndTheFix() {
    HostTensor x = HostTensor.ofFloats(new float[6], 2, 3);
    String message = failure(program("xla_actors.matmul_f32", "", tensorType("f32", 2, 4), tensorType("f32", 2, 3),
        tensorType("f32", 5, 4)), x, HostTensor.ofFloats(new float[20], 5, 4));
    assertTrue(message.contains("xla_actors.matmul_f32: x is f32[2,3] but w is f32[5,4] ([K,N]): K differs"), message);

    message = failure(program("xla_actors.matmul_f32", "", tensorType("f32", 2, 4), tensorType("f32", 2, 3),
        tensorType("f16", 3, 4)), x, HostTensor.ofHalfFloats(new float[12], 3, 4));
    assertTrue(message.contains("w must be f32, got f16[3,4]"), message);

    message = failure(program("xla_actors.matmul_f32", "", tensorType("f32", 2, 5), tensorType("f32", 2, 3),
        tensorType("f32", 3, 4)), x, HostTensor.ofFloats(new float[12], 3, 4));
    assertTrue(message.contains("the result is f32[2,5], expected f32[2,4] for x f32[2,3]"), message);

    message = failure(program("xla_actors.matmul_f32", "w_transposed = 2 : i32", tensorType("f32", 2, 4),
        tensorType("f32", 2, 3), tensorType("f32", 3, 4)), x, HostTensor.ofFloats(new float[12], 3, 4));
    assertTrue(message.contains("attribute 'w_transposed' must be an integer 0 (w is [K,N]) or 1"), message);

    HostTensor x64 = HostTensor.ofFloats(new float[128], 2, 64);
    message = failure(program("xla_actors.matmul_q8", "", tensorType("f32", 2, 3), tensorType("f32", 2, 64), tensorType("i8", 3, 64),
        tensorType("f32", 3, 3)), x64, HostTensor.ofBytes(DType.S8, new byte[192], 3, 64), HostTensor.ofFloats(new float[9], 3, 3));
    assertTrue(message.contains("scales is f32[3,3], expected f32[3,2] (one per 32 inputs of each output)"), message);

    HostTensor x3 = HostTensor.ofFloats(new float[6], 2, 3);
    message = failure(program("xla_actors.matmul_q8", "", tensorType("f32", 2, 4), tensorType("f32", 2, 3), tensorType("i8", 4, 3),
        tensorType("f32", 4, 1)), x3, HostTensor.ofBytes(DType.S8, new byte[12], 4, 3), HostTensor.ofFloats(new float[4], 4, 1));
    assertTrue(message.contains("expected q [N,K] with K the same and a multiple of 32"), message);

    message = failure(program("xla_actors.matmul_q8", "activations = 2 : i32", tensorType("f32", 2, 3), tensorType("f32", 2, 64),
        tensorType("i8", 3, 64), tensorType("f32", 3, 2)), x64, HostTensor.ofBytes(DType.S8, new byte[192], 3, 64),
        HostTensor.ofFloats(new float[6], 3, 2));
    assertTrue(message.contains("attribute 'activations' must be an integer 0 (x multiplied as f32) or 1"), message);

    message = failure(program("xla_actors.matmul_q8", "", tensorType("f32", 2, 3), tensorType("f32", 2, 64), tensorType("f32", 3, 64),
        tensorType("f32", 3, 2)), x64, HostTensor.ofFloats(new float[192], 3, 64), HostTensor.ofFloats(new float[6], 3, 2));
    assertTrue(message.contains("q must be s8, got f32[3,64]"), message);

    message = failure(program("xla_actors.matmul_bf16", "", tensorType("f32", 2, 4), tensorType("f32", 2, 3), tensorType("f32", 4, 3)),
        x, HostTensor.ofFloats(new float[12], 4, 3));
    assertTrue(message.contains("xla_actors.matmul_bf16: w must be bf16, got f32[4,3]"), message);

    message = failure(program("xla_actors.matmul_bf16", "", tensorType("f32", 2, 3), tensorType("f32", 2, 3), tensorType("bf16", 3, 4)),
        x, HostTensor.ofBFloat16s(new float[12], 3, 4));
    assertTrue(message.contains("x is f32[2,3] but w is bf16[3,4] ([N,K]): K differs"), message);

    message = failure(program("xla_actors.matmul_f16", "", tensorType("f32", 2, 4), tensorType("f32", 2, 3), tensorType("bf16", 4, 3)),
        x, HostTensor.ofBFloat16s(new float[12], 4, 3));
    assertTrue(message.contains("xla_actors.matmul_f16: w must be f16, got bf16[4,3]"), message);
  }

  /**
   * Products large enough to be split, run from several threads at once: their parts share XLA's intra-op pool
   * (or the bridge's own), and each call must get exactly its own parts back, whichever thread ran them and
   * however late a pool thread starts.
   */
  @Test
  void concurrentSplitProductsEachGetTheirOwnResult() throws Exception {
    int m = 8;
    int k = 256;
    int n = 600;
    String program = program("xla_actors.matmul_f32", "w_transposed = 1 : i32", tensorType("f32", m, n), tensorType("f32", m, k),
        tensorType("f32", n, k));
    int callers = 4;
    int runsEach = 6;
    try (Executable exe = client.compile(program)) {
      ExecutorService pool = Executors.newFixedThreadPool(callers);
      try {
        List<Future<Integer>> checked = new ArrayList<>();
        for (int c = 0; c < callers; c++) {
          int caller = c;
          checked.add(pool.submit(() -> {
            Random random = new Random(100 + caller);
            for (int r = 0; r < runsEach; r++) {
              float[] x = random(random, m * k);
              float[] w = random(random, n * k);
              float[] y = exe.run(HostTensor.ofFloats(x, m, k), HostTensor.ofFloats(w, n, k)).get(0).toFloatArray();
              assertClose(reference(x, m, k, n, (i, col) -> w[col * k + i]), y, 1e-6);
            }
            return runsEach;
          }));
        }
        int runs = 0;
        for (Future<Integer> f : checked) {
          runs += f.get(120, TimeUnit.SECONDS);
        }
        assertEquals(callers * runsEach, runs);
      } finally {
        pool.shutdownNow();
      }
    }
  }

  @Test
  void theKernelsHonourXlasInstructionSetCap() {
    String isa = MatmulKernels.isa();
    assertTrue(Set.of("avx512-vnni", "avx512", "avx2", "portable").contains(isa), isa);
    assertTrue(MatmulKernels.threads() >= 1);
    String flags = System.getenv("XLA_FLAGS");
    String ours = System.getenv("XLA_ACTORS_KERNEL_ISA");
    if (ours == null && flags != null && flags.contains("--xla_cpu_max_isa=AVX2")) {
      assertFalse(isa.startsWith("avx512"), "XLA_FLAGS caps XLA at AVX2, and the kernels with it: " + isa);
    }
  }
}
