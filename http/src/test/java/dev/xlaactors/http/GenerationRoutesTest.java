package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
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
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
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
    kit = ActorTestKit.create("generation-routes-test");
    registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    GenerationSettings settings = GenerationSettings.create(kit.system());
    StepDecoder goneDecoder = new StepDecoder(1, 10, 4, 16);
    ActorRef<GenerationServer.Command> gone = kit.spawn(GenerationServer.create("gone", goneDecoder, settings, registry));
    kit.stop(gone, Duration.ofSeconds(30));
    StepDecoder stepsDecoder = new StepDecoder(2, 10, 4, 32);
    steps = stepsDecoder;
    ActorRef<GenerationServer.Command> live = kit.spawn(GenerationServer.create("steps", stepsDecoder, settings, registry));
    HttpSettings httpSettings = HttpSettings.create(kit.system()).withPort(0);
    ServingRoutes routes = new ServingRoutes(kit.system(), httpSettings, registry, List.of(),
        List.of(GenerationEndpoint.of("gone", gone, goneDecoder, null), GenerationEndpoint.of("steps", live, stepsDecoder, new ByteCodec())));
    http = HttpServer.start(kit.system(), httpSettings, routes.route());
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
}
