package dev.xlaactors.examples.gpt;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.serve.GenerationServer;
import dev.xlaactors.lm.LanguageModel;
import dev.xlaactors.lm.PackageSlotDecoder;
import dev.xlaactors.lm.TextGenerator;
import dev.xlaactors.lm.sampling.SamplingParams;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.ModelPackage;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The tiny GPT (2 layers, d_model 32, vocabulary 512) as the examples run it: the model package that
 * {@code tools/jax_gpt.py package --config tiny} makes from {@code make}'s weights (export-hf, then
 * tools/hf_import.py), committed under test resources with JAX's own run of make's programs
 * ({@code reference.json}), loaded by the library's {@link LanguageModel} on the real CPU plugin. The
 * importer's programs must compute what make's do: the same logits, the same greedy tokens.
 */
class GptPackageTest {
  private static final ActorTestKit kit = ActorTestKit.create("gpt-package-test");
  private static XlaClient client;
  private static CallbackRuntime runtime;
  private static GptPackage gpt;
  private static LanguageModel model;

  @BeforeAll
  static void load() throws Exception {
    client = XlaClient.create();
    runtime = CallbackRuntime.create(kit.system(), client);
    gpt = GptPackage.open(Path.of(GptPackageTest.class.getResource("/gpt-tiny-package/xla-model.json").toURI()).getParent());
    model = LanguageModel.load(ModelPackage.open(gpt.directory()), client.devices().get(0), runtime);
  }

  @AfterAll
  static void close() {
    kit.shutdownTestKit(); // stops the servers, which close their decoders, before the model goes
    model.close();
    runtime.close();
    client.close();
  }

  private static void assertClose(float[] expected, float[] actual, String what) {
    assertEquals(expected.length, actual.length, what);
    float worst = 0;
    for (int i = 0; i < expected.length; i++) {
      worst = Math.max(worst, Math.abs(expected[i] - actual[i]) / (1 + Math.abs(expected[i])));
    }
    assertTrue(worst < 1e-4f, what + ": largest relative difference from JAX " + worst);
  }

  @Test
  void theSlotProgramsLogitsEqualJaxsWithinF32Tolerance() {
    int[] prompt = gpt.referencePrompt();
    try (PackageSlotDecoder decoder = model.decoder(1)) {
      assertClose(gpt.referenceFloats("prefill_last_logits"), decoder.prefill(0, prompt), "prefill logits");
      int first = gpt.referenceGreedyTokens()[0];
      float[] step = decoder.decode(new int[] {first}, new int[] {prompt.length}, new boolean[] {true});
      assertClose(gpt.referenceFloats("decode_step_logits"), step, "decode step logits");
    }
    float[][] scored = model.score(prompt);
    assertClose(gpt.referenceFloats("prefill_last_logits"), scored[prompt.length - 1], "score logits at the last position");
  }

  @Test
  void greedyTextGenerationStreamsJaxsTokensAndTheirText() throws Exception {
    ActorRef<GenerationServer.Command> server =
        kit.spawn(GenerationServer.create(model.name(), model.decoder(4), new SimpleMeterRegistry()));
    TextGenerator generator = new TextGenerator(model, server, kit.system());
    int[] expected = gpt.referenceGreedyTokens();
    List<TextGenerator.Piece> pieces = new CopyOnWriteArrayList<>();
    // No stop token: JAX's reference run goes to its length.
    SamplingParams greedy = SamplingParams.greedy().withMaxTokens(expected.length).withStopTokenIds(Set.of());
    TextGenerator.Result result = generator.generate(gpt.referencePrompt(), greedy, Duration.ofSeconds(60), pieces::add)
        .toCompletableFuture().get(60, TimeUnit.SECONDS);
    assertArrayEquals(expected, result.tokens());
    assertEquals(TextGenerator.FinishReason.LENGTH, result.finishReason());
    assertEquals(expected.length, pieces.stream().filter(p -> p.token() >= 0).count());
    StringBuilder streamed = new StringBuilder();
    pieces.forEach(p -> streamed.append(p.text()));
    assertEquals(result.text(), streamed.toString(), "the pieces, in order, are the text");
    assertEquals(model.tokenizer().decode(expected), result.text(), "the text is the tokenizer's of the tokens");
  }

  @Test
  void theTinyTokenizerIsByteLevelAndFitsTheModel() {
    assertEquals(512, model.tokenizer().vocabularySize());
    assertEquals(Set.of(511), model.defaults().stopTokenIds(), "<|endoftext|>, the last id, ends a generation");
    String text = "The quick brown fox 🦊 jumps";
    int[] ids = model.encode(text);
    assertTrue(ids.length > 3 && ids.length < text.length(), "merges make fewer tokens than bytes: " + ids.length);
    assertTrue(java.util.Arrays.stream(ids).allMatch(id -> id >= 0 && id < 511), java.util.Arrays.toString(ids));
    assertEquals(text, model.tokenizer().decode(ids));
    java.io.ByteArrayOutputStream joined = new java.io.ByteArrayOutputStream();
    for (int id : ids) {
      joined.writeBytes(model.tokenizer().decodeBytes(new int[] {id}));
    }
    assertEquals(text, joined.toString(StandardCharsets.UTF_8), "each token's own bytes join into the text");
  }
}
