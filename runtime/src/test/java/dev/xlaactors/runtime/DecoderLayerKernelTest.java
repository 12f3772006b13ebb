package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.ExecutionFailedException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The bridge's fused decoder layer ({@code xla_actors.decoder_layer}: one decoding step of a whole pre-norm
 * transformer layer for B sequences, the KV cache updated in place through the call's output-operand alias)
 * called by a custom call in a compiled program, against the same layer computed here in double precision from
 * the same weights: GPT-2's form (layer norms, one q|k|v product, biases on every product, GELU) with f32
 * weights and an f32 cache, and Llama's (RMS norms, three q, k, v products with biases, rotary positions,
 * grouped-query attention, SwiGLU) with int8 weights and f16 and bf16 caches, and both forms with bf16 and f16
 * weights. The cache comes back with this
 * step's keys and values at each sequence's position and every other element as it was. Calls that do not fit
 * fail with an error naming the operand (never crash). CI runs this class a second time with
 * {@code XLA_FLAGS=--xla_cpu_max_isa=AVX2}, which the kernel must honour.
 */
class DecoderLayerKernelTest {
  private static XlaClient client;

  @BeforeAll
  static void start() {
    client = XlaClient.create();
  }

  @AfterAll
  static void stop() {
    client.close();
  }

  /** A layer's form: decoder_layer's attributes and sizes; its products' weights F32, BF16, F16 or S8 (int8 and scales). */
  private record Form(boolean rms, int mlp, boolean rope, boolean fusedQkv, DType weights, int biases, int d, int heads,
      int kvHeads, int headDim, int hidden) {
    boolean q8() {
      return weights == DType.S8;
    }

    /** Each product's [N, K], in decoder_layer's order. */
    List<int[]> shapes() {
      List<int[]> s = new ArrayList<>();
      int q = heads * headDim;
      int kv = kvHeads * headDim;
      if (fusedQkv) {
        s.add(new int[] {q + 2 * kv, d});
      } else {
        s.add(new int[] {q, d});
        s.add(new int[] {kv, d});
        s.add(new int[] {kv, d});
      }
      s.add(new int[] {d, q});
      s.add(new int[] {hidden, d});
      if (mlp == 2) {
        s.add(new int[] {hidden, d});
      }
      s.add(new int[] {d, hidden});
      return s;
    }
  }

  private static String type(HostTensor t) {
    return t.type().mlir();
  }

  private static String program(String attributes, List<HostTensor> operands) {
    StringBuilder params = new StringBuilder();
    StringBuilder names = new StringBuilder();
    StringBuilder types = new StringBuilder();
    for (int i = 0; i < operands.size(); i++) {
      String sep = i == 0 ? "" : ", ";
      params.append(sep).append("%a").append(i).append(": ").append(type(operands.get(i)));
      names.append(sep).append("%a").append(i);
      types.append(sep).append(type(operands.get(i)));
    }
    String resultTypes = type(operands.get(0)) + ", " + type(operands.get(1));
    String results = "(" + resultTypes + ")";
    return "func.func @main(" + params + ") -> " + results + " {\n"
        + "  %0:2 = stablehlo.custom_call @xla_actors.decoder_layer(" + names + ") {api_version = 4 : i32, "
        + "backend_config = {" + attributes + "}, output_operand_aliases = [#stablehlo.output_operand_alias<"
        + "output_tuple_indices = [1], operand_index = 1, operand_tuple_indices = []>]} : (" + types + ") -> " + results
        + "\n  return %0#0, %0#1 : " + resultTypes + "\n}\n";
  }

  private static String attributes(Form f, int layer, float eps, float scale) {
    return "layer = " + layer + " : i32, norm = " + (f.rms() ? 1 : 0) + " : i32, mlp = " + f.mlp() + " : i32, rope = "
        + (f.rope() ? 1 : 0) + " : i32, heads = " + f.heads() + " : i32, qkv = " + (f.fusedQkv() ? 1 : 3) + " : i32, q8 = "
        + (f.q8() ? 1 : 0) + " : i32, biases = " + f.biases() + " : i32, eps = " + eps + " : f32, scale = " + scale + " : f32";
  }

  private static float[] random(Random r, int n, double range) {
    float[] a = new float[n];
    for (int i = 0; i < n; i++) {
      a[i] = (float) ((r.nextDouble() * 2 - 1) * range);
    }
    return a;
  }

  /** Runs one step of a random layer of form f and checks it against the reference. */
  private static void check(Random r, Form f, DType cacheDtype, int layers, int slots, int positions, int layer,
      int[] slot, int[] position) {
    int batch = slot.length;
    int dh = f.headDim();
    int kvh = f.kvHeads();
    long[] cacheDims = {layers, 2, slots, kvh, positions, dh};
    float eps = 1e-5f;
    float scale = (float) (1 / Math.sqrt(dh));
    float[] x = random(r, batch * f.d(), 1);
    float[] cacheValues = random(r, layers * 2 * slots * kvh * positions * dh, 1);
    HostTensor cache = switch (cacheDtype) {
      case F32 -> HostTensor.ofFloats(cacheValues, cacheDims);
      case F16 -> HostTensor.ofHalfFloats(cacheValues, cacheDims);
      default -> HostTensor.ofBFloat16s(cacheValues, cacheDims);
    };
    float[] stored = cache.toFloatArray();
    List<HostTensor> operands = new ArrayList<>(List.of(HostTensor.ofFloats(x, batch, f.d()), cache,
        HostTensor.ofInts(slot, batch), HostTensor.ofInts(position, batch)));
    float[] invFreq = new float[dh / 2];
    for (int j = 0; j < dh / 2; j++) {
      invFreq[j] = (float) Math.pow(10000, -2.0 * j / dh);
    }
    if (f.rope()) {
      operands.add(HostTensor.ofFloats(invFreq, dh / 2));
    }
    float[][] norms = new float[4][];  // norm1 weight, bias; norm2 weight, bias
    for (int i = 0; i < 4; i++) {
      norms[i] = random(r, f.d(), 1);
    }
    List<int[]> shapes = f.shapes();
    double[][] weights = new double[shapes.size()][];  // [N*K] as the kernel multiplies by (dequantised)
    float[][] biases = new float[shapes.size()][];
    List<HostTensor> linearOperands = new ArrayList<>();
    for (int j = 0; j < shapes.size(); j++) {
      int n = shapes.get(j)[0];
      int k = shapes.get(j)[1];
      weights[j] = new double[n * k];
      if (f.q8()) {
        byte[] q = new byte[n * k];
        float[] scales = random(r, n * k / 32, 0.02);
        for (int i = 0; i < q.length; i++) {
          q[i] = (byte) (r.nextInt(255) - 127);
          weights[j][i] = q[i] * (double) scales[i / 32];
        }
        linearOperands.add(HostTensor.ofBytes(DType.S8, q, n, k));
        linearOperands.add(HostTensor.ofFloats(scales, n, k / 32));
      } else {
        float[] drawn = random(r, n * k, 1 / Math.sqrt(k));
        HostTensor w = switch (f.weights()) {
          case BF16 -> HostTensor.ofBFloat16s(drawn, n, k);
          case F16 -> HostTensor.ofHalfFloats(drawn, n, k);
          default -> HostTensor.ofFloats(drawn, n, k);
        };
        float[] values = w.toFloatArray();  // bf16, f16: the weights' values as stored
        for (int i = 0; i < values.length; i++) {
          weights[j][i] = values[i];
        }
        linearOperands.add(w);
      }
      if ((f.biases() >> j & 1) == 1) {
        biases[j] = random(r, n, 0.5);
        linearOperands.add(HostTensor.ofFloats(biases[j], n));
      }
    }
    // The operands in decoder_layer's order: norm1, the q|k|v and o products, norm2, the MLP's.
    int attentionProducts = f.fusedQkv() ? 2 : 4;
    int split = 0;
    for (int j = 0; j < attentionProducts; j++) {
      split += (f.q8() ? 2 : 1) + (f.biases() >> j & 1);
    }
    operands.add(HostTensor.ofFloats(norms[0], f.d()));
    if (!f.rms()) {
      operands.add(HostTensor.ofFloats(norms[1], f.d()));
    }
    operands.addAll(linearOperands.subList(0, split));
    operands.add(HostTensor.ofFloats(norms[2], f.d()));
    if (!f.rms()) {
      operands.add(HostTensor.ofFloats(norms[3], f.d()));
    }
    operands.addAll(linearOperands.subList(split, linearOperands.size()));

    float[] gotX;
    float[] gotCache;
    try (Executable exe = client.compile(program(attributes(f, layer, eps, scale), operands))) {
      List<HostTensor> out = exe.run(operands.toArray(HostTensor[]::new));
      gotX = out.get(0).toFloatArray();
      gotCache = out.get(1).toFloatArray();
    }

    // The reference, in double, over the cache as stored (rounded to its dtype) with this step's keys and values
    // rounded the same way.
    int qDim = f.heads() * dh;
    int kvDim = kvh * dh;
    float[] expectedCache = stored.clone();
    for (int b = 0; b < batch; b++) {
      double[] xb = new double[f.d()];
      for (int i = 0; i < f.d(); i++) {
        xb[i] = x[b * f.d() + i];
      }
      double[] h = norm(xb, norms[0], f.rms() ? null : norms[1], eps);
      double[] q;
      double[] k;
      double[] v;
      int next;
      if (f.fusedQkv()) {
        double[] all = product(weights[0], biases[0], h, qDim + 2 * kvDim);
        q = Arrays.copyOfRange(all, 0, qDim);
        k = Arrays.copyOfRange(all, qDim, qDim + kvDim);
        v = Arrays.copyOfRange(all, qDim + kvDim, qDim + 2 * kvDim);
        next = 1;
      } else {
        q = product(weights[0], biases[0], h, qDim);
        k = product(weights[1], biases[1], h, kvDim);
        v = product(weights[2], biases[2], h, kvDim);
        next = 3;
      }
      if (f.rope()) {
        rope(q, f.heads(), dh, invFreq, position[b]);
        rope(k, kvh, dh, invFreq, position[b]);
      }
      float[] rounded = new float[2 * kvDim];
      for (int i = 0; i < kvDim; i++) {
        rounded[i] = (float) k[i];
        rounded[kvDim + i] = (float) v[i];
      }
      rounded = switch (cacheDtype) {
        case F32 -> rounded;
        case F16 -> HostTensor.ofHalfFloats(rounded, rounded.length).toFloatArray();
        default -> HostTensor.ofBFloat16s(rounded, rounded.length).toFloatArray();
      };
      for (int kv = 0; kv < 2; kv++) {
        for (int g = 0; g < kvh; g++) {
          int at = ((((layer * 2 + kv) * slots + slot[b]) * kvh + g) * positions + position[b]) * dh;
          System.arraycopy(rounded, kv * kvDim + g * dh, expectedCache, at, dh);
        }
      }
      double[] attended = new double[qDim];
      int group = f.heads() / kvh;
      for (int hd = 0; hd < f.heads(); hd++) {
        int g = hd / group;
        int n = position[b] + 1;
        double[] w = new double[n];
        double top = Double.NEGATIVE_INFINITY;
        for (int t = 0; t < n; t++) {
          int at = (((layer * 2) * slots + slot[b]) * kvh + g) * positions * dh + t * dh;
          double dot = 0;
          for (int d = 0; d < dh; d++) {
            dot += q[hd * dh + d] * expectedCache[at + d];
          }
          w[t] = dot * scale;
          top = Math.max(top, w[t]);
        }
        double total = 0;
        for (int t = 0; t < n; t++) {
          w[t] = Math.exp(w[t] - top);
          total += w[t];
        }
        for (int t = 0; t < n; t++) {
          int at = ((((layer * 2 + 1) * slots + slot[b]) * kvh + g) * positions + t) * dh;
          for (int d = 0; d < dh; d++) {
            attended[hd * dh + d] += w[t] / total * expectedCache[at + d];
          }
        }
      }
      double[] o = product(weights[next], biases[next], attended, f.d());
      double[] x1 = new double[f.d()];
      for (int i = 0; i < f.d(); i++) {
        x1[i] = xb[i] + o[i];
      }
      double[] h2 = norm(x1, norms[2], f.rms() ? null : norms[3], eps);
      double[] hidden;
      int down;
      if (f.mlp() == 2) {
        double[] gate = product(weights[next + 1], biases[next + 1], h2, f.hidden());
        double[] up = product(weights[next + 2], biases[next + 2], h2, f.hidden());
        hidden = new double[f.hidden()];
        for (int i = 0; i < hidden.length; i++) {
          hidden[i] = gate[i] / (1 + Math.exp(-gate[i])) * up[i];
        }
        down = next + 3;
      } else {
        hidden = product(weights[next + 1], biases[next + 1], h2, f.hidden());
        for (int i = 0; i < hidden.length; i++) {
          double u = hidden[i];
          hidden[i] = f.mlp() == 0 ? 0.5 * u * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (u + 0.044715 * u * u * u)))
              : 0.5 * u * (1 + erf(u / Math.sqrt(2)));
        }
        down = next + 2;
      }
      double[] lowered = product(weights[down], biases[down], hidden, f.d());
      for (int i = 0; i < f.d(); i++) {
        double expected = x1[i] + lowered[i];
        float actual = gotX[b * f.d() + i];
        assertTrue(Math.abs(expected - actual) <= 1e-4 * (1 + Math.abs(expected)), f + " " + cacheDtype + " sequence " + b
            + " element " + i + ": expected " + expected + ", got " + actual);
      }
    }
    // Keys and values within the rounding of one f32 product (the kernel's and ours may round a last bit apart
    // before the cache's dtype does); everything else exactly as it was.
    double keyTolerance = cacheDtype == DType.F32 ? 1e-5 : cacheDtype == DType.F16 ? 2e-3 : 1.6e-2;
    for (int i = 0; i < expectedCache.length; i++) {
      if (expectedCache[i] == stored[i]) {
        assertEquals(stored[i], gotCache[i], 0, "cache element " + i + " is not this step's and stays as it was");
      } else {
        assertTrue(Math.abs(expectedCache[i] - gotCache[i]) <= keyTolerance * (1 + Math.abs(expectedCache[i])),
            "cache element " + i + ": expected " + expectedCache[i] + ", got " + gotCache[i]);
      }
    }
  }

  private static double[] norm(double[] x, float[] weight, float[] bias, float eps) {
    int n = x.length;
    double mean = 0;
    if (bias != null) {
      for (double v : x) {
        mean += v / n;
      }
    }
    double var = 0;
    for (double v : x) {
      var += (v - mean) * (v - mean) / n;
    }
    double inv = 1 / Math.sqrt(var + eps);
    double[] y = new double[n];
    for (int i = 0; i < n; i++) {
      y[i] = (x[i] - mean) * inv * weight[i] + (bias == null ? 0 : bias[i]);
    }
    return y;
  }

  private static double[] product(double[] w, float[] bias, double[] x, int n) {
    int k = x.length;
    double[] y = new double[n];
    for (int i = 0; i < n; i++) {
      double s = bias == null ? 0 : bias[i];
      for (int j = 0; j < k; j++) {
        s += w[i * k + j] * x[j];
      }
      y[i] = s;
    }
    return y;
  }

  private static void rope(double[] x, int heads, int dh, float[] invFreq, int position) {
    int half = dh / 2;
    for (int h = 0; h < heads; h++) {
      for (int j = 0; j < half; j++) {
        double angle = (float) position * invFreq[j];
        double a = x[h * dh + j];
        double b = x[h * dh + j + half];
        x[h * dh + j] = a * Math.cos(angle) - b * Math.sin(angle);
        x[h * dh + j + half] = b * Math.cos(angle) + a * Math.sin(angle);
      }
    }
  }

  /** erf to 1.5e-7 (Abramowitz and Stegun 7.1.26). */
  private static double erf(double x) {
    double z = Math.abs(x);
    double t = 1 / (1 + 0.3275911 * z);
    double y = 1 - ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
        * Math.exp(-z * z);
    return Math.signum(x) * y;
  }

  @Test
  void gpt2LayerWithF32WeightsMatchesTheReference() {
    Random random = new Random(11);
    // 4 heads of 12 (a vector tail), biases on all four products, GELU's tanh form; two sequences in slots 2
    // and 0 at positions 5 and 0, layer 1 of 2.
    Form gpt2 = new Form(false, 0, false, true, DType.F32, 0b1111, 48, 4, 4, 12, 96);
    check(random, gpt2, DType.F32, 2, 3, 9, 1, new int[] {2, 0}, new int[] {5, 0});
    // Exact GELU (erf), one sequence, a longer step split over the threads.
    Form erf = new Form(false, 1, false, true, DType.F32, 0b1111, 256, 4, 4, 64, 1024);
    check(random, erf, DType.F32, 1, 1, 300, 0, new int[] {0}, new int[] {299});
  }

  @Test
  void llamaLayerWithInt8WeightsMatchesTheReferenceOnHalfCaches() {
    Random random = new Random(13);
    // RMS norms, q, k, v with biases (Qwen2's), rotary positions, 6 query heads on 2 KV heads, SwiGLU, int8 weights;
    // three sequences, each in its own slot (a step writes every sequence's key before any attends).
    Form llama = new Form(true, 2, true, false, DType.S8, 0b0000111, 64, 6, 2, 16, 128);
    check(random, llama, DType.F16, 2, 3, 40, 0, new int[] {1, 0, 2}, new int[] {39, 7, 3});
    check(random, llama, DType.BF16, 1, 1, 40, 0, new int[] {0}, new int[] {20});
    check(random, llama, DType.F32, 3, 2, 17, 2, new int[] {0}, new int[] {16});
  }

  @Test
  void layersWithHalfWidthWeightsMatchTheReferenceOnTheirValues() {
    Random random = new Random(17);
    // GPT-2's form (one q|k|v product, biases, GELU) and Llama's (q, k, v, rotary positions, grouped-query
    // attention, SwiGLU), every product's weights bf16, then f16: the products are the f32 kernel's on the
    // weights' values.
    Form gpt2 = new Form(false, 0, false, true, DType.BF16, 0b1111, 48, 4, 4, 12, 96);
    check(random, gpt2, DType.F32, 2, 3, 9, 1, new int[] {2, 0}, new int[] {5, 0});
    Form llama = new Form(true, 2, true, false, DType.BF16, 0, 256, 8, 2, 32, 768);
    check(random, llama, DType.F32, 1, 1, 300, 0, new int[] {0}, new int[] {299});
    check(random, llama, DType.F16, 2, 5, 20, 1, new int[] {4, 1, 0, 2, 3}, new int[] {1, 19, 0, 7, 8});
    Form halfLlama = new Form(true, 2, true, false, DType.F16, 0b0000111, 64, 6, 2, 16, 128);
    check(random, halfLlama, DType.F32, 2, 3, 40, 1, new int[] {1, 0, 2}, new int[] {39, 7, 3});
    Form halfGpt2 = new Form(false, 0, false, true, DType.F16, 0b1111, 48, 4, 4, 12, 96);
    check(random, halfGpt2, DType.BF16, 1, 2, 9, 0, new int[] {1}, new int[] {8});
  }

  private static String failure(String attributes, List<HostTensor> operands) {
    try (Executable exe = client.compile(program(attributes, operands))) {
      return assertThrows(ExecutionFailedException.class, () -> exe.run(operands.toArray(HostTensor[]::new))).getMessage();
    }
  }

  @Test
  void callsThatDoNotFitFailWithTheOperandAndTheFix() {
    Form f = new Form(true, 2, false, false, DType.F32, 0, 32, 2, 2, 8, 64);
    long[] cacheDims = {1, 2, 2, 2, 4, 8};
    List<HostTensor> base = new ArrayList<>(List.of(HostTensor.ofFloats(new float[32], 1, 32),
        HostTensor.ofFloats(new float[2 * 2 * 2 * 4 * 8], cacheDims), HostTensor.ofInts(new int[] {0}, 1),
        HostTensor.ofInts(new int[] {4}, 1)));
    List<HostTensor> operands = new ArrayList<>(base);
    operands.add(HostTensor.ofFloats(new float[32], 32));
    for (int[] s : f.shapes().subList(0, 4)) {
      operands.add(HostTensor.ofFloats(new float[s[0] * s[1]], s[0], s[1]));
    }
    operands.add(HostTensor.ofFloats(new float[32], 32));
    for (int[] s : f.shapes().subList(4, 7)) {
      operands.add(HostTensor.ofFloats(new float[s[0] * s[1]], s[0], s[1]));
    }
    String message = failure(attributes(f, 0, 1e-5f, 0.5f), operands);
    assertTrue(message.contains("xla_actors.decoder_layer: sequence 0 has slot 0 and position 4; the cache holds slots "
        + "[0, 2) of positions [0, 4)"), message);

    operands.set(3, HostTensor.ofInts(new int[] {3}, 1));
    message = failure(attributes(f, 1, 1e-5f, 0.5f), operands);
    assertTrue(message.contains("attribute 'layer' is 1, the cache has layers [0, 1)"), message);

    operands.set(6, HostTensor.ofFloats(new float[16 * 31], 16, 31));  // k's weights [16, 31], not [16, 32]
    message = failure(attributes(f, 0, 1e-5f, 0.5f), operands);
    assertTrue(message.contains("k weights (operand 6) must be f32[16,32], got f32[16,31]"), message);

    operands.set(6, HostTensor.ofBFloat16s(new float[16 * 32], 16, 32));  // bf16 among f32 products
    message = failure(attributes(f, 0, 1e-5f, 0.5f), operands);
    assertTrue(message.contains("k weights (operand 6) must be f32[16,32], got bf16[16,32] (every product's weights "
        + "are the first's dtype)"), message);
    operands.set(6, HostTensor.ofFloats(new float[16 * 32], 16, 32));
    operands.set(5, HostTensor.ofDoubles(new double[16 * 32], 16, 32));  // the first product in f64
    message = failure(attributes(f, 0, 1e-5f, 0.5f), operands);
    assertTrue(message.contains("q weights (operand 5) must be f32[16,32], bf16[16,32] or f16[16,32], got f64[16,32]"),
        message);
    operands.set(5, HostTensor.ofFloats(new float[16 * 32], 16, 32));

    message = failure(attributes(new Form(true, 2, false, false, DType.F32, 1, 32, 2, 2, 8, 64), 0, 1e-5f, 0.5f), operands);
    assertTrue(message.contains("expected 14 operands and 2 results for these attributes (biases 1 over 7 products), got 13"),
        message);
  }
}
