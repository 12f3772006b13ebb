package dev.xlaactors.cli;

import static dev.xlaactors.cli.HfFixtures.DECODE;
import static dev.xlaactors.cli.HfFixtures.JSON;
import static dev.xlaactors.cli.HfFixtures.assertClose;
import static dev.xlaactors.cli.HfFixtures.cli;
import static dev.xlaactors.cli.HfFixtures.ints;
import static dev.xlaactors.cli.HfFixtures.ok;
import static dev.xlaactors.cli.HfFixtures.programText;
import static dev.xlaactors.cli.HfFixtures.reference;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Hugging Face checkpoints (random weights, made by {@code tools/hf_reference.py} with {@code transformers}
 * itself: cli/src/test/resources/hf) imported with {@code bin/xla-actors import hf} and run with
 * {@code score}, {@code generate} and {@code embed}, exactly as a user with downloaded weights runs them;
 * the outputs must match what {@code transformers}' own implementation computed: logits at every position
 * (rtol 1e-3, atol 1e-4 in f32), 8 greedy tokens exactly, the tokenizer's ids, mean-pooled, CLS and
 * normalised embeddings of a padded batch. Llama (f32 and bf16), Qwen2 and BERT here; GPT-2 (its kernels and
 * int8 weights) in {@link HfParityGpt2Test}, so that cli's two test JVMs each take about half of the imports.
 */
class HfParityTest {
  @TempDir
  static Path packages;

  @BeforeAll
  static void home() {
    HfFixtures.useThisCheckoutAsHome();
  }

  private static Path imported(String name, String... options) {
    return HfFixtures.imported(packages, name, options);
  }

  /** Imported with import's defaults, the bridge's native kernels (--kernels native): it matches transformers. */
  @Test
  void llamaWithGroupedQueryAttentionAndUntiedHeadMatchesTransformers() throws IOException {
    HfFixtures.checkF32(packages, "llama");
    assertTrue(programText(imported("llama"), DECODE).contains("xla_actors.matmul_f32"),
        "--kernels native, the default for a CPU package, calls the native f32 kernel");
  }

  /** With --kernels xla, XLA's dots alone (the package for any PJRT plugin): it matches transformers too. */
  @Test
  void qwen2WithBiasesAndTiedHeadMatchesTransformers() throws IOException {
    HfFixtures.checkF32(packages, "qwen2", "--kernels", "xla");
    assertFalse(programText(imported("qwen2", "--kernels", "xla"), DECODE).contains("xla_actors."),
        "--kernels xla emits no native kernel");
  }

  /**
   * A bf16 checkpoint keeps its bf16 weights (the package's tensors are BF16) and the programs compute in
   * f32 from them (the bridge's bf16 kernels, --kernels native being the default, widen each weight as they load it): the same weights run in f32 by transformers agree to f32 precision, and transformers'
   * own bf16 run (bf16 activations too) within bf16's precision: 3% of the largest logit (measured: 1.5%).
   */
  @Test
  void bf16LlamaIsServedFromItsBf16Weights() throws IOException {
    JsonNode ref = reference("llama-bf16");
    JsonNode ours = HfFixtures.checkCausal(packages, "llama-bf16");
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
    assertTrue(programText(imported("llama-bf16"), DECODE).contains("xla_actors.decoder_layer"),
        "decode's layers are the bridge's fused layer, on the bf16 weights");
    assertTrue(programText(imported("llama-bf16"), "score").contains("xla_actors.matmul_bf16"),
        "score's products are the bridge's bf16 kernel");
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
    HfFixtures.Run r = cli("import", "hf", hf.toString(), "--out", dir.resolve("pkg").toString());
    assertEquals(2, r.status(), r.err());
    assertTrue(r.err().contains("T5ForConditionalGeneration") && r.err().contains("GPT2LMHeadModel"), r.err());
  }
}
