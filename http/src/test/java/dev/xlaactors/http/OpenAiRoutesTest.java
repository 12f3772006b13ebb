package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The OpenAI routes' answers that need no model, over HTTP: the list shape, and every refusal in OpenAI's
 * error shape with its status (unknown model 404, malformed JSON and bad fields 400, a body over its limit
 * 413 naming the key). The answers with models are checked by the clients themselves (cli's OpenAiClientsTest).
 */
class OpenAiRoutesTest {
  private static ActorTestKit kit;
  private static HttpServer http;
  private static final HttpClient HTTP = HttpClient.newHttpClient();

  @BeforeAll
  static void start() {
    kit = ActorTestKit.create("openai-routes-test");
    HttpSettings settings = HttpSettings.create(kit.system()).withPort(0).withMaxGenerateBodyBytes(2048);
    http = HttpServer.start(kit.system(), settings, new OpenAiRoutes(kit.system(), settings, List.of(), List.of()).route());
  }

  @AfterAll
  static void stop() {
    http.close();
    kit.shutdownTestKit();
  }

  private static HttpResponse<String> post(String path, String body) throws Exception {
    return HTTP.send(HttpRequest.newBuilder(URI.create(http.url() + path)).header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
  }

  private static JsonNode error(HttpResponse<String> r, int status) throws Exception {
    assertEquals(status, r.statusCode(), r.body());
    assertTrue(r.headers().firstValue("Content-Type").orElse("").startsWith("application/json"));
    JsonNode e = TensorJson.MAPPER.readTree(r.body()).get("error");
    for (String field : List.of("message", "type", "param", "code")) {
      assertTrue(e.has(field), "error without " + field + ": " + r.body());
    }
    return e;
  }

  @Test
  void modelsAreAnOpenAiList() throws Exception {
    HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create(http.url() + "/v1/models")).build(),
        HttpResponse.BodyHandlers.ofString());
    assertEquals(200, r.statusCode());
    assertEquals("{\"object\":\"list\",\"data\":[]}", r.body());
    HttpResponse<String> one = HTTP.send(HttpRequest.newBuilder(URI.create(http.url() + "/v1/models/gpt")).build(),
        HttpResponse.BodyHandlers.ofString());
    assertEquals("model_not_found", error(one, 404).get("code").asText());
  }

  @Test
  void refusalsHaveOpenAisShapeAndStatus() throws Exception {
    JsonNode unknown = error(post("/v1/chat/completions", "{\"model\":\"gpt\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"), 404);
    assertEquals("model", unknown.get("param").asText());
    assertTrue(unknown.get("message").asText().contains("'gpt' does not exist"), unknown.toString());

    JsonNode malformed = error(post("/v1/completions", "{\"model\":"), 400);
    assertEquals("invalid_request_error", malformed.get("type").asText());

    JsonNode field = error(post("/v1/completions", "{\"model\":\"gpt\",\"prompt\":\"x\",\"logit_bias\":{\"one\":5}}"), 400);
    assertEquals("logit_bias", field.get("param").asText()); // checked before the model is looked up

    JsonNode embeddings = error(post("/v1/embeddings", "{\"model\":\"bert\",\"input\":\"x\",\"dimensions\":\"8\"}"), 400);
    assertEquals("dimensions", embeddings.get("param").asText());

    JsonNode big = error(post("/v1/completions", "{\"model\":\"gpt\",\"prompt\":\"" + "a".repeat(4096) + "\"}"), 413);
    assertTrue(big.get("message").asText().contains("xla-actors.http.max-generate-body-bytes"), big.toString());
  }
}
