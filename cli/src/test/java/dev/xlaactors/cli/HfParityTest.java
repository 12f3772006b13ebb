package dev.xlaactors.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.StreamSupport;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Hugging Face checkpoints (random weights, made by {@code tools/hf_reference.py} with {@code transformers}
 * itself: cli/src/test/resources/hf) imported with {@code bin/xla-actors import hf} and run with
 * {@code score}, {@code generate} and {@code embed}, exactly as a user with downloaded weights runs them;
 * the outputs must match what {@code transformers}' own implementation computed: logits at every position
 * (rtol 1e-3, atol 1e-4 in f32), 8 greedy tokens exactly, the tokenizer's ids, mean-pooled, CLS and
 * normalised embeddings of a padded batch.
 */
class HfParityTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Path FIXTURES = Path.of("src/test/resources/hf");

  @TempDir
  static Path packages;

  @BeforeAll
  static void home() {
    System.setProperty("dev.xlaactors.cli.home", Path.of("..").toAbsolutePath().normalize().toString());
  }

  /** What one command line printed and returned. */
  private record Run(int status, String out, String err) {}

  private static Run cli(String... args) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int status = XlaActorsCli.run(List.of(args), new PrintStream(out, true, StandardCharsets.UTF_8),
        new PrintStream(err, true, StandardCharsets.UTF_8));
    return new Run(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }

  private static Run ok(String... args) {
    Run r = cli(args);
    if (r.status() != 0) {
      fail(String.join(" ", args) + " exited " + r.status() + ":\n" + r.err() + r.out());
    }
    return r;
  }

  /** The package of fixture {@code name}, imported once per test class. */
  private static synchronized Path imported(String name, String... options) {
    Path pkg = packages.resolve(name + String.join("", options).replace("-", ""));
    if (!Files.exists(pkg.resolve("xla-model.json"))) {
      List<String> args = new ArrayList<>(List.of("import", "hf", FIXTURES.resolve(name).toString(), "--out", pkg.toString()));
      args.addAll(List.of(options));
      ok(args.toArray(String[]::new));
    }
    return pkg;
  }

  private static JsonNode reference(String name) throws IOException {
    return JSON.readTree(FIXTURES.resolve(name).resolve("reference.json").toFile());
  }

  private static String ids(JsonNode array) {
    return StreamSupport.stream(array.spliterator(), false).map(JsonNode::asText).collect(Collectors.joining(","));
  }

  private static int[] ints(JsonNode array) {
    return StreamSupport.stream(array.spliterator(), false).mapToInt(JsonNode::asInt).toArray();
  }

  /** Every element of {@code got} within {@code rtol * |expected| + atol} of {@code expected}. */
  private static void assertClose(JsonNode expected, JsonNode got, double rtol, double atol, String what) {
    assertEquals(expected.size(), got.size(), what + ": rows");
    double worst = 0;
    for (int i = 0; i < expected.size(); i++) {
      assertEquals(expected.get(i).size(), got.get(i).size(), what + ": row " + i + " length");
      for (int j = 0; j < expected.get(i).size(); j++) {
        double e = expected.get(i).get(j).asDouble();
        double g = got.get(i).get(j).asDouble();
        double excess = Math.abs(e - g) - (atol + rtol * Math.abs(e));
        worst = Math.max(worst, excess);
        if (excess > 0) {
          fail(what + " [" + i + "][" + j + "]: transformers " + e + ", ours " + g + " (rtol " + rtol + ", atol " + atol + ")");
        }
      }
    }
  }

  /** Imports {@code fixture}, checks its greedy tokens and tokenizer, and returns the logits {@code score} printed. */
  private JsonNode checkCausal(String fixture, String... importOptions) throws IOException {
    JsonNode ref = reference(fixture);
    Path pkg = imported(fixture, importOptions);
    JsonNode scored = JSON.readTree(ok("score", pkg.toString(), "--tokens", ids(ref.get("input_ids")), "--json").out());
    assertArrayEquals(ints(ref.get("input_ids")), ints(scored.get("input_ids")));

    JsonNode generated = JSON.readTree(ok("generate", pkg.toString(), "--tokens", ids(ref.get("greedy_prompt")), "--max-tokens", "8",
        "--temperature", "0", "--ignore-eos", "--json").out());
    assertArrayEquals(ints(ref.get("greedy_tokens")), ints(generated.get("tokens")), fixture + ": greedy tokens");

    JsonNode byText = JSON.readTree(ok("score", pkg.toString(), "--text", ref.get("prompt_text").asText(), "--json").out());
    assertArrayEquals(ints(ref.get("prompt_ids")), ints(byText.get("input_ids")), fixture + ": the tokenizer's ids of the prompt");
    return scored.get("logits");
  }

  private void checkF32(String fixture) throws IOException {
    assertClose(reference(fixture).get("logits"), checkCausal(fixture), 1e-3, 1e-4, fixture + " logits");
  }

  @Test
  void gpt2MatchesTransformers() throws IOException {
    checkF32("gpt2");
  }

  @Test
  void shardedGpt2MatchesTransformers() throws IOException {
    checkF32("gpt2-sharded");
  }

  @Test
  void llamaWithGroupedQueryAttentionAndUntiedHeadMatchesTransformers() throws IOException {
    checkF32("llama");
  }

  @Test
  void qwen2WithBiasesAndTiedHeadMatchesTransformers() throws IOException {
    checkF32("qwen2");
  }

  /**
   * A bf16 checkpoint keeps its bf16 weights (the package's tensors are BF16) and the programs compute in
   * f32 from them: the same weights run in f32 by transformers agree to f32 precision, and transformers'
   * own bf16 run (bf16 activations too) within bf16's precision: 3% of the largest logit (measured: 1.5%).
   */
  @Test
  void bf16LlamaIsServedFromItsBf16Weights() throws IOException {
    JsonNode ref = reference("llama-bf16");
    JsonNode ours = checkCausal("llama-bf16");
    assertClose(ref.get("logits_upcast_f32"), ours, 1e-3, 1e-4, "llama-bf16 logits against its weights run in f32");
    double largest = 0;
    for (JsonNode row : ref.get("logits")) {
      for (JsonNode x : row) {
        largest = Math.max(largest, Math.abs(x.asDouble()));
      }
    }
    assertClose(ref.get("logits"), ours, 0, 0.03 * largest, "llama-bf16 logits against transformers' bf16 run");
    try (var weights = dev.xlaactors.runtime.model.ModelPackage.open(imported("llama-bf16")).openWeights()) {
      assertEquals(dev.xlaactors.runtime.DType.BF16, weights.types().get("model.layers.0.mlp.down_proj.weight").dtype(),
          "the package keeps the checkpoint's dtype");
    }
  }

  @Test
  void bertEmbeddingsMatchTransformers() throws IOException {
    JsonNode ref = reference("bert");
    Path pkg = imported("bert");
    List<String> sequences = new ArrayList<>();
    for (int s = 0; s < ref.get("input_ids").size(); s++) {
      int[] all = ints(ref.get("input_ids").get(s));
      int[] mask = ints(ref.get("attention_mask").get(s));
      StringBuilder seq = new StringBuilder();
      for (int i = 0; i < all.length; i++) {
        if (mask[i] == 1) {
          seq.append(seq.length() == 0 ? "" : ",").append(all[i]);
        }
      }
      sequences.add(seq.toString());
    }
    String tokens = String.join(";", sequences);
    assertClose(ref.get("mean_embeddings"),
        JSON.readTree(ok("embed", pkg.toString(), "--tokens", tokens, "--json").out()).get("embeddings"), 1e-3, 1e-4, "bert mean");
    assertClose(ref.get("cls_embeddings"),
        JSON.readTree(ok("embed", pkg.toString(), "--tokens", tokens, "--pooling", "cls", "--json").out()).get("embeddings"),
        1e-3, 1e-4, "bert cls");
    assertClose(ref.get("normalized_mean_embeddings"),
        JSON.readTree(ok("embed", pkg.toString(), "--tokens", tokens, "--normalize", "--json").out()).get("embeddings"),
        1e-3, 1e-4, "bert normalized mean");
  }

  @Test
  void anotherArchitectureIsRefusedNamingIt(@TempDir Path dir) throws IOException {
    Path hf = dir.resolve("t5");
    Files.createDirectories(hf);
    Files.writeString(hf.resolve("config.json"), "{\"architectures\": [\"T5ForConditionalGeneration\"], \"model_type\": \"t5\"}");
    Run r = cli("import", "hf", hf.toString(), "--out", dir.resolve("pkg").toString());
    assertEquals(2, r.status(), r.err());
    assertTrue(r.err().contains("T5ForConditionalGeneration") && r.err().contains("GPT2LMHeadModel"), r.err());
  }
}
