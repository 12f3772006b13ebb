package dev.xlaactors.examples.gpt;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.ActorsSettings;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.actors.CallbackServer;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.stream.javadsl.Sink;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The tiny GPT (2 layers, d_model 32, vocabulary 512) exported by {@code tools/jax_gpt.py make --config tiny},
 * committed under test resources with JAX's own logits and greedy tokens for a fixed prompt
 * ({@code model.properties}), run on the real CPU plugin.
 */
class GptModelTest {
  private static XlaClient client;
  private static GptArtifacts artifacts;
  private static GptModel model;
  private static ActorSystem<Void> system;

  @BeforeAll
  static void load() throws URISyntaxException {
    client = XlaClient.create();
    artifacts = GptArtifacts.open(Path.of(GptModelTest.class.getResource("/gpt-tiny/model.properties").toURI()).getParent());
    model = GptModel.load(client, artifacts, 1);
    system = ActorSystem.create(Behaviors.empty(), "gpt-model-test");
  }

  @AfterAll
  static void close() throws Exception {
    model.close();
    client.close();
    system.terminate();
    system.getWhenTerminated().toCompletableFuture().get(10, TimeUnit.SECONDS);
  }

  private static int[] prompt() {
    return artifacts.ints("prompt");
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
  void theSampleCallbackClosesItsInputsOnceItHasSampled() {
    try (GptGeneration g = model.start(new int[][] {prompt()}, SamplingSettings.greedy(), 4)) {
      float[] values = new float[model.vocab()];
      values[7] = 1; // greedy: token 7
      HostTensor logits = HostTensor.ofFloats(values, model.batch(), model.vocab());
      HostCall call = HostCall.madeByJava(1, -1, "sample", List.of(logits), List.of(TensorType.of(DType.S32, model.batch())),
          new HostCall.JavaAnswer() {
            @Override
            public boolean complete(List<HostTensor> outputs) {
              return true;
            }

            @Override
            public boolean fail(ErrorCode code, String message) {
              return true;
            }
          });
      TestProbe<CallbackServer.Response> replyTo = TestProbe.create(system);
      GptSampling.answer(new CallbackServer.Request(call, replyTo.getRef()), g);
      CallbackServer.Response response = replyTo.receiveMessage(java.time.Duration.ofSeconds(30));
      assertEquals(null, response.error(), String.valueOf(response.error()));
      assertArrayEquals(new int[] {7}, response.outputs().get(0).toIntArray());
      assertTrue(logits.isClosed(), "the callback's copy of the logits (pooled memory when large) must be given back");
    }
  }

  @Test
  void aSamplerFailingOnThePrefillsLogitsFreesTheCache() {
    GptModel.Prefilled prefilled = model.prefill(new int[][] {prompt()});
    float[] poisoned = prefilled.logits().clone();
    poisoned[3] = Float.NaN; // the sampler refuses NaN logits
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> new GptGeneration(model,
        new GptModel.Prefilled(poisoned, prefilled.cache()), prompt().length, new Sampler(SamplingSettings.greedy()), 4, null));
    assertTrue(e.getMessage().contains("NaN"), e.getMessage());
    assertTrue(prefilled.cache().isClosed(), "the generation that was never made must not keep the KV cache");
  }

  @Test
  void logitsEqualJaxsWithinF32Tolerance() {
    GptModel.Prefilled p = model.prefill(new int[][] {prompt()});
    assertClose(artifacts.floats("prefill_last_logits"), p.logits(), "prefill logits");
    int first = artifacts.ints("greedy_tokens")[0];
    GptModel.Step step = model.decodeLogits(new int[] {first}, prompt().length, p.cache());
    try (DeviceBuffer cache = step.cache()) {
      assertClose(artifacts.floats("decode_step_logits"), step.logits(), "decode step logits");
    }
  }

  @Test
  void theDonatedCacheIsGoneAndNamedOnReuse() {
    GptModel.Prefilled p = model.prefill(new int[][] {prompt()});
    GptModel.Step step = model.decodeLogits(new int[] {1}, prompt().length, p.cache());
    try (DeviceBuffer cache = step.cache()) {
      XlaException e = assertThrows(XlaException.class, () -> model.decodeLogits(new int[] {1}, prompt().length, p.cache()));
      assertTrue(e.getMessage().contains("donated"), e.getMessage());
    }
  }

  /** The programs are compiled from the .jax artifacts (bytecode): the cache alias is read from the compiled module. */
  @Test
  void theCacheKeepsItsDeviceMemoryAcrossDecodeSteps() {
    GptModel.Prefilled p = model.prefill(new int[][] {prompt()});
    DeviceBuffer cache = p.cache();
    long address = cache.unsafeDevicePointer();
    for (int s = 0; s < 5; s++) {
      cache = model.decodeLogits(new int[] {1}, prompt().length + s, cache).cache();
      assertEquals(address, cache.unsafeDevicePointer(), "step " + s + " updated the donated cache in place");
    }
    cache.close();
  }

  @Test
  void greedyGenerationMatchesJaxTokenForToken() {
    int[] expected = artifacts.ints("greedy_tokens");
    List<Integer> ours = new ArrayList<>();
    try (GptGeneration g = model.start(new int[][] {prompt()}, SamplingSettings.greedy(), expected.length)) {
      for (int[] t = g.next(); t != null; t = g.next()) {
        ours.add(t[0]);
      }
    }
    assertArrayEquals(expected, ours.stream().mapToInt(Integer::intValue).toArray(), "ours " + ours);
  }

  /** Each decode step a supervised CallbackRuntime run, "sample" served by GptSampling's actor. */
  @Test
  void supervisedGenerationMatchesJaxTokenForToken() throws Exception {
    int[] expected = artifacts.ints("greedy_tokens");
    try (CallbackRuntime runtime = CallbackRuntime.create(system, client);
        GptSampling sampling = GptSampling.register(runtime, model, system)) {
      long runsBefore = runtime.metrics().runs().count();
      List<Integer> ours = TokenStream.tokens(model, prompt(), SamplingSettings.greedy(), expected.length, sampling)
          .runWith(Sink.seq(), system).toCompletableFuture().get(60, TimeUnit.SECONDS);
      assertArrayEquals(expected, ours.stream().mapToInt(Integer::intValue).toArray(), "ours " + ours);
      assertEquals(expected.length - 1, runtime.metrics().runs().count() - runsBefore, "one supervised run per decode step");
      XlaException twice = assertThrows(XlaException.class, () -> GptSampling.register(runtime, model, system));
      assertTrue(twice.getMessage().contains("sample"), twice.getMessage());
    }
  }

  /**
   * A sampling call that does not answer within xla-actors.actors.callbacks.timeouts.sample fails its step
   * with DEADLINE_EXCEEDED naming the callback (the test holds the server's lock so the call cannot be served).
   */
  @Test
  void aSupervisedSamplingCallPastItsTimeoutFailsTheStep() throws Exception {
    ActorsSettings settings = ActorsSettings.fromConfig(com.typesafe.config.ConfigFactory.parseString(
        "xla-actors.actors.callbacks.timeouts.sample = 200ms").withFallback(com.typesafe.config.ConfigFactory.load()));
    try (CallbackRuntime runtime = CallbackRuntime.create(system, client, settings);
        GptSampling sampling = GptSampling.register(runtime, model, system);
        GptGeneration g = model.start(new int[][] {prompt()}, SamplingSettings.greedy(), 5, sampling)) {
      g.next(); // from the prefill's logits: no decode step yet
      java.util.concurrent.CompletableFuture<int[]> step;
      synchronized (sampling) {
        step = java.util.concurrent.CompletableFuture.supplyAsync(g::next);
        Thread.sleep(2000); // ten times the timeout
      }
      java.util.concurrent.ExecutionException e =
          assertThrows(java.util.concurrent.ExecutionException.class, () -> step.get(60, TimeUnit.SECONDS));
      XlaException cause = assertInstanceOf(XlaException.class, e.getCause());
      assertEquals(dev.xlaactors.error.ErrorCode.DEADLINE_EXCEEDED, cause.code(), cause.getMessage());
      assertTrue(cause.getMessage().contains("sample"), cause.getMessage());
    }
  }

  @Test
  void theStreamDeliversTokensInOrderAndCompletes() throws Exception {
    int[] expected = artifacts.ints("greedy_tokens");
    List<Integer> streamed = TokenStream.tokens(model, prompt(), SamplingSettings.greedy(), expected.length)
        .runWith(Sink.seq(), system).toCompletableFuture().get(30, TimeUnit.SECONDS);
    assertArrayEquals(expected, streamed.stream().mapToInt(Integer::intValue).toArray());
    // A stop token ends the stream before it (the stop token itself is not emitted).
    int stop = expected[2];
    int until = 0;
    while (expected[until] != stop) {
      until++;
    }
    List<Integer> stopped = TokenStream.tokens(model, prompt(), SamplingSettings.greedy().withStopTokens(Set.of(stop)), 16)
        .runWith(Sink.seq(), system).toCompletableFuture().get(30, TimeUnit.SECONDS);
    assertArrayEquals(Arrays.copyOf(expected, until), stopped.stream().mapToInt(Integer::intValue).toArray());
  }

  @Test
  void sampledGenerationStaysInTheTopKAndRepeatsWithItsSeed() {
    SamplingSettings s = new SamplingSettings(1.5, 5, 0.95, Set.of(), 99);
    List<Integer> a = TokenStream.tokens(model, prompt(), s, 12).runWith(Sink.seq(), system).toCompletableFuture().join();
    List<Integer> b = TokenStream.tokens(model, prompt(), s, 12).runWith(Sink.seq(), system).toCompletableFuture().join();
    assertEquals(12, a.size());
    assertEquals(a, b, "the same seed samples the same tokens");
    // The first token comes from the prefill logits: it must be among their 5 highest.
    float[] logits = model.prefill(new int[][] {prompt()}).logits();
    Integer[] byLogit = new Integer[logits.length];
    for (int i = 0; i < logits.length; i++) {
      byLogit[i] = i;
    }
    Arrays.sort(byLogit, (x, y) -> Float.compare(logits[y], logits[x]));
    assertTrue(Arrays.asList(byLogit).subList(0, 5).contains(a.get(0)), a + " vs top-5 " + Arrays.asList(byLogit).subList(0, 5));
  }

  @Test
  void badPromptsAndArgumentsFailClearly() {
    SamplingSettings g = SamplingSettings.greedy();
    assertTrue(assertThrows(InvalidArgumentException.class, () -> TokenStream.tokens(model, new int[0], g, 4))
        .getMessage().contains("prompt 0 has 0 tokens, expected 1..8"));
    assertTrue(assertThrows(InvalidArgumentException.class, () -> TokenStream.tokens(model, new int[9], g, 4))
        .getMessage().contains("prompt 0 has 9 tokens, expected 1..8"));
    assertTrue(assertThrows(InvalidArgumentException.class, () -> TokenStream.tokens(model, new int[] {1, 512}, g, 4))
        .getMessage().contains("token 512 at position 1 of prompt 0 is outside the vocabulary"));
    assertTrue(assertThrows(InvalidArgumentException.class, () -> TokenStream.tokens(model, new int[] {1}, g, 0))
        .getMessage().contains("max tokens must be at least 1"));
    assertTrue(assertThrows(InvalidArgumentException.class, () -> GptModel.load(client, artifacts, 8))
        .getMessage().contains("exported for batch sizes [1], not 8"));
    assertTrue(assertThrows(InvalidArgumentException.class, () -> GptArtifacts.open(Path.of("/nonexistent")))
        .getMessage().contains("no model in /nonexistent"));
    assertTrue(assertThrows(InvalidArgumentException.class, () -> new GptTokenizer().encode(""))
        .getMessage().contains("the prompt is empty"));
  }

  @Test
  void theTokenizerIsGpt2s() {
    GptTokenizer t = new GptTokenizer();
    assertArrayEquals(new int[] {15496, 995}, t.encode("Hello world"));
    assertEquals("Hello world", t.decode(t.encode("Hello world")));
    GptTokenizer.Decoder d = t.decoder();
    StringBuilder out = new StringBuilder();
    for (int token : t.encode("naïve café ☕")) {
      out.append(d.next(token));
    }
    assertEquals("naïve café ☕", out.toString());
  }
}
