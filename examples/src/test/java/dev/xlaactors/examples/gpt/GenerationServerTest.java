package dev.xlaactors.examples.gpt;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.serve.GenerationServer;
import dev.xlaactors.actors.serve.GenerationServer.Event;
import dev.xlaactors.actors.serve.GenerationServer.Failed;
import dev.xlaactors.actors.serve.GenerationServer.Finished;
import dev.xlaactors.actors.serve.GenerationServer.Token;
import dev.xlaactors.actors.serve.GenerationSettings;
import dev.xlaactors.actors.serve.TokenSampler;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.lm.LanguageModel;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.ModelPackage;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.stream.javadsl.Sink;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Continuous batching on the real plugin: the slot programs of the tiny GPT's package ({@code gpt-tiny-package},
 * made by {@code tools/jax_gpt.py package --config tiny}, 4 slots, context 32, prompts up to 8 tokens), a
 * decoder of the library's {@link LanguageModel}, behind a {@link GenerationServer}. Ordering is forced by counts (a slow sampler makes a long request take many
 * iterations), never by wall-clock budgets.
 */
class GenerationServerTest {
  private static final Duration WAIT = Duration.ofSeconds(60);
  private static XlaClient client;
  private static CallbackRuntime runtime;
  private static GptPackage gpt;
  private static LanguageModel model;
  private static ActorTestKit kit;
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  private ActorRef<GenerationServer.Command> server;

  @BeforeAll
  static void load() throws URISyntaxException {
    client = XlaClient.create();
    kit = ActorTestKit.create("generation-server-test");
    runtime = CallbackRuntime.create(kit.system(), client);
    gpt = GptPackage.open(Path.of(GenerationServerTest.class.getResource("/gpt-tiny-package/xla-model.json").toURI()).getParent());
    model = LanguageModel.load(ModelPackage.open(gpt.directory()), client.devices().get(0), runtime);
  }

  @AfterAll
  static void close() {
    kit.shutdownTestKit(); // stops the servers, which close their decoders, before the model goes
    model.close();
    runtime.close();
    client.close();
  }

  @BeforeEach
  void start() {
    server = spawn(GenerationSettings.create(kit.system()));
  }

  @AfterEach
  void stop() {
    kit.stop(server, Duration.ofSeconds(30));
  }

  private ActorRef<GenerationServer.Command> spawn(GenerationSettings settings) {
    return kit.spawn(GenerationServer.create("tiny", model.decoder(4), settings, registry));
  }

  /** A greedy sampler that sleeps {@code millis} per token: a request that takes many iterations. */
  private static TokenSampler slow(long millis) {
    TokenSampler greedy = TokenSampler.greedy();
    return (logits, offset, vocab) -> {
      try {
        Thread.sleep(millis);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      return greedy.sample(logits, offset, vocab);
    };
  }

  private static GenerationServer.Generate request(String id, int[] prompt, int maxTokens, TokenSampler sampler, ActorRef<Event> to) {
    return new GenerationServer.Generate(id, prompt, maxTokens, Set.of(), sampler, null, to);
  }

  /** The events of one request up to its final one. */
  private static List<Event> collect(TestProbe<Event> probe) {
    List<Event> events = new ArrayList<>();
    while (events.isEmpty() || events.get(events.size() - 1) instanceof Token) {
      events.add(probe.receiveMessage(WAIT));
    }
    return events;
  }

  private static int[] tokens(List<Event> events) {
    return events.stream().filter(e -> e instanceof Token).mapToInt(e -> ((Token) e).token()).toArray();
  }

  /** Tokens of {@code prompt} generated alone (nothing else in the server). */
  private int[] alone(int[] prompt, int maxTokens) {
    TestProbe<Event> probe = kit.createTestProbe();
    server.tell(request("alone", prompt, maxTokens, TokenSampler.greedy(), probe.getRef()));
    List<Event> events = collect(probe);
    assertInstanceOf(Finished.class, events.get(events.size() - 1), events.toString());
    return tokens(events);
  }

  private static int[] prompt(int length, int seed) {
    int[] p = new int[length];
    for (int i = 0; i < length; i++) {
      p[i] = (seed * 37 + i * 11 + 5) % 512;
    }
    return p;
  }

  @Test
  void aloneTheSlotProgramsGiveJaxsGreedyTokens() {
    int[] expected = gpt.referenceGreedyTokens(); // JAX's run of make's programs
    assertArrayEquals(expected, alone(gpt.referencePrompt(), expected.length));
  }

  @Test
  void interleavedRequestsEachGetTheTokensTheyGetAlone() {
    int[][] prompts = {prompt(8, 1), prompt(3, 2), prompt(5, 3), prompt(1, 4), prompt(7, 5), prompt(2, 6), prompt(6, 7)};
    int[] maxTokens = {20, 4, 11, 24, 7, 16, 2};
    int[][] expected = new int[prompts.length][];
    for (int i = 0; i < prompts.length; i++) {
      expected[i] = alone(prompts[i], maxTokens[i]);
    }
    // Seven requests on four slots, started at different token boundaries of the ones before them.
    List<TestProbe<Event>> probes = new ArrayList<>();
    for (int i = 0; i < prompts.length; i++) {
      TestProbe<Event> probe = kit.createTestProbe();
      probes.add(probe);
      server.tell(request("r" + i, prompts[i], maxTokens[i], TokenSampler.greedy(), probe.getRef()));
      if (i % 2 == 0) {
        assertInstanceOf(Token.class, probe.receiveMessage(WAIT)); // the next joins a running batch
      }
    }
    for (int i = 0; i < prompts.length; i++) {
      List<Event> events = collect(probes.get(i));
      int[] got = tokens(events);
      if (i % 2 == 0) { // its first token was taken above
        int[] all = new int[got.length + 1];
        all[0] = expected[i][0];
        System.arraycopy(got, 0, all, 1, got.length);
        got = all;
      }
      assertArrayEquals(expected[i], got, "request r" + i + " interleaved vs alone");
      assertInstanceOf(Finished.class, events.get(events.size() - 1));
    }
  }

  @Test
  void aShortRequestFinishesBeforeALongOneStartedEarlier() {
    TestProbe<Event> both = kit.createTestProbe();
    server.tell(request("long", prompt(4, 1), 24, slow(20), both.getRef()));
    assertInstanceOf(Token.class, both.receiveMessage(WAIT));
    server.tell(request("short", prompt(6, 2), 3, TokenSampler.greedy(), both.getRef()));
    List<String> finishedOrder = new ArrayList<>();
    while (finishedOrder.size() < 2) {
      Event e = both.receiveMessage(WAIT);
      if (e instanceof Finished f) {
        finishedOrder.add(f.id());
      } else {
        assertInstanceOf(Token.class, e, e.toString());
      }
    }
    assertEquals(List.of("short", "long"), finishedOrder);
  }

  @Test
  void cancellingARequestFreesItsSlotForAWaitingOne() {
    int[] expected = alone(prompt(5, 9), 3);
    TestProbe<Event> longs = kit.createTestProbe();
    for (int i = 0; i < 4; i++) {
      server.tell(request("long" + i, prompt(8, i), 20, slow(30), longs.getRef()));
    }
    TestProbe<Event> waiter = kit.createTestProbe();
    server.tell(request("waiter", prompt(5, 9), 3, TokenSampler.greedy(), waiter.getRef()));
    TestProbe<GenerationServer.Status> status = kit.createTestProbe();
    status.awaitAssert(WAIT, () -> { // at the first boundary the other three long ones take the free slots
      server.tell(new GenerationServer.GetStatus(status.getRef()));
      GenerationServer.Status s = status.receiveMessage(WAIT);
      assertEquals(4, s.active(), s.toString());
      assertEquals(1, s.waiting(), s.toString());
      return null;
    });

    server.tell(new GenerationServer.Cancel("long0", "the test cancels it"));
    List<Event> waited = collect(waiter);
    assertArrayEquals(expected, tokens(waited));
    // The waiter finished while the other three long requests were still decoding.
    server.tell(new GenerationServer.GetStatus(status.getRef()));
    assertEquals(3, status.receiveMessage(WAIT).active());
    Map<String, Event> last = new HashMap<>();
    while (last.size() < 4) {
      Event e = longs.receiveMessage(WAIT);
      if (!(e instanceof Token)) {
        last.put(e.id(), e);
      }
    }
    Failed cancelled = assertInstanceOf(Failed.class, last.get("long0"));
    assertEquals(ErrorCode.CANCELLED, cancelled.error().code());
    for (int i = 1; i < 4; i++) {
      assertEquals(20, assertInstanceOf(Finished.class, last.get("long" + i)).tokens());
    }
  }

  @Test
  void beyondMaxWaitingARequestIsRefusedAtOnceAndAnExpiredWaiterIsNeverComputed() {
    kit.stop(server, Duration.ofSeconds(30));
    server = spawn(GenerationSettings.create(kit.system()).withMaxWaiting(1));
    TestProbe<Event> longs = kit.createTestProbe();
    for (int i = 0; i < 4; i++) {
      server.tell(request("long" + i, prompt(8, i), 20, slow(30), longs.getRef()));
    }
    TestProbe<Event> waiter = kit.createTestProbe();
    server.tell(new GenerationServer.Generate("late", prompt(3, 1), 5, Set.of(), TokenSampler.greedy(), Duration.ofMillis(100),
        waiter.getRef()));
    TestProbe<Event> refused = kit.createTestProbe();
    server.tell(request("refused", prompt(3, 2), 5, TokenSampler.greedy(), refused.getRef()));
    Failed overloaded = assertInstanceOf(Failed.class, refused.receiveMessage(WAIT));
    assertEquals(ErrorCode.RESOURCE_EXHAUSTED, overloaded.error().code());
    assertTrue(overloaded.error().getMessage().contains("max-waiting"), overloaded.error().getMessage());

    Failed late = assertInstanceOf(Failed.class, waiter.receiveMessage(WAIT)); // no token before it
    assertEquals(ErrorCode.DEADLINE_EXCEEDED, late.error().code());
    assertTrue(late.error().getMessage().contains("nothing was computed"), late.error().getMessage());
  }

  @Test
  void aStoppedReplyToCancelsItsGenerationAndAFailingSamplerFailsOnlyItsRequest() {
    int[] expected = alone(prompt(4, 8), 6);
    // A consumer that goes away after its first token (a client that disconnected).
    TestProbe<Event> seen = kit.createTestProbe();
    Behavior<Event> firstTokenThenStop = Behaviors.receiveMessage(e -> {
      seen.getRef().tell(e);
      return Behaviors.stopped();
    });
    ActorRef<Event> consumer = kit.spawn(firstTokenThenStop);
    server.tell(request("gone", prompt(8, 3), 20, slow(30), consumer));
    assertInstanceOf(Token.class, seen.receiveMessage(WAIT));

    TokenSampler greedy = TokenSampler.greedy();
    int[] calls = {0};
    TokenSampler failsAtThird = (logits, offset, vocab) -> {
      if (++calls[0] == 3) {
        throw new IllegalStateException("sampler broke");
      }
      return greedy.sample(logits, offset, vocab);
    };
    TestProbe<Event> broken = kit.createTestProbe();
    TestProbe<Event> fine = kit.createTestProbe();
    server.tell(request("broken", prompt(6, 7), 10, failsAtThird, broken.getRef()));
    server.tell(request("fine", prompt(4, 8), 6, TokenSampler.greedy(), fine.getRef()));
    List<Event> b = collect(broken);
    assertEquals(2, tokens(b).length);
    Failed failed = assertInstanceOf(Failed.class, b.get(b.size() - 1));
    assertTrue(failed.error().getMessage().contains("sampler of request 'broken' failed: sampler broke"), failed.error().getMessage());
    assertArrayEquals(expected, tokens(collect(fine)));

    // The slot of the stopped consumer was freed long before its 20 tokens: nothing is left in the
    // server, and of the tokens streamed (6 alone, 2 broken, 6 fine) fewer than 20 were the stopped one's.
    TestProbe<GenerationServer.Status> status = kit.createTestProbe();
    status.awaitAssert(WAIT, () -> {
      server.tell(new GenerationServer.GetStatus(status.getRef()));
      GenerationServer.Status s = status.receiveMessage(WAIT);
      assertEquals(0, s.active(), s.toString());
      assertTrue(s.tokens() - 14 < 20, s.toString());
      return null;
    });
  }

  @Test
  void aTokenStreamGivesTheTokensAndCancellingItCancelsTheGeneration() throws Exception {
    int[] expected = alone(prompt(7, 4), 9);
    List<Integer> streamed = GenerationServer.tokens(server, prompt(7, 4), 9, Set.of(), TokenSampler.greedy(), null)
        .runWith(Sink.seq(), kit.system()).toCompletableFuture().get(60, TimeUnit.SECONDS);
    assertArrayEquals(expected, streamed.stream().mapToInt(Integer::intValue).toArray());

    // A consumer that takes two tokens of twenty and goes away.
    List<Event> two = GenerationServer.events(server, prompt(8, 5), 20, Set.of(), slow(30), null)
        .take(2).runWith(Sink.seq(), kit.system()).toCompletableFuture().get(60, TimeUnit.SECONDS);
    assertEquals(2, two.size());
    TestProbe<GenerationServer.Status> status = kit.createTestProbe();
    status.awaitAssert(WAIT, () -> {
      server.tell(new GenerationServer.GetStatus(status.getRef()));
      assertEquals(0, status.receiveMessage(WAIT).active());
      assertEquals(1.0, registry.get("xla.generate.requests").tags("model", "tiny", "outcome", "cancelled").counter().count());
      return null;
    });
    assertEquals(2.0, registry.get("xla.generate.requests").tags("model", "tiny", "outcome", "finished").counter().count());

    // A bad request through the stream fails it with the server's message naming the field.
    Exception bad = org.junit.jupiter.api.Assertions.assertThrows(Exception.class, () ->
        GenerationServer.tokens(server, new int[] {1, 999}, 3, Set.of(), TokenSampler.greedy(), null)
            .runWith(Sink.seq(), kit.system()).toCompletableFuture().get(60, TimeUnit.SECONDS));
    assertTrue(bad.getCause().getMessage().startsWith("prompt[1]: token 999"), bad.getCause().getMessage());
  }
}
