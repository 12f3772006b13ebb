package dev.xlaactors.examples.gpt;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.xlaactors.actors.serve.GenerationServer;
import dev.xlaactors.actors.serve.GenerationSettings;
import dev.xlaactors.actors.serve.SlotDecoder;
import dev.xlaactors.http.GenerationEndpoint;
import dev.xlaactors.http.HttpServer;
import dev.xlaactors.http.HttpSettings;
import dev.xlaactors.http.ServingRoutes;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.lm.LanguageModel;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.ModelPackage;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@code POST /v1/models/<name>/generate} with a real HTTP client over 127.0.0.1, the tiny GPT's slot
 * programs on the real plugin behind a {@link GenerationServer}: server-sent tokens equal JAX's greedy run,
 * interleaved streams equal their runs alone, a client that disconnects cancels its generation (mid-stream,
 * or while it waits for a slot: then it is never computed), and
 * overload, deadlines and bad requests get their statuses. Where a request must stay in the server long
 * enough to be disconnected or to fill the slots, the decoder sleeps before each step ({@link Slowed}):
 * the ordering comes from step counts, not from wall-clock budgets.
 */
class GenerateOverHttpTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
  private static XlaClient client;
  private static CallbackRuntime runtime;
  private static GptPackage gpt;
  private static LanguageModel model;
  private static ActorTestKit kit;
  private PrometheusMeterRegistry registry;
  private ActorRef<GenerationServer.Command> server;
  private HttpServer http;

  @BeforeAll
  static void load() throws Exception {
    client = XlaClient.create();
    kit = ActorTestKit.create("generate-over-http-test");
    runtime = CallbackRuntime.create(kit.system(), client);
    gpt = GptPackage.open(Path.of(GenerateOverHttpTest.class.getResource("/gpt-tiny-package/xla-model.json").toURI()).getParent());
    model = LanguageModel.load(ModelPackage.open(gpt.directory()), client.devices().get(0), runtime);
  }

  @AfterAll
  static void close() {
    kit.shutdownTestKit(); // stops the servers, which close their decoders, before the model goes
    model.close();
    runtime.close();
    client.close();
  }

  @AfterEach
  void stop() {
    if (http != null) {
      http.close();
    }
    if (server != null) {
      kit.stop(server, Duration.ofSeconds(30));
    }
  }

  /** A decoder that sleeps before every decode step: requests stay in the server for many steps. */
  private record Slowed(SlotDecoder delegate, long millis) implements SlotDecoder {
    @Override
    public int slots() {
      return delegate.slots();
    }

    @Override
    public int vocabulary() {
      return delegate.vocabulary();
    }

    @Override
    public int maxPromptLength() {
      return delegate.maxPromptLength();
    }

    @Override
    public int contextLength() {
      return delegate.contextLength();
    }

    @Override
    public float[] prefill(int slot, int[] prompt) {
      return delegate.prefill(slot, prompt);
    }

    @Override
    public float[] decode(int[] tokens, int[] positions, boolean[] active) {
      try {
        Thread.sleep(millis);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      return delegate.decode(tokens, positions, active);
    }

    @Override
    public void reset() {
      delegate.reset();
    }

    @Override
    public void close() {
      delegate.close();
    }
  }

  private void start(long stepMillis, GenerationSettings settings) {
    registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    SlotDecoder decoder = model.decoder(4);
    if (stepMillis > 0) {
      decoder = new Slowed(decoder, stepMillis);
    }
    server = kit.spawn(GenerationServer.create("tiny", decoder, settings, registry));
    HttpSettings hs = HttpSettings.create(kit.system()).withPort(0);
    ServingRoutes routes = new ServingRoutes(kit.system(), hs, registry, List.of(),
        List.of(GenerationEndpoint.of("tiny", server, decoder, null)));
    http = HttpServer.start(kit.system(), hs, routes.route());
  }

  private HttpRequest generate(String body) {
    return HttpRequest.newBuilder(URI.create(http.url() + "/v1/models/tiny/generate")).timeout(Duration.ofSeconds(60))
        .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build();
  }

  /** The events of a whole SSE body: {name, data} pairs. */
  private static List<String[]> events(String body) {
    List<String[]> out = new ArrayList<>();
    for (String block : body.split("\n\n")) {
      if (block.isBlank()) {
        continue;
      }
      String[] lines = block.split("\n");
      assertTrue(lines[0].startsWith("event: ") && lines[1].startsWith("data: "), block);
      out.add(new String[] {lines[0].substring(7), lines[1].substring(6)});
    }
    return out;
  }

  private static int[] tokens(List<String[]> events) throws Exception {
    List<Integer> t = new ArrayList<>();
    for (String[] e : events) {
      if (e[0].equals("token")) {
        JsonNode d = JSON.readTree(e[1]);
        assertEquals(t.size(), d.get("index").asInt());
        t.add(d.get("token").asInt());
      }
    }
    return t.stream().mapToInt(Integer::intValue).toArray();
  }

  private static String tokensBody(int[] prompt, int maxTokens) {
    return "{\"tokens\": " + Arrays.toString(prompt) + ", \"max_tokens\": " + maxTokens + "}";
  }

  private double metric(String line) throws Exception {
    String text = HTTP.send(HttpRequest.newBuilder(URI.create(http.url() + "/metrics")).GET().build(), HttpResponse.BodyHandlers.ofString())
        .body();
    return text.lines().filter(l -> l.startsWith(line + " ")).mapToDouble(l -> Double.parseDouble(l.substring(l.lastIndexOf(' ') + 1)))
        .findFirst().orElse(-1);
  }

  @Test
  void tokensStreamAsServerSentEventsEqualToJaxsGreedyRunAndInterleavedRunsEqualTheirRunsAlone() throws Exception {
    start(0, GenerationSettings.create(kit.system()));
    int[] jax = gpt.referenceGreedyTokens();
    HttpResponse<String> r = HTTP.send(generate(tokensBody(gpt.referencePrompt(), jax.length)), HttpResponse.BodyHandlers.ofString());
    assertEquals(200, r.statusCode(), r.body());
    assertEquals("text/event-stream", r.headers().firstValue("Content-Type").orElse(""));
    List<String[]> ev = events(r.body());
    assertArrayEquals(jax, tokens(ev));
    assertEquals("done", ev.get(ev.size() - 1)[0]);
    assertEquals("{\"reason\":\"max_tokens\",\"tokens\":16}", ev.get(ev.size() - 1)[1]);

    int[][] prompts = {{5, 6, 7}, {100, 200, 300, 400, 500, 1, 2}, {42}, {9, 8, 7, 6, 5}, {300, 301}, {17, 17, 17, 17, 17, 17, 17, 17}};
    int[] max = {10, 4, 20, 7, 15, 3};
    int[][] alone = new int[prompts.length][];
    for (int i = 0; i < prompts.length; i++) {
      alone[i] = tokens(events(HTTP.send(generate(tokensBody(prompts[i], max[i])), HttpResponse.BodyHandlers.ofString()).body()));
      assertEquals(max[i], alone[i].length);
    }
    List<CompletableFuture<HttpResponse<String>>> all = new ArrayList<>();
    for (int i = 0; i < prompts.length; i++) {
      all.add(HTTP.sendAsync(generate(tokensBody(prompts[i], max[i])), HttpResponse.BodyHandlers.ofString()));
    }
    for (int i = 0; i < prompts.length; i++) {
      assertArrayEquals(alone[i], tokens(events(all.get(i).get().body())), "request " + i + " together vs alone");
    }
  }

  @Test
  void aClientThatDisconnectsMidStreamCancelsItsGeneration() throws Exception {
    // 31 tokens (the whole context after a one-token prompt) at 200 ms a step take over 6 s: the close
    // comes long before the end (HttpServer's connection watch aborts the events at once; bound otherwise,
    // Pekko HTTP notices the closed connection at its next writes, measured 1.2-1.6 s after the close).
    start(200, GenerationSettings.create(kit.system()));
    // A client that reads the response's head and first event, then closes its connection.
    String body = tokensBody(new int[] {1}, 31);
    try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), URI.create(http.url()).getPort())) {
      socket.getOutputStream().write(("POST /v1/models/tiny/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
          + "Content-Length: " + body.length() + "\r\n\r\n" + body).getBytes(StandardCharsets.US_ASCII));
      BufferedReader in = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
      assertEquals("HTTP/1.1 200 OK", in.readLine());
      String line;
      while (!(line = in.readLine()).startsWith("data: ")) {
        assertTrue(line != null);
      }
      assertTrue(line.startsWith("data: {\"index\":0,"), line);
    }
    TestProbe<GenerationServer.Status> status = kit.createTestProbe();
    status.awaitAssert(Duration.ofSeconds(30), () -> {
      server.tell(new GenerationServer.GetStatus(status.getRef()));
      GenerationServer.Status s = status.receiveMessage(Duration.ofSeconds(30));
      assertEquals(0, s.active(), s.toString());
      assertEquals(0, s.finished(), "cancelled, not finished: " + s);
      assertTrue(s.tokens() < 31, "the generation ran to its end: " + s);
      return null;
    });
    assertEquals(1.0, metric("xla_generate_requests_total{model=\"tiny\",outcome=\"cancelled\"}"));
  }

  @Test
  void aClientThatDisconnectsWhileItsRequestWaitsForASlotCancelsItBeforeItIsComputed() throws Exception {
    // Four requests of 24 tokens at 100 ms a step hold the four slots for over 2 s.
    start(100, GenerationSettings.create(kit.system()));
    List<CompletableFuture<HttpResponse<String>>> busy = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      busy.add(HTTP.sendAsync(generate(tokensBody(new int[] {i + 1}, 24)), HttpResponse.BodyHandlers.ofString()));
    }
    TestProbe<GenerationServer.Status> status = kit.createTestProbe();
    status.awaitAssert(Duration.ofSeconds(30), () -> {
      server.tell(new GenerationServer.GetStatus(status.getRef()));
      assertEquals(4, status.receiveMessage(Duration.ofSeconds(30)).active());
      return null;
    });
    String body = tokensBody(new int[] {7}, 3);
    try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), URI.create(http.url()).getPort())) {
      socket.getOutputStream().write(("POST /v1/models/tiny/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
          + "Content-Length: " + body.length() + "\r\n\r\n" + body).getBytes(StandardCharsets.US_ASCII));
      status.awaitAssert(Duration.ofSeconds(30), () -> {
        server.tell(new GenerationServer.GetStatus(status.getRef()));
        assertEquals(1, status.receiveMessage(Duration.ofSeconds(30)).waiting());
        return null;
      });
    } // closed while it waits: no response was started, so only the connection's end can tell
    status.awaitAssert(Duration.ofSeconds(30), () -> {
      server.tell(new GenerationServer.GetStatus(status.getRef()));
      GenerationServer.Status s = status.receiveMessage(Duration.ofSeconds(30));
      assertEquals(0, s.waiting(), s.toString());
      assertEquals(0, s.finished(), "the waiting request was dropped, not finished: " + s);
      return null;
    });
    for (CompletableFuture<HttpResponse<String>> r : busy) {
      HttpResponse<String> done = r.get(60, TimeUnit.SECONDS);
      assertEquals(200, done.statusCode(), done.body());
      assertEquals(24, tokens(events(done.body())).length);
    }
    server.tell(new GenerationServer.GetStatus(status.getRef()));
    GenerationServer.Status s = status.receiveMessage(Duration.ofSeconds(30));
    assertEquals(4, s.finished(), "the four busy requests; the dropped one is counted as cancelled: " + s);
    assertEquals(4 * 24, s.tokens(), "the cancelled request never got a slot, so no token of its own: " + s);
    assertEquals(1.0, metric("xla_generate_requests_total{model=\"tiny\",outcome=\"cancelled\"}"));
  }

  @Test
  void overloadIs503WithRetryAfterAndAnExpiredWaiterIs504() throws Exception {
    start(40, GenerationSettings.create(kit.system()).withMaxWaiting(1));
    List<HttpResponse<InputStream>> busy = new ArrayList<>();
    for (int i = 0; i < 4; i++) { // all four slots, each for many steps
      HttpResponse<InputStream> r = HTTP.send(generate(tokensBody(new int[] {i + 1}, 30)), HttpResponse.BodyHandlers.ofInputStream());
      assertEquals(200, r.statusCode()); // the first token arrived: the request holds a slot
      busy.add(r);
    }
    CompletableFuture<HttpResponse<String>> late = HTTP.sendAsync(
        generate("{\"tokens\": [5], \"max_tokens\": 3, \"timeout_ms\": 300}"), HttpResponse.BodyHandlers.ofString());
    TestProbe<GenerationServer.Status> status = kit.createTestProbe();
    status.awaitAssert(Duration.ofSeconds(30), () -> {
      server.tell(new GenerationServer.GetStatus(status.getRef()));
      assertEquals(1, status.receiveMessage(Duration.ofSeconds(30)).waiting());
      return null;
    });
    HttpResponse<String> refused = HTTP.send(generate(tokensBody(new int[] {6}, 3)), HttpResponse.BodyHandlers.ofString());
    assertEquals(503, refused.statusCode(), refused.body());
    assertEquals("1", refused.headers().firstValue("Retry-After").orElse(""));
    assertEquals("RESOURCE_EXHAUSTED", JSON.readTree(refused.body()).get("code").asText());

    HttpResponse<String> expired = late.get();
    assertEquals(504, expired.statusCode(), expired.body());
    assertTrue(JSON.readTree(expired.body()).get("error").asText().contains("while waiting for a slot (nothing was computed)"),
        expired.body());
    for (HttpResponse<InputStream> r : busy) {
      r.body().close();
    }
  }

  @Test
  void badGenerateRequestsAreRefusedNamingTheField() throws Exception {
    start(0, GenerationSettings.create(kit.system()));
    String[][] cases = {
        {"{\"tokens\": [1, 512]}", "400", "tokens[1]", "expected a token id 0..511"},
        {"{\"tokens\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}", "400", "tokens", "prompts of 1..8 tokens, got 9"},
        {"{\"tokens\": []}", "400", "tokens", "expected 1..32 token ids, got 0"},
        {"{\"prompt\": \"hello\"}", "400", "prompt", "model 'tiny' has no tokenizer: give \"tokens\""},
        {"{\"tokens\": [1], \"prompt\": \"x\"}", "400", "prompt", "not both"},
        {"{\"max_tokens\": 3}", "400", "tokens", "got neither"},
        {"{\"tokens\": [1], \"max_tokens\": 0}", "400", "max_tokens", "from 1 to 32"},
        {"{\"tokens\": [1], \"temperature\": -1}", "400", "temperature", "from 0 (greedy) to 100"},
        {"{\"tokens\": [1], \"temperature\": 0.001}", "400", "temperature", "none between 0 and 0.01"},
        {"{\"tokens\": [1], \"stop_tokens\": [600]}", "400", "stop_tokens[0]", "token id 0..511"},
        {"{\"tokens\": [1], \"top_p\": 0.5}", "400", "top_p", "unknown field"},
        {"{\"tokens\": [1]", "400", "body", "malformed JSON"},
    };
    for (String[] c : cases) {
      HttpResponse<String> r = HTTP.send(generate(c[0]), HttpResponse.BodyHandlers.ofString());
      assertEquals(Integer.parseInt(c[1]), r.statusCode(), c[0] + " -> " + r.body());
      JsonNode body = JSON.readTree(r.body());
      assertEquals(c[2], body.get("field").asText(), r.body());
      assertTrue(body.get("error").asText().contains(c[3]), c[0] + " -> " + r.body());
    }
    HttpResponse<String> unknown = HTTP.send(HttpRequest.newBuilder(URI.create(http.url() + "/v1/models/big/generate"))
        .POST(HttpRequest.BodyPublishers.ofString("{}")).build(), HttpResponse.BodyHandlers.ofString());
    assertEquals(404, unknown.statusCode());
    assertTrue(unknown.body().contains("no model 'big' to generate; models to generate: tiny"), unknown.body());
    // None reached the server.
    TestProbe<GenerationServer.Status> status = kit.createTestProbe();
    server.tell(new GenerationServer.GetStatus(status.getRef()));
    assertEquals(0, status.receiveMessage(Duration.ofSeconds(30)).finished());
  }
}
