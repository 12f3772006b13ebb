package dev.xlaactors.cli;

import static dev.xlaactors.cli.HfFixtures.ints;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.serve.GenerationServer;
import dev.xlaactors.actors.serve.GenerationServer.Event;
import dev.xlaactors.actors.serve.GenerationServer.Finished;
import dev.xlaactors.actors.serve.GenerationServer.Generate;
import dev.xlaactors.actors.serve.GenerationServer.Token;
import dev.xlaactors.actors.serve.GenerationSettings;
import dev.xlaactors.actors.serve.TokenSampler;
import dev.xlaactors.lm.LanguageModel;
import dev.xlaactors.lm.PackageSlotDecoder;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.ModelPackage;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.stream.IntStream;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The generation server's prompt cache (xla-actors.actors.generation.prompt-cache) on the Llama fixture imported
 * as a chunked package with small chunks (4 and 8), on the real CPU plugin: a repeated request and a chat's next
 * turn (the first prompt, its reply and a new message) prefill only what their slot's row does not hold, and
 * give the same greedy tokens and log-probabilities as a server without the cache, which prefills every prompt
 * whole.
 */
class PromptCacheTest {
  private static final Duration WAIT = Duration.ofMinutes(2);

  @TempDir
  static Path packages;

  private static ActorTestKit testKit;
  private static XlaClient client;
  private static CallbackRuntime runtime;
  private static LanguageModel lm;

  @BeforeAll
  static void importAndLoad() {
    HfFixtures.useThisCheckoutAsHome();
    Path dir = HfFixtures.imported(packages, "llama", "--slots", "2", "--prefill-chunks", "4,8", "--decode-lengths", "16",
        "--score-length", "4", "--kernels", "xla");
    testKit = ActorTestKit.create();
    client = XlaClient.create(LanguageModel.clientSettings());
    runtime = CallbackRuntime.create(testKit.system(), client);
    lm = LanguageModel.load(ModelPackage.open(dir), client.devices().get(0), runtime);
  }

  @AfterAll
  static void close() {
    lm.close();
    runtime.close();
    client.close();
    testKit.shutdownTestKit();
  }

  /** A generation's greedy tokens and the log-probability of each under its logits. */
  private record Generated(int[] tokens, double[] logprobs) {}

  /** Greedy choice that also records the chosen token's log-softmax (the server calls it one step at a time). */
  private static TokenSampler recording(List<Double> logprobs) {
    TokenSampler greedy = TokenSampler.greedy();
    return (logits, offset, vocabulary) -> {
      int token = greedy.sample(logits, offset, vocabulary);
      double max = logits[offset + token];
      double sum = 0;
      for (int i = 0; i < vocabulary; i++) {
        sum += Math.exp(logits[offset + i] - max);
      }
      logprobs.add(-Math.log(sum));
      return token;
    };
  }

  private static Generated generate(ActorRef<GenerationServer.Command> server, String id, int[] prompt, int maxTokens) {
    List<Double> logprobs = new ArrayList<>();
    TestProbe<Event> probe = testKit.createTestProbe();
    server.tell(new Generate(id, prompt, maxTokens, Set.of(), recording(logprobs), null, probe.getRef()));
    List<Integer> tokens = new ArrayList<>();
    for (Event e = probe.receiveMessage(WAIT); !(e instanceof Finished); e = probe.receiveMessage(WAIT)) {
      assertTrue(e instanceof Token, id + ": " + e);
      tokens.add(((Token) e).token());
    }
    return new Generated(tokens.stream().mapToInt(Integer::intValue).toArray(), logprobs.stream().mapToDouble(d -> d).toArray());
  }

  private static int[] concat(int[]... parts) {
    return java.util.Arrays.stream(parts).flatMapToInt(IntStream::of).toArray();
  }

  /** The same requests on a server with the cache and on one without: same tokens, same log-probabilities to rounding. */
  @Test
  void aRepeatedRequestAndAChatsNextTurnPrefillOnlyWhatTheirSlotLacksAndGiveTheSameTokens() throws IOException {
    JsonNode ref = HfFixtures.reference("llama");
    int[] first = concat(ints(ref.get("input_ids")), ints(ref.get("greedy_prompt"))); // 16 tokens: 4 chunks of 4 or 2 of 8
    int maxTokens = 6;
    SimpleMeterRegistry cachedMeters = new SimpleMeterRegistry();
    SimpleMeterRegistry wholeMeters = new SimpleMeterRegistry();
    GenerationSettings settings = GenerationSettings.create(testKit.system());
    assertTrue(settings.promptCache(), "on by default");
    PackageSlotDecoder cachedDecoder = lm.decoder(2);
    PackageSlotDecoder wholeDecoder = lm.decoder(2);
    assertTrue(cachedDecoder.keepsFreeRows(), "a chunked package's decode step touches only the active rows");
    ActorRef<GenerationServer.Command> cached = testKit.spawn(GenerationServer.create("cached", cachedDecoder, settings, cachedMeters));
    ActorRef<GenerationServer.Command> whole = testKit.spawn(GenerationServer.create("whole", wholeDecoder,
        settings.withPromptCache(false), wholeMeters));

    Generated once = generate(cached, "once", first, maxTokens);
    Generated again = generate(cached, "again", first, maxTokens);
    Generated uncached = generate(whole, "uncached", first, maxTokens);
    assertEquals(maxTokens, once.tokens().length);
    assertArrayEquals(uncached.tokens(), once.tokens(), "the first request has nothing to reuse");
    assertArrayEquals(uncached.logprobs(), once.logprobs(), 1e-4);
    assertArrayEquals(uncached.tokens(), again.tokens(), "the repeated request, its prompt's first 15 tokens reused");
    assertArrayEquals(uncached.logprobs(), again.logprobs(), 1e-4);
    assertEquals(15.0, count(cachedMeters, "xla.generate.prompt.tokens.cached"), "all but the prompt's last token");

    // A chat's next turn: the first prompt, the reply, a new message. The row holds the prompt and the reply but
    // its last token (never fed back through a decode step).
    int[] next = concat(first, once.tokens(), new int[] {17, 301, 45});
    Generated turn = generate(cached, "turn", next, maxTokens);
    Generated turnWhole = generate(whole, "turn-whole", next, maxTokens);
    assertArrayEquals(turnWhole.tokens(), turn.tokens());
    assertArrayEquals(turnWhole.logprobs(), turn.logprobs(), 1e-4);
    assertEquals(15.0 + first.length + maxTokens - 1, count(cachedMeters, "xla.generate.prompt.tokens.cached"),
        "the next turn reused its first prompt and the reply fed back");
    assertEquals(2.0 * first.length + next.length, count(cachedMeters, "xla.generate.prompt.tokens"));
    assertEquals(0.0, count(wholeMeters, "xla.generate.prompt.tokens.cached"), "prompt-cache = off: every prompt prefilled whole");
    assertEquals(first.length + next.length, count(wholeMeters, "xla.generate.prompt.tokens"));
    testKit.stop(cached);
    testKit.stop(whole);
  }

  private static double count(SimpleMeterRegistry registry, String counter) {
    return registry.get(counter).counter().count();
  }
}
