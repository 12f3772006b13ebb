package dev.xlaactors.lm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.ConfigFactory;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.serve.GenerationServer;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.lm.sampling.SamplingParams;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.ModelPackage;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The library's language model over a real package (tools/jax_lm_fixtures.py: a toy causal LM whose decode
 * step calls the host callback "observe" on its logits): generation through a generation server agrees
 * with the score program, and every decode step is a supervised run: a step that hangs times out, a step
 * can be cancelled, and each step counts in the runtime's metrics.
 */
class LanguageModelTest {
  private static final Path PACKAGE = Path.of("src/test/resources/packages/toy-lm-observed");
  private static final Duration OBSERVE_TIMEOUT = Duration.ofMillis(400);
  private static ActorTestKit testKit;
  private static XlaClient client;
  private static CallbackRuntime runtime;
  /** What the "observe" callback does before it answers: nothing, by default. */
  private static final AtomicReference<Runnable> beforeAnswer = new AtomicReference<>(() -> {});

  @BeforeAll
  static void start() {
    testKit = ActorTestKit.create(ConfigFactory.parseString(
        "xla-actors.actors.callbacks.timeouts { observe = " + OBSERVE_TIMEOUT.toMillis() + "ms }").withFallback(ConfigFactory.load()));
    client = XlaClient.create();
    runtime = CallbackRuntime.create(testKit.system(), client);
    runtime.register("observe", List.of(TensorType.of(DType.F32, 2, 8)), null, (in, unused) -> {
      beforeAnswer.get().run();
      float[] logits = in.get(0).toFloatArray();
      in.forEach(HostTensor::close);
      return List.of(HostTensor.ofFloats(logits, 2, 8));
    }).toCompletableFuture().join();
  }

  @AfterAll
  static void stop() {
    runtime.close();
    testKit.shutdownTestKit();
    client.close();
  }

  private static LanguageModel load() {
    return LanguageModel.load(ModelPackage.open(PACKAGE), client.devices().get(0), runtime);
  }

  private static int argmax(float[] row) {
    int best = 0;
    for (int i = 1; i < row.length; i++) {
      if (row[i] > row[best]) {
        best = i;
      }
    }
    return best;
  }

  @Test
  void greedyGenerationThroughTheServerAgreesWithScoringAndEveryStepIsASupervisedRun() {
    beforeAnswer.set(() -> {});
    try (LanguageModel lm = load()) {
      ActorRef<GenerationServer.Command> server = testKit.spawn(GenerationServer.create(lm.name(), lm.decoder(2),
          new SimpleMeterRegistry()));
      long runsBefore = runtime.metrics().runs().count();
      int[] prompt = {1, 2};
      TextGenerator.Result result = new TextGenerator(lm, server, testKit.system())
          .generate(prompt, SamplingParams.greedy().withMaxTokens(2), Duration.ofMinutes(1), piece -> {})
          .toCompletableFuture().join();
      assertEquals(2, result.tokens().length);
      assertEquals(TextGenerator.FinishReason.LENGTH, result.finishReason());
      List<Integer> sequence = new ArrayList<>(List.of(1, 2));
      for (int token : result.tokens()) {
        float[][] logits = lm.score(sequence.stream().mapToInt(Integer::intValue).toArray());
        assertEquals(argmax(logits[logits.length - 1]), token, "the greedy token after " + sequence);
        sequence.add(token);
      }
      // prefill + one decode step ran through the runtime (the second token comes from the decode step's logits)
      assertTrue(runtime.metrics().runs().count() - runsBefore >= 2, "supervised runs: " + runtime.metrics().runs());
      testKit.stop(server);
    }
  }

  @Test
  void aDecodeStepThatHangsTimesOutAndTheServerServesTheNextRequest() {
    try (LanguageModel lm = load()) {
      ActorRef<GenerationServer.Command> server = testKit.spawn(GenerationServer.create(lm.name(), lm.decoder(2),
          new SimpleMeterRegistry()));
      TextGenerator generator = new TextGenerator(lm, server, testKit.system());
      beforeAnswer.set(() -> sleepIgnoringInterrupts(OBSERVE_TIMEOUT.multipliedBy(4)));
      long started = System.nanoTime();
      CompletionException failed = assertThrows(CompletionException.class, () -> generator
          .generate(new int[] {1, 2}, SamplingParams.greedy().withMaxTokens(3), Duration.ofMinutes(1), piece -> {})
          .toCompletableFuture().join());
      XlaException error = (XlaException) failed.getCause();
      assertEquals(ErrorCode.DEADLINE_EXCEEDED, error.code(), error.getMessage());
      assertTrue(error.getMessage().contains("observe"), error.getMessage());
      assertTrue(System.nanoTime() - started < Duration.ofSeconds(30).toNanos());

      beforeAnswer.set(() -> {});
      TextGenerator.Result next = generator.generate(new int[] {3}, SamplingParams.greedy().withMaxTokens(3), Duration.ofMinutes(1),
          piece -> {}).toCompletableFuture().join();
      assertEquals(3, next.tokens().length, "the server reset its decoder and goes on");
      testKit.stop(server);
    }
  }

  @Test
  void aStepInFlightIsCancelledAndTheDecoderWorksAfterItsReset() throws Exception {
    CountDownLatch entered = new CountDownLatch(1);
    CountDownLatch released = new CountDownLatch(1);
    try (LanguageModel lm = load(); PackageSlotDecoder decoder = lm.decoder(2)) {
      decoder.prefill(0, new int[] {1, 2});
      beforeAnswer.set(() -> {
        entered.countDown();
        try {
          released.await(30, TimeUnit.SECONDS); // until the cancel interrupts the callback thread
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      });
      CompletableFuture<float[]> step = CompletableFuture.supplyAsync(
          () -> decoder.decode(new int[] {3, 0}, new int[] {2, 0}, new boolean[] {true, false}));
      assertTrue(entered.await(30, TimeUnit.SECONDS), "the step reached its callback");
      decoder.cancel("the test cancels the step");
      CompletionException failed = assertThrows(CompletionException.class, step::join);
      released.countDown();
      XlaException error = (XlaException) failed.getCause();
      assertEquals(ErrorCode.CANCELLED, error.code(), error.getMessage());
      assertTrue(error.getMessage().contains("the test cancels the step"), error.getMessage());

      beforeAnswer.set(() -> {});
      decoder.reset();
      float[] prefill = decoder.prefill(1, new int[] {1, 2, 3});
      float[] decoded = decoder.decode(new int[] {0, 4}, new int[] {0, 3}, new boolean[] {false, true});
      float[][] scored = lm.score(new int[] {1, 2, 3, 4});
      assertArrayEquals(scored[2], prefill, 1e-5f, "prefill after the reset");
      float[] row = java.util.Arrays.copyOfRange(decoded, 8, 16);
      assertArrayEquals(scored[3], row, 1e-5f, "decode after the reset");
    }
  }

  @Test
  void stoppingTheServerCancelsTheStepInFlight() throws Exception {
    CountDownLatch entered = new CountDownLatch(1);
    CountDownLatch interrupted = new CountDownLatch(1);
    try (LanguageModel lm = load()) {
      ActorRef<GenerationServer.Command> server = testKit.spawn(GenerationServer.create(lm.name(), lm.decoder(2),
          new SimpleMeterRegistry()));
      beforeAnswer.set(() -> {
        entered.countDown();
        try {
          Thread.sleep(Duration.ofSeconds(30).toMillis());
        } catch (InterruptedException e) {
          interrupted.countDown(); // the cancel reached the callback
        }
      });
      CompletableFuture<TextGenerator.Result> request = new TextGenerator(lm, server, testKit.system())
          .generate(new int[] {1, 2}, SamplingParams.greedy().withMaxTokens(3), Duration.ofMinutes(1), piece -> {})
          .toCompletableFuture();
      assertTrue(entered.await(30, TimeUnit.SECONDS), "the decode step reached its callback");
      testKit.stop(server);
      assertTrue(interrupted.await(10, TimeUnit.SECONDS), "the step in flight was cancelled when the server stopped");
      XlaException error = (XlaException) assertThrows(CompletionException.class, request::join).getCause();
      assertEquals(ErrorCode.UNAVAILABLE, error.code(), error.getMessage());
    } finally {
      beforeAnswer.set(() -> {});
    }
  }

  @Test
  void aPackageWhoseCallbacksAreNotRegisteredIsRefusedNamingThem() {
    try (CallbackRuntime bare = CallbackRuntime.create(testKit.system(), client)) {
      XlaException e = assertThrows(XlaException.class,
          () -> LanguageModel.load(ModelPackage.open(PACKAGE), client.devices().get(0), bare));
      assertTrue(e.getMessage().contains("observe"), e.getMessage());
    }
  }

  /**
   * A fixed package's decode_slots step writes position 0 of every slot not in use, so a free row keeps nothing
   * a prompt cache could reuse: the decoder says so, and the generation server prefills its prompts whole.
   */
  @Test
  void aFixedPackagesDecoderDoesNotKeepFreeRows() {
    beforeAnswer.set(() -> {});
    try (LanguageModel lm = load(); PackageSlotDecoder decoder = lm.decoder(2)) {
      assertFalse(decoder.keepsFreeRows());
    }
  }

  /**
   * A model loaded for one use compiles only that use's programs: one loaded for scoring scores as the whole
   * model does and refuses a decoder, one loaded for generation decodes the same greedy token and refuses to score.
   */
  @Test
  void aModelLoadedForScoringOrForGenerationRunsThatAndRefusesTheOtherNamingTheRolesLoaded() {
    beforeAnswer.set(() -> {});
    int[] prompt = {1, 2};
    try (LanguageModel all = load();
         LanguageModel scoring = LanguageModel.load(ModelPackage.open(PACKAGE), client.devices().get(0), runtime,
             LanguageModel.Use.SCORING);
         LanguageModel generation = LanguageModel.load(ModelPackage.open(PACKAGE), client.devices().get(0), runtime,
             LanguageModel.Use.GENERATION)) {
      assertEquals(LanguageModel.Use.ALL.roles(), all.loaded().roles());
      float[][] expected = all.score(prompt);
      float[][] scored = scoring.score(prompt);
      for (int i = 0; i < prompt.length; i++) {
        assertArrayEquals(expected[i], scored[i], 0f, "position " + i);
      }
      XlaException noDecoder = assertThrows(XlaException.class, () -> scoring.decoder(2));
      assertTrue(noDecoder.getMessage().contains("loaded with the programs of [score, score_chunk, slot_cache] only"),
          noDecoder.getMessage());

      ActorRef<GenerationServer.Command> server = testKit.spawn(GenerationServer.create(generation.name(), generation.decoder(2),
          new SimpleMeterRegistry()));
      TextGenerator.Result result = new TextGenerator(generation, server, testKit.system())
          .generate(prompt, SamplingParams.greedy().withMaxTokens(1), Duration.ofMinutes(1), piece -> {})
          .toCompletableFuture().join();
      assertEquals(argmax(expected[prompt.length - 1]), result.tokens()[0], "the greedy token after " + Arrays.toString(prompt));
      testKit.stop(server);
      XlaException noScore = assertThrows(XlaException.class, () -> generation.score(prompt));
      assertTrue(noScore.getMessage().contains("not score") && noScore.getMessage().contains("prefill_slot"), noScore.getMessage());
    }
  }

  @Test
  void samplingDefaultsComeFromThePackage() {
    SamplingParams defaults = LanguageModel.samplingDefaults(ModelPackage.open(PACKAGE));
    assertEquals(Set.of(0), defaults.stopTokenIds());
  }

  private static void sleepIgnoringInterrupts(Duration duration) {
    long end = System.nanoTime() + duration.toNanos();
    while (System.nanoTime() < end) {
      try {
        Thread.sleep(Math.max(1, (end - System.nanoTime()) / 1_000_000));
      } catch (InterruptedException e) {
        // a callback that ignores interrupts: the run's timeout must still end the run
      }
    }
  }
}
