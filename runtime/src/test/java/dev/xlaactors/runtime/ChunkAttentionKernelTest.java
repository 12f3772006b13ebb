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
 * The bridge's native attention of a prompt chunk ({@code xla_actors.chunk_attention}: the C queries of a chunk
 * at positions start..start + C - 1 of one slot, each attending to that slot's keys and values at positions 0
 * up to its own, over a KV cache {@code [layers, 2, slots, kv_heads, positions, head_dim]}) called by a custom
 * call in a compiled program, against a double-precision softmax attention computed here: grouped-query heads,
 * head sizes and chunk lengths that fill no vector or tile evenly, chunks at the start of a slot, in its middle
 * and at the end of its context, caches of f32, f16 and bf16, chunks small enough to run on the calling thread
 * and large enough to be split over the kernel threads. Every position after the chunk's last holds NaN, so a
 * kernel that read one would answer NaN. Calls that do not fit fail with an error naming the operand (never
 * crash). CI runs this class a second time with {@code XLA_FLAGS=--xla_cpu_max_isa=AVX2}, which the kernel
 * must honour.
 */
class ChunkAttentionKernelTest {
  private static final String SCALAR = "tensor<i32>";
  private static XlaClient client;

  @BeforeAll
  static void start() {
    client = XlaClient.create();
  }

  @AfterAll
  static void stop() {
    client.close();
  }

  private static String program(String attributes, String resultType, String qType, String cacheType) {
    return program(attributes, resultType, qType, cacheType, SCALAR);
  }

  private static String program(String attributes, String resultType, String qType, String cacheType,
      String slotType) {
    return "func.func @main(%q: " + qType + ", %cache: " + cacheType + ", %slot: " + slotType + ", %start: " + SCALAR
        + ") -> " + resultType + " {\n"
        + "  %0 = stablehlo.custom_call @xla_actors.chunk_attention(%q, %cache, %slot, %start) {api_version = 4 : i32, "
        + "backend_config = {" + attributes + "}} : (" + qType + ", " + cacheType + ", " + slotType + ", " + SCALAR
        + ") -> " + resultType + "\n"
        + "  return %0 : " + resultType + "\n}\n";
  }

  private static String attributes(int layer, float scale) {
    return "layer = " + layer + " : i32, scale = " + scale + " : f32";
  }

  private static HostTensor scalar(int value) {
    return HostTensor.ofInts(new int[] {value});
  }

  /**
   * Runs the attention of a chunk of {@code length} positions from {@code start} in {@code slot} over a random
   * cache of {@code dtype} and checks every query head's output against the reference.
   */
  private static void check(Random random, KvCacheShape c, int heads, int layer, int slot, int start, int length,
      DType dtype) {
    int dh = c.headDim();
    float[] q = new float[length * heads * dh];
    for (int i = 0; i < q.length; i++) {
      q[i] = (random.nextFloat() * 2 - 1) * 3;  // scores up to ~9 sqrt(dh) / sqrt(dh): weights far from uniform
    }
    int[] used = new int[c.slots()];
    used[slot] = start + length;
    HostTensor cache = c.tensor(c.randomBelow(random, used), dtype);
    float[] stored = cache.toFloatArray();  // what the cache holds after rounding to its dtype
    float scale = (float) (1 / Math.sqrt(dh));
    String qType = KvCacheShape.tensorType("f32", length, heads, dh);
    float[] got;
    try (Executable exe = client.compile(program(attributes(layer, scale), qType, qType, c.mlirType(dtype)))) {
      List<HostTensor> out = exe.run(HostTensor.ofFloats(q, length, heads, dh), cache, scalar(slot), scalar(start));
      got = out.get(0).toFloatArray();
    }
    int group = heads / c.kvHeads();
    for (int i = 0; i < length; i++) {
      for (int h = 0; h < heads; h++) {
        int from = (i * heads + h) * dh;
        double[] expected = c.attention(stored, layer, slot, h / group, start + i + 1, q, from, scale);
        for (int d = 0; d < dh; d++) {
          // A convex combination of values in [-1, 1]: f32 sums and the kernel's exp polynomial stay within 2e-5.
          assertTrue(Math.abs(expected[d] - got[from + d]) <= 2e-5, dtype + " chunk from " + start + ", row " + i
              + " head " + h + " element " + d + ": expected " + expected[d] + ", got " + got[from + d]);
        }
      }
    }
  }

  @Test
  void smallChunksMatchTheReferenceForEachCacheDtype() {
    Random random = new Random(7);
    // 6 query heads on 2 KV heads (groups of 3), head size 20 (no tile of keys or elements fills it evenly);
    // a chunk of 5 at the start of slot 2, one of 7 across the first block of keys, one ending the context.
    KvCacheShape shape = new KvCacheShape(2, 3, 2, 90, 20);
    for (DType dtype : List.of(DType.F32, DType.F16, DType.BF16)) {
      check(random, shape, 6, 1, 2, 0, 5, dtype);
      check(random, shape, 6, 0, 0, 60, 7, dtype);
      check(random, shape, 6, 1, 1, 83, 7, dtype);
    }
  }

  @Test
  void largeChunksSplitOverTheThreadsMatchTheReference() {
    Random random = new Random(9);
    // The bench's Llama's heads (9 on 3 KV heads of 64): a chunk of 128 after 300 positions, and one of 37
    // (rows that fill no unit) after 1,000; then one KV head for 4 query heads, an f16 cache.
    check(random, new KvCacheShape(1, 2, 3, 500, 64), 9, 0, 1, 300, 128, DType.F32);
    check(random, new KvCacheShape(2, 1, 3, 1100, 64), 9, 1, 0, 1000, 37, DType.F32);
    check(random, new KvCacheShape(1, 1, 1, 400, 64), 4, 0, 0, 200, 64, DType.F16);
  }

  private static String failure(String attributes, String qType, String resultType, String cacheType,
      HostTensor... inputs) {
    try (Executable exe = client.compile(program(attributes, resultType, qType, cacheType))) {
      return assertThrows(ExecutionFailedException.class, () -> exe.run(inputs)).getMessage();
    }
  }

  @Test
  void callsThatDoNotFitFailWithTheOperandAndTheFix() {
    KvCacheShape c = new KvCacheShape(2, 3, 2, 8, 4);
    String cacheType = c.mlirType(DType.F32);
    String qType = KvCacheShape.tensorType("f32", 3, 4, 4);
    HostTensor q = HostTensor.ofFloats(new float[48], 3, 4, 4);
    HostTensor cache = HostTensor.ofFloats(new float[c.count()], c.dims());

    String message = failure(attributes(0, 0.5f), qType, qType, cacheType, q, cache, scalar(1), scalar(6));
    assertTrue(message.contains("xla_actors.chunk_attention: a chunk of 3 positions from 6 in slot 1; the cache holds "
        + "slots [0, 3) of positions [0, 8)"), message);

    message = failure(attributes(0, 0.5f), qType, qType, cacheType, q, cache, scalar(3), scalar(0));
    assertTrue(message.contains("a chunk of 3 positions from 0 in slot 3"), message);

    message = failure(attributes(0, 0.5f), qType, qType, cacheType, q, cache, scalar(0), scalar(-1));
    assertTrue(message.contains("a chunk of 3 positions from -1 in slot 0"), message);

    message = failure(attributes(2, 0.5f), qType, qType, cacheType, q, cache, scalar(0), scalar(0));
    assertTrue(message.contains("attribute 'layer' must be an integer in [0, 2) (the cache's layers), got 2"), message);

    message = failure("layer = 0 : i32", qType, qType, cacheType, q, cache, scalar(0), scalar(0));
    assertTrue(message.contains("attribute 'scale' must be a float scalar"), message);

    String q3 = KvCacheShape.tensorType("f32", 3, 3, 4);
    message = failure(attributes(0, 0.5f), q3, q3, cacheType, HostTensor.ofFloats(new float[36], 3, 3, 4), cache,
        scalar(0), scalar(0));
    assertTrue(message.contains("q has 3 heads, not a multiple of the cache's 2 KV heads"), message);

    String q5 = KvCacheShape.tensorType("f32", 3, 4, 5);
    message = failure(attributes(0, 0.5f), q5, q5, cacheType, HostTensor.ofFloats(new float[60], 3, 4, 5), cache,
        scalar(0), scalar(0));
    assertTrue(message.contains("cache must be f32, f16 or bf16 [layers,2,slots,kv_heads,positions,5] (q's head size), "
        + "got f32[2,2,3,2,8,4]"), message);
  }

  @Test
  void aSlotThatIsNotOneIntegerIsRefused() {
    KvCacheShape c = new KvCacheShape(1, 2, 1, 8, 4);
    String cacheType = c.mlirType(DType.F32);
    String qType = KvCacheShape.tensorType("f32", 2, 1, 4);
    String pair = KvCacheShape.tensorType("i32", 2);
    try (Executable exe = client.compile(program(attributes(0, 0.5f), qType, qType, cacheType, pair))) {
      HostTensor q = HostTensor.ofFloats(new float[8], 2, 1, 4);
      HostTensor cache = HostTensor.ofFloats(new float[c.count()], c.dims());
      String message = assertThrows(ExecutionFailedException.class,
          () -> exe.run(q, cache, HostTensor.ofInts(new int[] {0, 1}, 2), scalar(0))).getMessage();
      assertTrue(message.contains("slot must be one s32, got s32[2]"), message);
    }
  }
}
