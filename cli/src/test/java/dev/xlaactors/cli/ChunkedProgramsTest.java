package dev.xlaactors.cli;

import static dev.xlaactors.cli.HfFixtures.ints;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.lm.LanguageModel;
import dev.xlaactors.lm.PackageSlotDecoder;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.ProgramSpec;
import dev.xlaactors.runtime.model.Role;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.IntStream;
import java.util.stream.StreamSupport;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Chunked prefill, scoring by chunks and decode programs of several batches and windows (importer 2), on the
 * Llama fixture of {@link HfParityTest} (64 positions) imported with small chunks and windows so that every
 * path runs: they give transformers' logits and greedy tokens, the same logits as one whole-sequence run of the
 * score program, and take prompts up to the context, written in parts, decoding together as each alone; so do
 * the bridge's native decode kernels (--kernels native, import's default, which the whole-run package has) and
 * an f16 cache, within its tolerance. The chunked and f16-cache packages are --kernels xla (XLA's dots and
 * attention, the portable package), so the chunked-against-whole checks also hold one kernel to the other. Each
 * package is loaded once (a load compiles every program).
 */
class ChunkedProgramsTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Path FIXTURE = Path.of("src/test/resources/hf/llama");

  @TempDir
  static Path packages;

  private static Path chunkedDir;
  private static ActorTestKit testKit;
  private static XlaClient client;
  private static CallbackRuntime runtime;
  private static LanguageModel chunked;
  private static LanguageModel whole;
  private static LanguageModel halfCache;
  private static LanguageModel nativeKernels;
  private static LanguageModel nativeHalfCache;

  @BeforeAll
  static void importAndLoadBoth() {
    System.setProperty("dev.xlaactors.cli.home", Path.of("..").toAbsolutePath().normalize().toString());
    chunkedDir = packages.resolve("chunked");
    // Chunks attend to the cache by blocks of 24 positions: 0-23, 24-47 and the last, which the context of 64
    // ends early (read from 40 on, its first 8 positions masked).
    // XLA's own kernels (--kernels xla, the portable package), whose decode programs are per length bucket.
    importHf(chunkedDir, "--slots", "1,2", "--prefill-chunks", "4,8", "--decode-lengths", "8,16", "--score-length", "4",
        "--attention-block", "24", "--kernels", "xla");
    // import's defaults: prompts and scores of the fixture's whole 64 positions run as one chunk of 64 (the
    // package OpenAiClientsTest serves; one import per build for both)
    Path wholeDir = importedWithDefaults();
    // The same programs over a KV cache of f16 (--kv-cache-dtype): half the memory a position takes.
    Path halfCacheDir = packages.resolve("f16-cache");
    importHf(halfCacheDir, "--slots", "1,2", "--prefill-chunks", "8", "--decode-lengths", "16", "--score-length", "4",
        "--kv-cache-dtype", "f16", "--kernels", "xla");
    // The bridge's native kernels (--kernels native): decode's matmuls and its attention, which reads each
    // sequence's positions in the cache where they lie (one window, the context, for every length).
    Path nativeDir = packages.resolve("native");
    importHf(nativeDir, "--slots", "1,2", "--prefill-chunks", "8", "--score-length", "4", "--kernels", "native");
    // Its f16-cache twin: the decode steps' fused layers write their keys and values into the f16 cache themselves.
    Path nativeHalfDir = packages.resolve("native-f16");
    importHf(nativeHalfDir, "--slots", "1,2", "--prefill-chunks", "8", "--score-length", "4", "--kv-cache-dtype", "f16",
        "--kernels", "native");
    testKit = ActorTestKit.create();
    client = XlaClient.create(LanguageModel.clientSettings());
    runtime = CallbackRuntime.create(testKit.system(), client);
    chunked = LanguageModel.load(ModelPackage.open(chunkedDir), client.devices().get(0), runtime);
    whole = LanguageModel.load(ModelPackage.open(wholeDir), client.devices().get(0), runtime);
    halfCache = LanguageModel.load(ModelPackage.open(halfCacheDir), client.devices().get(0), runtime);
    nativeKernels = LanguageModel.load(ModelPackage.open(nativeDir), client.devices().get(0), runtime);
    nativeHalfCache = LanguageModel.load(ModelPackage.open(nativeHalfDir), client.devices().get(0), runtime);
  }

  @AfterAll
  static void close() {
    chunked.close();
    whole.close();
    halfCache.close();
    nativeKernels.close();
    nativeHalfCache.close();
    runtime.close();
    client.close();
    testKit.shutdownTestKit();
  }

  private static Path importedWithDefaults() {
    try {
      return OpenAiClientsTest.imported("llama");
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  private static void importHf(Path out, String... options) {
    List<String> args = new ArrayList<>(List.of("import", "hf", FIXTURE.toString(), "--out", out.toString()));
    args.addAll(List.of(options));
    HfFixtures.ok(args.toArray(String[]::new));
  }

  private static int argmax(float[] logits, int offset, int length) {
    int best = 0;
    for (int j = 1; j < length; j++) {
      best = logits[offset + j] > logits[offset + best] ? j : best;
    }
    return best;
  }

  /** The largest |a - b| - (atol + rtol |a|) over every logit; at most 0 when all are close. */
  private static double excess(double[][] expected, float[][] got, double rtol, double atol) {
    assertEquals(expected.length, got.length, "rows");
    double worst = -1;
    for (int i = 0; i < expected.length; i++) {
      for (int j = 0; j < expected[i].length; j++) {
        worst = Math.max(worst, Math.abs(expected[i][j] - got[i][j]) - (atol + rtol * Math.abs(expected[i][j])));
      }
    }
    return worst;
  }

  /** transformers' logits of the fixture's reference tokens. */
  private static double[][] referenceLogits(JsonNode ref) {
    double[][] expected = new double[ref.get("logits").size()][];
    for (int i = 0; i < expected.length; i++) {
      expected[i] = StreamSupport.stream(ref.get("logits").get(i).spliterator(), false).mapToDouble(JsonNode::asDouble).toArray();
    }
    return expected;
  }

  private static double[][] doubles(float[][] rows) {
    double[][] d = new double[rows.length][];
    for (int i = 0; i < rows.length; i++) {
      d[i] = new double[rows[i].length];
      for (int j = 0; j < rows[i].length; j++) {
        d[i][j] = rows[i][j];
      }
    }
    return d;
  }

  /**
   * Greedy tokens of each prompt, decoded together on one decoder of 2 slots (batch 1 while one runs, batch 2
   * while both do; windows as their positions grow), each prompt written in parts of at most {@code part} tokens.
   */
  private static int[][] greedy(LanguageModel lm, int[][] prompts, int steps, int part) {
    return greedy(lm, prompts, steps, part, new float[prompts.length][steps][]);
  }

  /** As above; {@code logits[s][step]} receives the logits sequence s's token of that step was chosen from. */
  private static int[][] greedy(LanguageModel lm, int[][] prompts, int steps, int part, float[][][] logitsOut) {
    int v = lm.vocabulary();
    try (PackageSlotDecoder decoder = lm.decoder(2)) {
      int[][] out = new int[prompts.length][steps];
      int[] tokens = new int[2];
      int[] positions = new int[2];
      boolean[] active = new boolean[2];
      for (int s = 0; s < prompts.length; s++) {
        float[] logits = null;
        for (int from = 0; from < prompts[s].length; from += part) {
          logits = decoder.prefill(s, prompts[s], from, Math.min(part, prompts[s].length - from));
        }
        out[s][0] = argmax(logits, 0, v);
        logitsOut[s][0] = Arrays.copyOf(logits, v);
      }
      for (int step = 1; step < steps; step++) {
        for (int s = 0; s < prompts.length; s++) {
          tokens[s] = out[s][step - 1];
          positions[s] = prompts[s].length + step - 1;
          active[s] = true;
        }
        float[] logits = decoder.decode(tokens, positions, active);
        for (int s = 0; s < prompts.length; s++) {
          out[s][step] = argmax(logits, s * v, v);
          logitsOut[s][step] = Arrays.copyOfRange(logits, s * v, (s + 1) * v);
        }
      }
      return out;
    }
  }

  /** The package's decode programs as "slots/batch/window", in the package's order. */
  private static List<String> decodePrograms(ModelPackage pkg) {
    return pkg.programs(Role.DECODE_BATCH).stream().map(p -> p.size() + "/" + p.batch() + "/" + p.length()).toList();
  }

  @Test
  void thePackageHasTheChunkedProgramsAsked() {
    ModelPackage pkg = chunked.modelPackage();
    assertEquals(List.of(4, 8), pkg.programs(Role.PREFILL_CHUNK).stream().map(ProgramSpec::length).toList());
    assertEquals(List.of("2/1/8", "2/1/16", "2/1/64", "2/2/8", "2/2/16", "2/2/64"), decodePrograms(pkg),
        "one cache of 2 slots; batches 1 and 2; windows 8, 16 and the context");
    assertEquals(64, pkg.limits().contextLength(), "the checkpoint's context by default");
    assertEquals(List.of(2), chunked.slotCounts());
  }

  @Test
  void chunksAndWindowsGiveTransformersLogitsAndGreedyTokens() throws IOException {
    JsonNode ref = JSON.readTree(FIXTURE.resolve("reference.json").toFile());
    double[][] expected = referenceLogits(ref);
    // 10 tokens through score_chunk (score's length is 4): a chunk of 8, then one of 4 holding 2.
    double worst = excess(expected, chunked.score(ints(ref.get("input_ids"))), 1e-3, 1e-4);
    assertTrue(worst <= 0, "chunked scoring against transformers exceeds rtol 1e-3, atol 1e-4 by " + worst);
    // The same 10 tokens as a prompt: a chunk of 8, then the shortest that holds the other 2 (4, 2 padded); its
    // last row's logits are transformers' at the last position.
    int[] inputIds = ints(ref.get("input_ids"));
    float[][][] prefilled = new float[1][1][];
    greedy(chunked, new int[][] {inputIds}, 1, 64, prefilled);
    double lastWorst = excess(new double[][] {expected[inputIds.length - 1]}, prefilled[0], 1e-3, 1e-4);
    assertTrue(lastWorst <= 0, "a prompt by two chunks against transformers exceeds rtol 1e-3, atol 1e-4 by " + lastWorst);
    // A 6-token prompt as one chunk of 8 (2 padded), then decode steps in the windows of 8 and 16, alone (batch 1).
    int[] greedyPrompt = ints(ref.get("greedy_prompt"));
    assertArrayEquals(ints(ref.get("greedy_tokens")), greedy(chunked, new int[][] {greedyPrompt}, 8, 64)[0],
        "greedy tokens against transformers");
  }

  @Test
  void aLongSequenceByChunksHasTheLogitsOfOneWholeRun() {
    int[] tokens = IntStream.range(0, 60).map(i -> (i * 37 + 11) % 500).toArray();
    float[][] one = whole.score(tokens); // one chunk of 64 positions, one run
    float[][] byChunks = chunked.score(tokens); // 7 chunks of 8 and one of 4
    double worst = excess(doubles(one), byChunks, 1e-4, 1e-4);
    assertTrue(worst <= 0, "chunked scoring of 60 tokens against one whole run exceeds 1e-4 by " + worst);
  }

  /**
   * The native package's chunks attend with the bridge's kernel (xla_actors.chunk_attention), the chunked one's
   * with XLA's loop over blocks of 24 positions: 60 tokens scored by chunks of 8 give the same logits (to 1e-4),
   * and a prompt of 50 written in parts has the last logits of one whole run.
   */
  @Test
  void nativeChunkAttentionGivesTheLogitsOfXlasLoop() throws IOException {
    assertTrue(HfFixtures.programText(nativeKernels.modelPackage().directory(), "prefill_chunk_")
        .contains("xla_actors.chunk_attention"), "the native package's chunks call the bridge's attention");
    assertFalse(HfFixtures.programText(chunkedDir, "prefill_chunk_").contains("xla_actors.chunk_attention"),
        "the --kernels xla package's chunks attend with XLA's ops");
    int[] tokens = IntStream.range(0, 60).map(i -> (i * 37 + 11) % 500).toArray();
    double worst = excess(doubles(chunked.score(tokens)), nativeKernels.score(tokens), 1e-4, 1e-4);
    assertTrue(worst <= 0, "native chunk attention against XLA's loop exceeds 1e-4 by " + worst);
    int[] prompt = IntStream.range(0, 50).map(i -> (i * 53 + 7) % 500).toArray();
    float[][][] prefilled = new float[1][1][];
    greedy(nativeKernels, new int[][] {prompt}, 1, 50, prefilled);
    float[][] one = whole.score(prompt);
    double lastWorst = excess(doubles(new float[][] {one[49]}), prefilled[0], 1e-4, 1e-4);
    assertTrue(lastWorst <= 0, "a prompt by native chunks against one whole run exceeds 1e-4 by " + lastWorst);
  }

  @Test
  void promptsUpToTheContextInPartsDecodeTogetherAsEachAlone() {
    int[] longPrompt = IntStream.range(0, 50).map(i -> (i * 53 + 7) % 500).toArray();
    int[] shortPrompt = IntStream.range(0, 5).map(i -> (i * 29 + 3) % 500).toArray();
    int[][] together = greedy(chunked, new int[][] {longPrompt, shortPrompt}, 6, 12); // batch 2, windows 8 to 64
    assertArrayEquals(greedy(chunked, new int[][] {longPrompt}, 6, 50)[0], together[0], "the long prompt, alone or beside another");
    assertArrayEquals(greedy(chunked, new int[][] {shortPrompt}, 6, 5)[0], together[1], "the short prompt, alone or beside another");
    float[][] last = whole.score(longPrompt);
    assertEquals(argmax(last[49], 0, last[49].length), together[0][0], "the first token is the argmax of one whole run's last logits");
  }

  /**
   * The native decode steps (each layer one xla_actors.decoder_layer call: products, rotary positions, the
   * cache's update and attention in the bridge), two sequences decoding together from prompts written in parts:
   * every step's logits are those of one whole run of the score program (XLA's attention over the whole
   * sequence so far) to 1e-4; the package has one window per batch, the context.
   */
  @Test
  void nativeDecodeAttentionGivesTheLogitsOfOneWholeRun() {
    assertEquals(List.of("2/1/64", "2/2/64"), decodePrograms(nativeKernels.modelPackage()),
        "one window, the context, for each batch with --kernels native");
    int[][] prompts = {IntStream.range(0, 50).map(i -> (i * 53 + 7) % 500).toArray(),
        IntStream.range(0, 5).map(i -> (i * 29 + 3) % 500).toArray()};
    float[][][] logits = new float[2][6][];
    int[][] tokens = greedy(nativeKernels, prompts, 6, 12, logits);
    double worst = -1;
    for (int s = 0; s < 2; s++) {
      for (int step = 0; step < 6; step++) {
        int[] sequence = IntStream.concat(IntStream.of(prompts[s]), IntStream.of(tokens[s]).limit(step)).toArray();
        float[] expected = whole.score(sequence)[sequence.length - 1];
        worst = Math.max(worst, excess(doubles(new float[][] {expected}), new float[][] {logits[s][step]}, 1e-4, 1e-4));
      }
    }
    assertTrue(worst <= 0, "native decode's logits against one whole run exceed 1e-4 by " + worst);
  }

  /**
   * The fused decode layers (xla_actors.decoder_layer, the native package's decode steps) round each step's keys
   * and values into an f16 cache as XLA's convert does: two sequences decoding together give the tokens and,
   * within 2e-3, the logits of the --kernels xla package with the same cache, whose steps are XLA's ops. Not
   * 1e-4: the two compute a key in f32 a last bit apart, and such a key can round to the neighbouring f16 (one
   * part in 2,048); measured 7.1e-4 at most on this fixture, whose logits reach 9.8.
   */
  @Test
  void fusedLayersWriteAnF16CacheAsXlaDoes() throws IOException {
    assertTrue(HfFixtures.programText(nativeHalfCache.modelPackage().directory(), HfFixtures.DECODE)
        .contains("xla_actors.decoder_layer"), "the native package's decode steps are fused layers");
    int[][] prompts = {IntStream.range(0, 50).map(i -> (i * 53 + 7) % 500).toArray(),
        IntStream.range(0, 5).map(i -> (i * 29 + 3) % 500).toArray()};
    float[][][] fused = new float[2][6][];
    float[][][] xla = new float[2][6][];
    int[][] fusedTokens = greedy(nativeHalfCache, prompts, 6, 12, fused);
    int[][] xlaTokens = greedy(halfCache, prompts, 6, 12, xla);
    double worst = -1;
    for (int s = 0; s < 2; s++) {
      assertArrayEquals(xlaTokens[s], fusedTokens[s], "sequence " + s + ": fused layers against XLA's ops on an f16 cache");
      worst = Math.max(worst, excess(doubles(xla[s]), fused[s], 0, 2e-3));
    }
    assertTrue(worst <= 0, "fused layers' logits on an f16 cache against XLA's exceed 2e-3 by " + worst);
  }

  /**
   * An f16 cache rounds each key and value to 11 significant bits: the logits stay within a stated tolerance
   * of transformers' (measured 0.0074 at most on this fixture, whose logits reach 9.8), and a decode step reads
   * the cache the prompt's chunk wrote (its token is the argmax of the same package's score of the sequence).
   */
  @Test
  void anF16CacheStaysWithinItsToleranceOfTransformers() throws IOException {
    JsonNode ref = JSON.readTree(FIXTURE.resolve("reference.json").toFile());
    double[][] expected = referenceLogits(ref);
    double worst = excess(expected, halfCache.score(ints(ref.get("input_ids"))), 0, 0.02);
    assertTrue(worst <= 0, "an f16 cache's logits against transformers exceed 0.02 by " + worst);
    int[] prompt = ints(ref.get("greedy_prompt"));
    int[] twoTokens = greedy(halfCache, new int[][] {prompt}, 2, 8)[0]; // a chunk of the prompt, then one decode step
    int[] sequence = IntStream.concat(IntStream.of(prompt), IntStream.of(twoTokens[0])).toArray();
    float[] last = halfCache.score(sequence)[sequence.length - 1];
    assertEquals(argmax(last, 0, last.length), twoTokens[1], "the decode step's token against the argmax of the scored sequence");
  }
}
