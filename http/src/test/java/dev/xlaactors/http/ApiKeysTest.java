package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.XlaException;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * API keys over HTTP, the routes bound as {@code serve} binds them with two keys (one from {@code api-key},
 * one from {@code api-keys-file}): each key opens every route, as OpenAI's clients send it ({@code
 * Authorization: Bearer}); no key, a wrong key, another scheme or a key's prefix is 401 in the error shape of
 * the path's protocol; the probes need none; unknown paths give nothing away. And the settings: bad keys
 * refused without echoing them, the warning when the address is reachable from other machines.
 */
class ApiKeysTest {
  private static final String KEY = "sk-first-0123456789abcdef";
  private static final String FILE_KEY = "second.key_from/the+file=";
  private static final HttpClient HTTP = HttpClient.newHttpClient();

  @TempDir static Path dir;
  private static ActorTestKit kit;
  private static HttpServer http;

  @BeforeAll
  static void start() throws Exception {
    Path file = dir.resolve("api-keys.txt");
    Files.writeString(file, "# the keys of this test\n\n  " + FILE_KEY + "  \n");
    Config config = ConfigFactory.parseString("xla-actors.http { api-key = \"" + KEY + "\", api-keys-file = \"" + file + "\" }")
        .withFallback(ConfigFactory.load());
    kit = ActorTestKit.create("api-keys-test", config);
    HttpSettings settings = HttpSettings.create(kit.system()).withPort(0);
    PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    ServingRoutes serving = new ServingRoutes(kit.system(), settings, registry, List.of(), List.of());
    OpenAiRoutes openAi = new OpenAiRoutes(kit.system(), settings, List.of(), List.of());
    OpenApiDocument document = OpenApiDocument.of(serving, openAi).withApiKeys(ApiKeys.create(kit.system()));
    http = HttpServer.start(kit.system(), settings, document.route().orElse(openAi.route()).orElse(serving.route()));
  }

  @AfterAll
  static void stop() {
    http.close();
    kit.shutdownTestKit();
  }

  private static HttpResponse<String> get(String path, String authorization) throws Exception {
    HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(http.url() + path));
    if (authorization != null) {
      request.header("Authorization", authorization);
    }
    return HTTP.send(request.build(), HttpResponse.BodyHandlers.ofString());
  }

  private static JsonNode json(HttpResponse<String> response) throws Exception {
    return TensorJson.MAPPER.readTree(response.body());
  }

  @Test
  void eitherKeyOpensEveryRouteAsOpenAiClientsSendIt() throws Exception {
    for (String authorization : List.of("Bearer " + KEY, "Bearer " + FILE_KEY, "bearer " + KEY)) {
      HttpResponse<String> models = get("/v1/models", authorization);
      assertEquals(200, models.statusCode(), models.body());
      assertEquals("list", json(models).get("object").asText());
      assertEquals(200, get("/openapi.json", authorization).statusCode());
      assertEquals(200, get("/metrics", authorization).statusCode());
      assertEquals(200, get("/v2", authorization).statusCode());
      assertEquals(200, get("/v1/endpoints", authorization).statusCode());
    }
  }

  @Test
  void withoutTheKeyEachProtocolAnswers401InItsOwnShape() throws Exception {
    List<String> refused = List.of("none", "Bearer wrong-key", "Basic " + KEY, "Bearer " + KEY.substring(0, KEY.length() - 1),
        "Bearer " + KEY + "x", KEY);
    for (String authorization : refused) {
      String sent = authorization.equals("none") ? null : authorization;
      // OpenAI's routes: {"error": {"message", "type", "param", "code": "invalid_api_key"}}, as openai-python reads it.
      for (String path : List.of("/v1/models", "/v1/models/gpt", "/v1/completions")) {
        HttpResponse<String> r = get(path, sent);
        assertEquals(401, r.statusCode(), path + " " + authorization);
        assertEquals("invalid_api_key", json(r).at("/error/code").asText(), r.body());
        assertEquals("invalid_request_error", json(r).at("/error/type").asText(), r.body());
        assertTrue(json(r).at("/error/message").asText().contains("Authorization: Bearer") == (sent == null), r.body());
        assertEquals("Bearer realm=\"xla-actors\"", r.headers().firstValue("WWW-Authenticate").orElse(""), path);
      }
      // The Open Inference Protocol's: {"error": "..."}.
      for (String path : List.of("/v2", "/v2/models/m/infer", "/v2/models/m")) {
        HttpResponse<String> r = get(path, sent);
        assertEquals(401, r.statusCode(), path + " " + authorization);
        assertTrue(json(r).get("error").isTextual() && json(r).get("error").asText().contains("API key"), r.body());
      }
      // The project's own, and paths that do not exist (401 says nothing about which routes there are).
      for (String path : List.of("/metrics", "/openapi.json", "/v1/endpoints", "/v1/models/gpt/generate", "/nothing/here")) {
        HttpResponse<String> r = get(path, sent);
        assertEquals(401, r.statusCode(), path + " " + authorization);
        assertEquals("UNAUTHENTICATED", json(r).get("code").asText(), r.body());
        assertFalse(r.body().contains(KEY) || r.body().contains(FILE_KEY), r.body());
      }
    }
  }

  @Test
  void theProbesNeedNoKey() throws Exception {
    assertEquals("ok", json(get("/health", null)).get("status").asText());
    assertEquals(200, get("/ready", null).statusCode());
    assertEquals(200, get("/v2/health/live", null).statusCode());
    assertEquals(200, get("/v2/health/ready", null).statusCode());
    assertEquals(ApiKeys.OPEN.size(), 4);
  }

  @Test
  void badKeysAreRefusedNamingTheSettingButNeverTheKey() throws Exception {
    Config base = ConfigFactory.defaultReference();
    XlaException space = assertThrows(XlaException.class,
        () -> ApiKeys.fromConfig(ConfigFactory.parseString("xla-actors.http.api-key = \"secret key\"").withFallback(base)));
    assertTrue(space.getMessage().contains("xla-actors.http.api-key") && space.getMessage().contains("U+0020 at position 7")
        && !space.getMessage().contains("secret"), space.getMessage());
    Path missing = Path.of("/nonexistent/keys.txt");
    XlaException noFile = assertThrows(XlaException.class, () -> ApiKeys.fromConfig(
        ConfigFactory.parseString("xla-actors.http.api-keys-file = \"" + missing + "\"").withFallback(base)));
    assertTrue(noFile.getMessage().contains("xla-actors.http.api-keys-file = " + missing + ": cannot read it"), noFile.getMessage());
    Path empty = dir.resolve("no-keys.txt");
    Files.writeString(empty, "# nothing but comments\n\n");
    XlaException noKey = assertThrows(XlaException.class, () -> ApiKeys.fromConfig(
        ConfigFactory.parseString("xla-actors.http.api-keys-file = \"" + empty + "\"").withFallback(base)));
    assertTrue(noKey.getMessage().contains("holds no key"), noKey.getMessage());
    Files.writeString(empty, "good-key\nbad\u0007key\n");
    XlaException control = assertThrows(XlaException.class, () -> ApiKeys.fromConfig(
        ConfigFactory.parseString("xla-actors.http.api-keys-file = \"" + empty + "\"").withFallback(base)));
    assertTrue(control.getMessage().contains(empty + " line 2") && control.getMessage().contains("U+0007")
        && !control.getMessage().contains("good-key"), control.getMessage());
    // The default: no key, every route open; and the keys never show in a log line.
    assertFalse(ApiKeys.fromConfig(base).required());
    ApiKeys two = ApiKeys.of(List.of(KEY)).and(ApiKeys.of(List.of(FILE_KEY)));
    assertEquals("ApiKeys[2 keys]", two.toString());
    assertTrue(two.accepts("Bearer " + FILE_KEY) && !two.accepts(null) && !two.accepts("Bearer") && !two.accepts(""));
  }

  @Test
  void theDocumentDeclaresTheKeyOnEveryOperationButTheProbes() throws Exception {
    JsonNode doc = json(get("/openapi.json", "Bearer " + KEY));
    assertEquals("bearer", doc.at("/components/securitySchemes/apiKey/scheme").asText());
    int secured = 0;
    for (var paths = doc.get("paths").fields(); paths.hasNext(); ) {
      var path = paths.next();
      for (JsonNode operation : path.getValue()) {
        boolean open = ApiKeys.OPEN.contains(path.getKey());
        assertEquals(!open, operation.has("security"), path.getKey());
        assertEquals(!open, operation.at("/responses/401").isObject(), path.getKey());
        secured += open ? 0 : 1;
      }
    }
    assertEquals(19, secured); // every operation but the four probes, vLLM's tokenizer routes included
    assertEquals("#/components/schemas/OpenAiError", doc.at("/paths/~1v1~1models/get/responses/401/content/application~1json/schema/$ref").asText());
    assertEquals("#/components/schemas/InferenceError", doc.at("/paths/~1v2/get/responses/401/content/application~1json/schema/$ref").asText());
    assertEquals("#/components/schemas/Error", doc.at("/paths/~1metrics/get/responses/401/content/application~1json/schema/$ref").asText());
    // Without keys the document is as before: nothing to declare.
    OpenApiDocument plain = OpenApiDocument.of(List.of(), List.of(), List.of(), List.of(), List.of());
    assertTrue(plain.withApiKeys(ApiKeys.none()) == plain && !plain.json().at("/components/securitySchemes").isObject());
  }

  @Test
  void anAddressOtherMachinesReachIsWarnedAboutNamingTheSetting() {
    ApiKeys keys = ApiKeys.of(List.of(KEY));
    assertTrue(HttpServer.exposure(new InetSocketAddress("127.0.0.1", 8080), ApiKeys.none()).isEmpty());
    assertTrue(HttpServer.exposure(new InetSocketAddress("::1", 8080), ApiKeys.none()).isEmpty());
    String open = HttpServer.exposure(new InetSocketAddress("0.0.0.0", 8080), ApiKeys.none()).orElseThrow();
    assertTrue(open.contains("0.0.0.0:8080") && open.contains("without an API key") && open.contains("xla-actors.http.api-key"), open);
    String clear = HttpServer.exposure(new InetSocketAddress("0.0.0.0", 8080), keys).orElseThrow();
    assertTrue(clear.contains("without TLS") && clear.contains("xla-actors.http.host") && !clear.contains(KEY), clear);
  }
}
