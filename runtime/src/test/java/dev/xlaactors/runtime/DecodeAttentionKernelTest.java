package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.ExecutionFailedException;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The bridge's native decode attention ({@code xla_actors.decode_attention}: one decoding step of B sequences
 * over a KV cache {@code [layers, 2, slots, kv_heads, positions, head_dim]}) called by a custom call in a
 * compiled program, against a double-precision softmax attention computed here: grouped-query heads, head
 * sizes that are not a multiple of any vector length, caches of f32, f16 and bf16, steps small enough to run
 * on the calling thread and large enough to be split over the kernel threads. Every cache position after a
 * sequence's own holds NaN, so a kernel that read one would answer NaN. Calls that do not fit fail with an
 * error naming the operand (never crash). CI runs this class a second time with
 * {@code XLA_FLAGS=--xla_cpu_max_isa=AVX2}, which the kernel must honour.
 */
class DecodeAttentionKernelTest {
  private static XlaClient client;

  @BeforeAll
  static void start() {
    client = XlaClient.create();
  }

  @AfterAll
  static void stop() {
    client.close();
  }

  private static String program(String attributes, String resultType, String qType, String cacheType, int batch) {
    String index = KvCacheShape.tensorType("i32", batch);
    return "func.func @main(%q: " + qType + ", %cache: " + cacheType + ", %slots: " + index + ", %positions: "
        + index + ") -> " + resultType + " {\n"
        + "  %0 = stablehlo.custom_call @xla_actors.decode_attention(%q, %cache, %slots, %positions) {api_version = 4 : i32, "
        + "backend_config = {" + attributes + "}} : (" + qType + ", " + cacheType + ", " + index + ", " + index
        + ") -> " + resultType + "\n"
        + "  return %0 : " + resultType + "\n}\n";
  }

  private static String attributes(int layer, float scale) {
    return "layer = " + layer + " : i32, scale = " + scale + " : f32";
  }

  /**
   * Runs one step over a random cache of {@code dtype} and checks it against the reference. Every position
   * no sequence reads holds NaN.
   */
  private static void check(Random random, KvCacheShape c, int heads, int layer, int[] slots, int[] positions,
      DType dtype) {
    int batch = slots.length;
    int dh = c.headDim();
    float[] q = new float[batch * heads * dh];
    for (int i = 0; i < q.length; i++) {
      q[i] = random.nextFloat() * 2 - 1;
    }
    int[] used = new int[c.slots()];  // positions any sequence reads of each slot; slots none reads: 0
    for (int b = 0; b < batch; b++) {
      used[slots[b]] = Math.max(used[slots[b]], positions[b] + 1);
    }
    HostTensor cache = c.tensor(c.randomBelow(random, used), dtype);
    float[] stored = cache.toFloatArray();  // what the cache holds after rounding to its dtype
    float scale = (float) (1 / Math.sqrt(dh));
    String qType = KvCacheShape.tensorType("f32", batch, heads, dh);
    String cacheType = c.mlirType(dtype);
    float[] got;
    try (Executable exe = client.compile(program(attributes(layer, scale), qType, qType, cacheType, batch))) {
      List<HostTensor> out = exe.run(HostTensor.ofFloats(q, batch, heads, dh), cache, HostTensor.ofInts(slots, batch),
          HostTensor.ofInts(positions, batch));
      got = out.get(0).toFloatArray();
    }
    int group = heads / c.kvHeads();
    for (int b = 0; b < batch; b++) {
      for (int h = 0; h < heads; h++) {
        double[] expected = c.attention(stored, layer, slots[b], h / group, positions[b] + 1, q,
            (b * heads + h) * dh, scale);
        for (int d = 0; d < dh; d++) {
          float actual = got[(b * heads + h) * dh + d];
          // A convex combination of values in [-1, 1]: f32 sums and the kernel's exp polynomial stay within 2e-5.
          assertTrue(Math.abs(expected[d] - actual) <= 2e-5, dtype + " sequence " + b + " head " + h + " element " + d
              + ": expected " + expected[d] + ", got " + actual);
        }
      }
    }
  }

  @Test
  void smallStepsMatchTheReferenceForEachCacheDtype() {
    Random random = new Random(3);
    // 6 query heads on 2 KV heads (groups of 3), head size 20 (a vector tail for every width); sequences in
    // slots 2, 0, 2 again and 1, at their first position, the last one, and between.
    KvCacheShape shape = new KvCacheShape(2, 3, 2, 37, 20);
    for (DType dtype : List.of(DType.F32, DType.F16, DType.BF16)) {
      check(random, shape, 6, 1, new int[] {2, 0, 2, 1}, new int[] {0, 36, 17, 5}, dtype);
    }
  }

  @Test
  void largeStepsSplitOverTheThreadsMatchTheReference() {
    Random random = new Random(5);
    // 8 sequences of 12 heads of 64 (GPT-2's), split by sequence and KV head; then one sequence whose 4 heads
    // share one KV head, split by query head.
    check(random, new KvCacheShape(1, 8, 12, 300, 64), 12, 0, new int[] {0, 1, 2, 3, 4, 5, 6, 7},
        new int[] {299, 0, 150, 77, 298, 31, 200, 1}, DType.F32);
    check(random, new KvCacheShape(2, 1, 1, 1000, 64), 4, 1, new int[] {0}, new int[] {999}, DType.F16);
  }

  private static String failure(String attributes, String qType, String resultType, String cacheType, int batch,
      HostTensor... inputs) {
    try (Executable exe = client.compile(program(attributes, resultType, qType, cacheType, batch))) {
      return assertThrows(ExecutionFailedException.class, () -> exe.run(inputs)).getMessage();
    }
  }

  @Test
  void callsThatDoNotFitFailWithTheOperandAndTheFix() {
    KvCacheShape c = new KvCacheShape(2, 3, 2, 8, 4);
    String cacheType = KvCacheShape.tensorType("f32", c.dims());
    String qType = KvCacheShape.tensorType("f32", 2, 4, 4);
    HostTensor q = HostTensor.ofFloats(new float[32], 2, 4, 4);
    HostTensor cache = HostTensor.ofFloats(new float[c.count()], c.dims());

    String message = failure(attributes(0, 0.5f), qType, qType, cacheType, 2, q, cache,
        HostTensor.ofInts(new int[] {0, 3}, 2), HostTensor.ofInts(new int[] {1, 2}, 2));
    assertTrue(message.contains("xla_actors.decode_attention: sequence 1 has slot 3 and position 2; the cache holds "
        + "slots [0, 3) of positions [0, 8)"), message);

    message = failure(attributes(0, 0.5f), qType, qType, cacheType, 2, q, cache,
        HostTensor.ofInts(new int[] {0, 1}, 2), HostTensor.ofInts(new int[] {8, 2}, 2));
    assertTrue(message.contains("sequence 0 has slot 0 and position 8"), message);

    message = failure(attributes(2, 0.5f), qType, qType, cacheType, 2, q, cache,
        HostTensor.ofInts(new int[] {0, 1}, 2), HostTensor.ofInts(new int[] {1, 2}, 2));
    assertTrue(message.contains("attribute 'layer' must be an integer in [0, 2) (the cache's layers), got 2"), message);

    message = failure("layer = 0 : i32", qType, qType, cacheType, 2, q, cache,
        HostTensor.ofInts(new int[] {0, 1}, 2), HostTensor.ofInts(new int[] {1, 2}, 2));
    assertTrue(message.contains("attribute 'scale' must be a float scalar"), message);

    String q3 = KvCacheShape.tensorType("f32", 2, 3, 4);
    message = failure(attributes(0, 0.5f), q3, q3, cacheType, 2, HostTensor.ofFloats(new float[24], 2, 3, 4), cache,
        HostTensor.ofInts(new int[] {0, 1}, 2), HostTensor.ofInts(new int[] {1, 2}, 2));
    assertTrue(message.contains("q has 3 heads, not a multiple of the cache's 2 KV heads"), message);

    String q5 = KvCacheShape.tensorType("f32", 2, 4, 5);
    message = failure(attributes(0, 0.5f), q5, q5, cacheType, 2, HostTensor.ofFloats(new float[40], 2, 4, 5), cache,
        HostTensor.ofInts(new int[] {0, 1}, 2), HostTensor.ofInts(new int[] {1, 2}, 2));
    assertTrue(message.contains("cache must be f32, f16 or bf16 [layers,2,slots,kv_heads,positions,5] (q's head size), "
        + "got f32[2,2,3,2,8,4]"), message);
  }
}
