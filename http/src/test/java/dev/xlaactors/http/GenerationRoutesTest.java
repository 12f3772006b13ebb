package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.actors.serve.GenerationServer;
import dev.xlaactors.actors.serve.GenerationSettings;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The generate route over {@link GenerationServer}s of a plain-Java {@link StepDecoder} (token t is
 * followed by t + 1), through java.net.http over 127.0.0.1: what a client sees of a stopped server.
 */
class GenerationRoutesTest {
  private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
  private static ActorTestKit kit;
  private static PrometheusMeterRegistry registry;
  private static HttpServer http;
  private static StepDecoder steps;
  private static StepDecoder one; // one slot
  private static ActorRef<GenerationServer.Command> oneServer;

  /**
   * A byte-level tokenizer: token 2 is the first byte of "\u00e9" (0xC3), token 3 its second (0xA9), token t
   * otherwise the letter 'a' + t; text is encoded as those letters.
   */
  static final class ByteCodec implements TextCodec {
    @Override
    public int[] encode(String text) {
      return text.chars().map(c -> c - 'a').toArray();
    }

    // No @Override: it also compiles against a TextCodec without decodeBytes (its default then is unused).
    public byte[] decodeBytes(int token) {
      return token == 2 ? new byte[] {(byte) 0xC3} : token == 3 ? new byte[] {(byte) 0xA9} : new byte[] {(byte) ('a' + token)};
    }

    @Override
    public String decode(int token) {
      return new String(decodeBytes(token), StandardCharsets.UTF_8);
    }
  }

  @BeforeAll
  static void start() {
    // Pekko's request-timeout far below the servers' deadlines; the routes believe generations default to 2s
    // while the servers below are given 5m, so that the HTTP layer's own timeout can be seen firing first.
    kit = ActorTestKit.create("generation-routes-test", ConfigFactory.parseString(
        "pekko.http.server.request-timeout = 1s\n"
            + "xla-actors.actors.generation.default-timeout = 2s\n"
            + "xla-actors.http.request-timeout-margin = 1s\n"
            + "xla-actors.http.sse-keep-alive = 200ms").withFallback(ConfigFactory.load()));
    registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    GenerationSettings settings = new GenerationSettings(8, Duration.ofMinutes(5), "xla-actors.actors.run-dispatcher");
    StepDecoder goneDecoder = new StepDecoder(1, 10, 4, 16);
    ActorRef<GenerationServer.Command> gone = kit.spawn(GenerationServer.create("gone", goneDecoder, settings, registry));
    kit.stop(gone, Duration.ofSeconds(30));
    StepDecoder stepsDecoder = new StepDecoder(2, 10, 4, 32);
    steps = stepsDecoder;
    ActorRef<GenerationServer.Command> live = kit.spawn(GenerationServer.create("steps", stepsDecoder, settings, registry));
    one = new StepDecoder(1, 10, 4, 32);
    oneServer = kit.spawn(GenerationServer.create("one", one, settings, registry));
    HttpSettings httpSettings = HttpSettings.create(kit.system()).withPort(0);
    ServingRoutes routes = new ServingRoutes(kit.system(), httpSettings, registry, List.of(),
        List.of(GenerationEndpoint.of("gone", gone, goneDecoder, null), GenerationEndpoint.of("steps", live, stepsDecoder, new ByteCodec()),
            GenerationEndpoint.of("one", oneServer, one, null)));
    http = HttpServer.start(kit.system(), httpSettings, routes.route());
    // One request first, its answer not looked at: a cold JVM can take longer than Pekko's 1 s request-timeout
    // (set low above) to reach the route, whichever test happens to run first.
    try {
      post("/v1/models/steps/generate", "{\"tokens\": [1], \"max_tokens\": 1}");
    } catch (Exception e) {
      throw new IllegalStateException("the warm-up request failed", e);
    }
  }

  @AfterAll
  static void stop() {
    http.close();
    kit.shutdownTestKit();
  }

  private static HttpResponse<String> post(String path, String body) throws Exception {
    return HTTP.send(HttpRequest.newBuilder(URI.create(http.url() + path)).timeout(Duration.ofSeconds(120))
        .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private static JsonNode json(HttpResponse<String> r) throws Exception {
    assertEquals("application/json", r.headers().firstValue("Content-Type").orElse(""), r.body());
    return TensorJson.MAPPER.readTree(r.body());
  }

  @Test
  void aRequestToAStoppedServerIsAnsweredAtOnceNamingTheModel() throws Exception {
    HttpResponse<String> r = post("/v1/models/gone/generate", "{\"tokens\": [1], \"max_tokens\": 2}");
    assertEquals(503, r.statusCode(), r.body());
    JsonNode body = json(r);
    assertEquals("UNAVAILABLE", body.get("code").asText());
    String error = body.get("error").asText();
    assertTrue(error.contains("'gone'") && error.contains("stopped"), error);
  }

  /** The data of each event of a server-sent-events body, in order, as {@code name: data}. */
  private static List<String> events(String body) {
    List<String> out = new ArrayList<>();
    String name = null;
    for (String line : body.split("\n")) {
      if (line.startsWith("event: ")) {
        name = line.substring(7);
      } else if (line.startsWith("data: ")) {
        out.add(name + ": " + line.substring(6));
      }
    }
    return out;
  }

  /** The token ids of a generation's events, in order. */
  private static List<Integer> tokens(HttpResponse<String> r) throws Exception {
    assertEquals(200, r.statusCode(), r.body());
    List<Integer> out = new ArrayList<>();
    for (String e : events(r.body())) {
      if (e.startsWith("token: ")) {
        out.add(TensorJson.MAPPER.readTree(e.substring(7)).get("token").asInt());
      }
    }
    return out;
  }

  @Test
  void samplingIsLmsSamplerSeededAndCheckedNamingTheField() throws Exception {
    // The decoder's logits are 1 for token t + 1 and 0 elsewhere: greedy from 4 is 5, 6, 7.
    assertEquals(List.of(5, 6, 7), tokens(post("/v1/models/steps/generate", "{\"tokens\": [4], \"max_tokens\": 3}")));
    // top_k 1 keeps the highest logit only: the greedy tokens at any temperature and seed.
    assertEquals(List.of(5, 6, 7), tokens(post("/v1/models/steps/generate",
        "{\"tokens\": [4], \"max_tokens\": 3, \"temperature\": 50, \"top_k\": 1, \"seed\": 7}")));
    // Hot enough that every token is about as likely: a seed draws the same tokens every time.
    String hot = "{\"tokens\": [4], \"max_tokens\": 8, \"temperature\": 50, \"seed\": 11}";
    List<Integer> drawn = tokens(post("/v1/models/steps/generate", hot));
    assertEquals(8, drawn.size());
    assertEquals(drawn, tokens(post("/v1/models/steps/generate", hot)), "the same seed draws the same tokens");
    // A temperature the sampler refuses is the client's mistake: 400 naming the field, its value and the fix.
    HttpResponse<String> tooCold = post("/v1/models/steps/generate", "{\"tokens\": [4], \"temperature\": 0.005}");
    assertEquals(400, tooCold.statusCode(), tooCold.body());
    JsonNode body = json(tooCold);
    assertEquals("temperature", body.get("field").asText(), tooCold.body());
    String error = body.get("error").asText();
    assertTrue(error.contains("got 0.005") && error.contains("use 0 for greedy decoding, or at least 0.01"), error);
  }

  @Test
  void aCharacterSplitAcrossByteTokensIsSentWholeInTheTokenThatCompletesIt() throws Exception {
    // Prompt "b" (token 1): greedy tokens 2 (0xC3), 3 (0xA9), 4 ('e').
    HttpResponse<String> r = post("/v1/models/steps/generate", "{\"prompt\": \"b\", \"max_tokens\": 3}");
    assertEquals(200, r.statusCode(), r.body());
    assertEquals(List.of(
        "token: {\"index\":0,\"token\":2,\"text\":\"\"}",
        "token: {\"index\":1,\"token\":3,\"text\":\"\u00e9\"}",
        "token: {\"index\":2,\"token\":4,\"text\":\"e\"}",
        "done: {\"reason\":\"max_tokens\",\"tokens\":3}"), events(r.body()));
  }

  @Test
  void aGenerateBodyOverItsOwnLimitIsRefusedWith413NamingTheKey() throws Exception {
    // 1.5 MiB of token ids: under the infer limit (8 MiB), over generate's (1 MiB); refused before it is parsed.
    String body = "{\"tokens\": [" + "0,".repeat(768 * 1024) + "0]}";
    HttpResponse<String> r = post("/v1/models/steps/generate", body);
    assertEquals(413, r.statusCode(), r.body().length() > 300 ? r.body().substring(0, 300) : r.body());
    JsonNode json = json(r);
    assertEquals("body", json.get("field").asText());
    String error = json.get("error").asText();
    assertTrue(error.contains("1048576 bytes") && error.contains("xla-actors.http.max-generate-body-bytes"), error);
  }

  private static HttpRequest generate(String model, String body) {
    return HttpRequest.newBuilder(URI.create(http.url() + "/v1/models/" + model + "/generate")).timeout(Duration.ofSeconds(120))
        .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build();
  }

  /** Holds the one slot of "one" with a request whose prefill waits at the decoder's gate; returns its answer. */
  private static CompletableFuture<HttpResponse<String>> holdTheSlot() throws Exception {
    one.entered = new CountDownLatch(1);
    one.gate = new CountDownLatch(1);
    CompletableFuture<HttpResponse<String>> held = HTTP.sendAsync(generate("one", "{\"tokens\": [1], \"max_tokens\": 1, \"timeout_ms\": 60000}"),
        HttpResponse.BodyHandlers.ofString());
    assertTrue(one.entered.await(60, TimeUnit.SECONDS), "the held request never reached the decoder");
    return held;
  }

  private static void release(CompletableFuture<HttpResponse<String>> held) throws Exception {
    one.gate.countDown();
    HttpResponse<String> r = held.get(60, TimeUnit.SECONDS);
    assertEquals(200, r.statusCode(), r.body());
    assertTrue(r.body().contains("event: done"), r.body());
  }

  @Test
  void aSilentStreamGetsKeepAliveCommentsUntilItsNextToken() throws Exception {
    steps.decodeGate = new CountDownLatch(1); // the first token (the prefill's) comes; the next waits at the gate
    List<String> lines = java.util.Collections.synchronizedList(new ArrayList<>());
    CompletableFuture<HttpResponse<Void>> stream = HTTP.sendAsync(generate("steps", "{\"tokens\": [4], \"max_tokens\": 2}"),
        HttpResponse.BodyHandlers.ofLines()).thenApply(r -> {
          r.body().forEach(lines::add);
          return null;
        });
    try {
      long until = System.nanoTime() + Duration.ofSeconds(30).toNanos();
      while (lines.stream().filter(l -> l.equals(": keep-alive")).count() < 2 && System.nanoTime() < until) {
        Thread.sleep(50);
      }
    } finally {
      steps.decodeGate.countDown();
      steps.decodeGate = null;
    }
    stream.get(60, TimeUnit.SECONDS);
    List<String> seen = List.copyOf(lines);
    int firstToken = seen.indexOf("event: token");
    int keepAlive = seen.indexOf(": keep-alive");
    assertTrue(firstToken >= 0 && keepAlive > firstToken && seen.lastIndexOf("event: token") > keepAlive, seen.toString());
    assertTrue(seen.contains("event: done"), seen.toString());
  }

  @Test
  void aDeadlineAboveMaxRequestTimeoutIsRefusedNamingTheKey() throws Exception {
    HttpResponse<String> r = post("/v1/models/steps/generate", "{\"tokens\": [1], \"timeout_ms\": 600001}"); // the default is 10 min
    assertEquals(400, r.statusCode(), r.body());
    JsonNode body = json(r);
    assertEquals("timeout_ms", body.get("field").asText());
    assertTrue(body.get("error").asText().contains("xla-actors.http.max-request-timeout"), r.body());
  }

  @Test
  void aGenerationWaitingForASlotPastPekkosRequestTimeoutGetsItsOwnDeadlineAsJson() throws Exception {
    CompletableFuture<HttpResponse<String>> held = holdTheSlot();
    try {
      // Waits for the slot 3 s: past Pekko's 1 s request-timeout, which must not answer for it.
      HttpResponse<String> r = HTTP.send(generate("one", "{\"tokens\": [2], \"timeout_ms\": 3000}"), HttpResponse.BodyHandlers.ofString());
      assertEquals(504, r.statusCode(), r.body());
      JsonNode body = json(r);
      assertEquals("DEADLINE_EXCEEDED", body.get("code").asText(), r.body());
      assertTrue(body.get("error").asText().contains("while waiting for a slot"), r.body());
    } finally {
      one.gate.countDown(); // whatever happened, the next test finds the slot free
    }
    release(held);
  }

  @Test
  void whenTheHttpTimeoutFiresFirstItAnswersJsonAndTheRequestLeavesTheServer() throws Exception {
    TestProbe<GenerationServer.Status> status = kit.createTestProbe();
    oneServer.tell(new GenerationServer.GetStatus(status.getRef()));
    long before = status.receiveMessage(Duration.ofSeconds(30)).tokens();
    CompletableFuture<HttpResponse<String>> held = holdTheSlot();
    try {
      tryTheHttpTimeout();
    } finally {
      one.gate.countDown();
    }
    release(held);
    oneServer.tell(new GenerationServer.GetStatus(status.getRef()));
    GenerationServer.Status s = status.receiveMessage(Duration.ofSeconds(30));
    assertEquals(before + 1, s.tokens(), "only the held request's token was computed: " + s);
  }

  private void tryTheHttpTimeout() throws Exception {
    // No timeout_ms: the routes wait their configured default (2 s) plus the margin (1 s); the server's is 5m.
    HttpResponse<String> r = HTTP.send(generate("one", "{\"tokens\": [2]}"), HttpResponse.BodyHandlers.ofString());
    assertEquals(504, r.statusCode(), r.body());
    JsonNode body = json(r);
    assertEquals("DEADLINE_EXCEEDED", body.get("code").asText(), r.body());
    assertTrue(body.get("error").asText().contains("xla-actors.http.request-timeout-margin"), r.body());
    // It gave up its place: nothing waits for the slot any more, so it is never computed for nobody.
    TestProbe<GenerationServer.Status> status = kit.createTestProbe();
    status.awaitAssert(Duration.ofSeconds(30), () -> {
      oneServer.tell(new GenerationServer.GetStatus(status.getRef()));
      assertEquals(0, status.receiveMessage(Duration.ofSeconds(30)).waiting());
      return null;
    });
  }
}
