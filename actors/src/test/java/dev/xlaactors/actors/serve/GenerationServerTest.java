package dev.xlaactors.actors.serve;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.serve.GenerationServer.Event;
import dev.xlaactors.actors.serve.GenerationServer.Finished;
import dev.xlaactors.actors.serve.GenerationServer.Generate;
import dev.xlaactors.actors.serve.GenerationServer.Token;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.ServingException;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.stream.javadsl.Sink;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;

/**
 * GenerationServer's scheduling over a plain-Java {@link StepDecoder} (no model: token t is followed by
 * t + 1): deadlines, the events' stream, a stopped server and the status counts. No assertion depends on
 * timing; waits are generous bounds for an answer that must come.
 */
class GenerationServerTest {
  private static final ActorTestKit kit = ActorTestKit.create();
  private static final Duration WAIT = Duration.ofSeconds(30);
  private static final GenerationSettings SETTINGS = new GenerationSettings(8, Duration.ofMinutes(5), "xla-actors.actors.run-dispatcher");

  @AfterAll
  static void shutdown() {
    kit.shutdownTestKit();
  }

  private static ActorRef<GenerationServer.Command> server(StepDecoder decoder) {
    return kit.spawn(GenerationServer.create("steps", decoder, SETTINGS, new SimpleMeterRegistry()));
  }

  private static GenerationServer.Status status(ActorRef<GenerationServer.Command> server) {
    TestProbe<GenerationServer.Status> probe = kit.createTestProbe();
    server.tell(new GenerationServer.GetStatus(probe.getRef()));
    return probe.receiveMessage(WAIT);
  }

  /**
   * With the default settings, generation steps (which block until their runs finish) run on
   * generation.dispatcher's pool, never on runs.dispatcher's, whose threads their runs need: every prefill and
   * decode call is made on a thread of xla-actors.actors.generation-dispatcher.
   */
  @Test
  void stepsRunOnTheGenerationDispatcherNotThePoolTheirRunsNeed() {
    StepDecoder decoder = new StepDecoder(1, 10, 4, 16);
    GenerationSettings defaults = GenerationSettings.fromConfig(kit.system().settings().config());
    ActorRef<GenerationServer.Command> server = kit.spawn(GenerationServer.create("own-pool", decoder, defaults, new SimpleMeterRegistry()));
    TestProbe<Event> probe = kit.createTestProbe();
    server.tell(new Generate("steps", new int[] {1}, 2, Set.of(), TokenSampler.greedy(), null, probe.getRef()));
    assertEquals(new Token("steps", 0, 2), probe.receiveMessage(WAIT));
    assertEquals(new Token("steps", 1, 3), probe.receiveMessage(WAIT));
    assertEquals(new Finished("steps", GenerationServer.Reason.MAX_TOKENS, 2), probe.receiveMessage(WAIT));
    assertTrue(decoder.threads.size() >= 2, decoder.threads.toString());
    for (String thread : decoder.threads) {
      assertTrue(thread.contains("xla-actors.actors.generation-dispatcher"), "a step ran on " + thread);
    }
    kit.stop(server);
  }

  @Test
  void aHugeTimeoutIsNoDeadlineAndTheServerLivesOn() {
    ActorRef<GenerationServer.Command> server = server(new StepDecoder(2, 10, 4, 32));
    TestProbe<Event> probe = kit.createTestProbe();
    server.tell(new Generate("forever", new int[] {1}, 2, Set.of(), TokenSampler.greedy(), Duration.ofSeconds(Long.MAX_VALUE),
        probe.getRef()));
    assertEquals(new Token("forever", 0, 2), probe.receiveMessage(WAIT));
    assertEquals(new Token("forever", 1, 3), probe.receiveMessage(WAIT));
    assertEquals(new Finished("forever", GenerationServer.Reason.MAX_TOKENS, 2), probe.receiveMessage(WAIT));
    server.tell(new Generate("next", new int[] {5}, 1, Set.of(), TokenSampler.greedy(), null, probe.getRef()));
    assertEquals(new Token("next", 0, 6), probe.receiveMessage(WAIT));
    kit.stop(server);
  }

  @Test
  void aStreamWithAHugeTokenLimitKeepsItsEventsWhileItsConsumerWaits() throws Exception {
    StepDecoder decoder = new StepDecoder(1, 10, 4, 64);
    ActorRef<GenerationServer.Command> server = server(decoder);
    CompletableFuture<Void> consumer = new CompletableFuture<>();
    CompletableFuture<List<Event>> events = GenerationServer.events(server, new int[] {0}, Integer.MAX_VALUE - 1, Set.of(),
            TokenSampler.greedy(), null)
        .mapAsync(1, e -> consumer.thenApply(v -> e))
        .runWith(Sink.seq(), kit.system())
        .toCompletableFuture();
    // The whole generation is produced while the consumer takes nothing: every event waits in the buffer.
    long until = System.nanoTime() + WAIT.toNanos();
    while (status(server).finished() == 0 && System.nanoTime() < until) {
      Thread.sleep(10);
    }
    consumer.complete(null);
    List<Event> got = events.get(WAIT.toSeconds(), TimeUnit.SECONDS);
    Finished last = assertInstanceOf(Finished.class, got.get(got.size() - 1), got.toString());
    assertEquals(GenerationServer.Reason.CONTEXT_FULL, last.reason());
    assertEquals(64, last.tokens(), "the prompt and 63 decode steps fill the context of 64; the last token is not written");
    assertEquals(65, got.size());
    for (int i = 0; i < 64; i++) {
      assertEquals(new Token(last.id(), i, (i + 1) % 10), got.get(i));
    }
    kit.stop(server);
  }

  @Test
  void aStreamToAStoppedServerEndsAtOnceWithUnavailable() throws Exception {
    ActorRef<GenerationServer.Command> server = server(new StepDecoder(1, 10, 4, 16));
    kit.stop(server, WAIT);
    List<Event> got = GenerationServer.events(server, new int[] {1}, 4, Set.of(), TokenSampler.greedy(), null)
        .runWith(Sink.seq(), kit.system())
        .toCompletableFuture().get(WAIT.toSeconds(), TimeUnit.SECONDS);
    assertEquals(1, got.size(), got.toString());
    GenerationServer.Failed failed = assertInstanceOf(GenerationServer.Failed.class, got.get(0));
    assertEquals(ErrorCode.UNAVAILABLE, failed.error().code());
    assertInstanceOf(ServingException.class, failed.error());
    assertTrue(failed.error().getMessage().contains("has stopped"), failed.error().getMessage());
  }

  @Test
  void theStatusCountsFinishedRequestsApartFromCancelledAndRefusedOnes() throws Exception {
    StepDecoder decoder = new StepDecoder(1, 10, 4, 32);
    decoder.gate = new CountDownLatch(1);
    ActorRef<GenerationServer.Command> server = server(decoder);
    TestProbe<Event> probe = kit.createTestProbe();
    server.tell(new Generate("held", new int[] {1}, 5, Set.of(), TokenSampler.greedy(), null, probe.getRef()));
    assertTrue(decoder.entered.await(WAIT.toSeconds(), TimeUnit.SECONDS), "the prefill never started");
    server.tell(new GenerationServer.Cancel("held", "the test cancels it"));
    GenerationServer.Failed cancelled = probe.expectMessageClass(GenerationServer.Failed.class, WAIT);
    assertEquals(ErrorCode.CANCELLED, cancelled.error().code());
    decoder.gate.countDown();
    server.tell(new Generate("done", new int[] {1}, 1, Set.of(), TokenSampler.greedy(), null, probe.getRef()));
    assertEquals(new Token("done", 0, 2), probe.receiveMessage(WAIT));
    assertEquals(new Finished("done", GenerationServer.Reason.MAX_TOKENS, 1), probe.receiveMessage(WAIT));
    GenerationServer.Status s = status(server);
    assertEquals(1, s.finished(), "one request finished; the cancelled one did not: " + s);
    assertEquals(0, s.refused(), s.toString());
    kit.stop(server);
  }

  /** The tokens of request {@code id} ({@code prompt}, greedy, {@code maxTokens}) on {@code server}, after its Finished. */
  private static List<Integer> generate(ActorRef<GenerationServer.Command> server, String id, int[] prompt, int maxTokens) {
    TestProbe<Event> probe = kit.createTestProbe();
    server.tell(new Generate(id, prompt, maxTokens, Set.of(), TokenSampler.greedy(), null, probe.getRef()));
    List<Integer> tokens = new java.util.ArrayList<>();
    for (Event e = probe.receiveMessage(WAIT); !(e instanceof Finished); e = probe.receiveMessage(WAIT)) {
      tokens.add(((Token) e).token());
    }
    return tokens;
  }

  /**
   * A chat's next turn is prefilled after the prefix its slot's row still holds (its last prompt and the tokens
   * fed back) when the decoder keeps free rows and the setting is on; otherwise from position 0. The counters
   * xla.generate.prompt.tokens and .cached say so; the tokens are the same either way.
   */
  @Test
  void aNextTurnIsPrefilledAfterThePrefixItsSlotHoldsOnlyWhenTheDecoderKeepsFreeRowsAndTheSettingIsOn() {
    record Case(boolean keepsRows, boolean setting, List<String> parts, double cached) {}
    for (Case c : List.of(new Case(true, true, List.of("0+3", "4+1"), 4), new Case(true, false, List.of("0+3", "0+5"), 0),
        new Case(false, true, List.of("0+3", "0+5"), 0))) {
      StepDecoder decoder = new StepDecoder(1, 10, 8, 16, c.keepsRows());
      SimpleMeterRegistry registry = new SimpleMeterRegistry();
      ActorRef<GenerationServer.Command> server = kit.spawn(GenerationServer.create("steps", decoder,
          SETTINGS.withPromptCache(c.setting()), registry));
      assertEquals(List.of(4, 5), generate(server, "first", new int[] {1, 2, 3}, 2), c.toString());
      // the row holds 1 2 3 and the 4 fed back (5 was never fed back)
      assertEquals(List.of(8, 9), generate(server, "next", new int[] {1, 2, 3, 4, 7}, 2), c.toString());
      assertEquals(c.parts(), List.copyOf(decoder.parts), c.toString());
      assertEquals(8.0, registry.get("xla.generate.prompt.tokens").counter().count(), c.toString());
      assertEquals(c.cached(), registry.get("xla.generate.prompt.tokens.cached").counter().count(), c.toString());
      kit.stop(server);
    }
  }
}
