package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The OpenAPI document against the route tree it describes, over HTTP, the routes bound as {@code serve}
 * binds them: every route of the tree is in the document with its method, every documented operation is
 * answered by a route (not by Pekko's rejection of an unmatched request), and a documented path answers no
 * method the document leaves out. Model names become enums of the paths and {@code model} fields.
 */
class OpenApiDocumentTest {
  /** Every route of the tree, as ServingRoutes, OpenAiRoutes, OpenInferenceRoutes and OpenApiDocument bind them. */
  private static final Set<String> ROUTES = Set.of(
      "GET /openapi.json", "GET /health", "GET /ready", "GET /metrics", "GET /v1/endpoints", "POST /v1/models/{model}/generate",
      "GET /v1/models", "GET /v1/models/{id}", "POST /v1/completions", "POST /v1/chat/completions", "POST /v1/embeddings",
      "GET /v2", "GET /v2/health/live", "GET /v2/health/ready",
      "GET /v2/models/{model}", "GET /v2/models/{model}/ready", "POST /v2/models/{model}/infer",
      "GET /v2/models/{model}/versions/{version}", "GET /v2/models/{model}/versions/{version}/ready",
      "POST /v2/models/{model}/versions/{version}/infer", "POST /tokenize", "POST /detokenize", "GET /tokenizer_info");
  private static final List<String> METHODS = List.of("GET", "POST", "PUT", "DELETE", "PATCH", "QUERY");

  private static ActorTestKit kit;
  private static HttpServer http;
  private static OpenApiDocument document;
  private static final HttpClient HTTP = HttpClient.newHttpClient();

  @BeforeAll
  static void start() {
    kit = ActorTestKit.create("openapi-document-test");
    HttpSettings settings = HttpSettings.create(kit.system()).withPort(0);
    PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    ServingRoutes serving = new ServingRoutes(kit.system(), settings, registry, List.of(), List.of());
    OpenAiRoutes openAi = new OpenAiRoutes(kit.system(), settings, List.of(), List.of());
    document = OpenApiDocument.of(serving, openAi);
    http = HttpServer.start(kit.system(), settings, document.route().orElse(openAi.route()).orElse(serving.route()));
  }

  @AfterAll
  static void stop() {
    http.close();
    kit.shutdownTestKit();
  }

  private static Set<String> operations(JsonNode doc) {
    Set<String> ops = new TreeSet<>();
    for (Iterator<String> paths = doc.get("paths").fieldNames(); paths.hasNext(); ) {
      String path = paths.next();
      for (Iterator<String> methods = doc.get("paths").get(path).fieldNames(); methods.hasNext(); ) {
        ops.add(methods.next().toUpperCase(java.util.Locale.ROOT) + " " + path);
      }
    }
    return ops;
  }

  private static HttpResponse<String> send(String method, String path) throws Exception {
    String concrete = path.replace("{model}", "m").replace("{id}", "m").replace("{version}", "1");
    HttpRequest.BodyPublisher body = method.equals("GET") || method.equals("DELETE") ? HttpRequest.BodyPublishers.noBody()
        : HttpRequest.BodyPublishers.ofString("{}");
    return HTTP.send(HttpRequest.newBuilder(URI.create(http.url() + concrete)).header("Content-Type", "application/json")
        .method(method, body).build(), HttpResponse.BodyHandlers.ofString());
  }

  /** A request no route took: 405, or a 404 saying so (RouteErrors answers both as JSON, as every route of ours). */
  private static boolean rejected(HttpResponse<String> r) {
    // Pekko's rejections are answered as JSON too (RouteErrors): a 405, or a 404 saying no route took the request, where a
    // route's own 404 names what it did not find (a model, say).
    return r.statusCode() == 405 || (r.statusCode() == 404 && r.body().contains("no such route"));
  }

  @Test
  void everyRouteIsDocumentedAndNothingElse() {
    assertEquals(new TreeSet<>(ROUTES), operations(document.json()));
  }

  @Test
  void everyDocumentedOperationIsAnsweredByARoute() throws Exception {
    List<String> unanswered = new ArrayList<>();
    for (String op : operations(document.json())) {
      String[] parts = op.split(" ");
      HttpResponse<String> r = send(parts[0], parts[1]);
      if (rejected(r)) {
        unanswered.add(op + " -> " + r.statusCode() + " " + r.body());
      }
    }
    assertEquals(List.of(), unanswered);
  }

  @Test
  void aDocumentedPathAnswersNoOtherMethod() throws Exception {
    JsonNode paths = document.json().get("paths");
    List<String> undocumented = new ArrayList<>();
    for (Iterator<String> it = paths.fieldNames(); it.hasNext(); ) {
      String path = it.next();
      for (String method : METHODS) {
        if (!paths.get(path).has(method.toLowerCase(java.util.Locale.ROOT)) && !rejected(send(method, path))) {
          undocumented.add(method + " " + path);
        }
      }
    }
    assertEquals(List.of(), undocumented);
  }

  /** Found by schemathesis: QUERY, a method Pekko's parser did not know, was answered 501 (a server error) on every path. */
  @Test
  void queryIsAMethodNotAllowedNotAServerError() throws Exception {
    HttpResponse<String> r = send("QUERY", "/health");
    assertEquals(405, r.statusCode(), r.body());
    assertEquals("GET", r.headers().firstValue("Allow").orElse(""));
  }

  /**
   * Found by schemathesis (--checks all): TRACE with a body was refused by Pekko's parser with 422 in plain text,
   * before any route; it is 405 with Allow, and the parser's other refusals are JSON too.
   */
  @Test
  void aParserRefusalIsJsonAndTraceWithABodyIs405() throws Exception {
    HttpResponse<String> trace = HTTP.send(HttpRequest.newBuilder(URI.create(http.url() + "/v1/completions"))
        .method("TRACE", HttpRequest.BodyPublishers.ofString("{}")).build(), HttpResponse.BodyHandlers.ofString());
    assertEquals(405, trace.statusCode(), trace.body());
    assertEquals("GET, POST", trace.headers().firstValue("Allow").orElse(""));
    assertEquals("UNIMPLEMENTED", TensorJson.MAPPER.readTree(trace.body()).get("code").asText(), trace.body());
    HttpResponse<String> unknown = send("FROB", "/health");
    assertEquals(501, unknown.statusCode(), unknown.body());
    assertTrue(TensorJson.MAPPER.readTree(unknown.body()).get("error").asText().contains("FROB"), unknown.body());
  }

  /** The generate route's limits are its models' largest; each model operation has an example request for its first model. */
  @Test
  void limitsAndExamplesComeFromTheServedModels() {
    var generator = kit.<dev.xlaactors.actors.serve.GenerationServer.Command>createTestProbe().ref();
    var server = kit.<dev.xlaactors.actors.serve.ModelServer.Command>createTestProbe().ref();
    HttpSettings settings = HttpSettings.create(kit.system());
    ServingRoutes serving = new ServingRoutes(kit.system(), settings, new PrometheusMeterRegistry(PrometheusConfig.DEFAULT),
        List.of(new InferenceEndpoint("affine", TensorInference.of(server, kit.system()), List.of("x"), List.of(dev.xlaactors.runtime.TensorType.of(
            dev.xlaactors.runtime.DType.F32, 3)))),
        List.of(new GenerationEndpoint("small", generator, 100, 8, 16, null), new GenerationEndpoint("big", generator, 512, 32, 64, null)));
    JsonNode doc = OpenApiDocument.of(serving, new OpenAiRoutes(kit.system(), settings, List.of(), List.of())).json();
    JsonNode generate = doc.at("/paths/~1v1~1models~1{model}~1generate/post");
    JsonNode fields = generate.at("/requestBody/content/application~1json/schema/properties");
    assertEquals(511, fields.at("/tokens/items/maximum").asInt());
    assertEquals(32, fields.at("/tokens/maxItems").asInt());
    assertEquals(64, fields.at("/max_tokens/maximum").asInt());
    assertEquals(512, fields.at("/top_k/maximum").asInt());
    assertEquals("small", generate.at("/parameters/0/example").asText());
    assertEquals("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,3],\"data\":[0,0,0]}]}",
        doc.at("/paths/~1v2~1models~1{model}~1versions~1{version}~1infer/post/requestBody/content/application~1json/example").toString());
    assertEquals("affine", doc.at("/paths/~1v2~1models~1{model}~1ready/get/parameters/0/example").asText());
  }

  @Test
  void theDocumentIsServedWithModelNamesAsEnums() throws Exception {
    HttpResponse<String> r = send("GET", "/openapi.json");
    assertEquals(200, r.statusCode());
    JsonNode served = TensorJson.MAPPER.readTree(r.body());
    assertEquals("3.0.3", served.get("openapi").asText());
    assertEquals(TensorJson.MAPPER.readTree(TensorJson.MAPPER.writeValueAsString(document.json())), served); // as JSON: numbers re-read alike
    // No models here: names are plain strings; with models they are enums.
    JsonNode none = served.at("/paths/~1v1~1completions/post/requestBody/content/application~1json/schema/properties/model");
    assertFalse(none.has("enum"), none.toString());
    JsonNode doc = OpenApiDocument.of(List.of("tensor"), List.of("gpt2", "llama"), List.of("gpt2", "llama"), List.of("llama"),
        List.of("bert")).json();
    assertEquals("[\"llama\"]", doc.at("/paths/~1v1~1chat~1completions/post/requestBody/content/application~1json/schema/properties/model/enum")
        .toString());
    assertEquals("[\"gpt2\",\"llama\",\"bert\"]", doc.at("/paths/~1v1~1models~1{id}/get/parameters/0/schema/enum").toString());
    assertEquals("[\"tensor\"]", doc.at("/paths/~1v2~1models~1{model}~1infer/post/parameters/0/schema/enum").toString());
    // The tokenizer routes take no model only when one language model is served (schemathesis's positive_data_acceptance).
    String tokenize = "/paths/~1tokenize/post/requestBody/content/application~1json/schema/required";
    String detokenize = "/paths/~1detokenize/post/requestBody/content/application~1json/schema/required";
    assertEquals("[\"model\",\"prompt\"]", doc.at(tokenize).toString());
    assertEquals("[\"model\",\"tokens\"]", doc.at(detokenize).toString());
    assertEquals("{\"name\":\"model\",\"in\":\"query\",\"required\":true}",
        ((com.fasterxml.jackson.databind.node.ObjectNode) doc.at("/paths/~1tokenizer_info/get/parameters/0").deepCopy()).without("schema").toString());
    // OpenAI-style bodies: another field only as null, which the server ignores (schemathesis sent {"": null} to /detokenize).
    for (String body : List.of("~1tokenize", "~1detokenize", "~1v1~1completions", "~1v1~1chat~1completions", "~1v1~1embeddings")) {
      assertEquals("{\"nullable\":true,\"enum\":[null]}",
          doc.at("/paths/" + body + "/post/requestBody/content/application~1json/schema/additionalProperties").toString(), body);
    }
    JsonNode one = OpenApiDocument.of(List.of(), List.of("gpt2"), List.of("gpt2"), List.of(), List.of()).json();
    assertEquals("[\"prompt\"]", one.at(tokenize).toString());
    assertEquals("[\"tokens\"]", one.at(detokenize).toString());
    assertFalse(one.at("/paths/~1tokenizer_info/get/parameters/0/required").asBoolean(), one.at("/paths/~1tokenizer_info").toString());
    // Every operation documents its responses, and every error status has a JSON error body.
    for (Iterator<JsonNode> p = doc.get("paths").elements(); p.hasNext(); ) {
      for (Iterator<JsonNode> o = p.next().elements(); o.hasNext(); ) {
        JsonNode responses = o.next().get("responses");
        assertTrue(responses.has("200"), responses.toString());
        for (Iterator<String> s = responses.fieldNames(); s.hasNext(); ) {
          String status = s.next();
          if (!status.equals("200") && !status.equals("503")) {
            assertTrue(responses.get(status).at("/content/application~1json/schema/$ref").asText().startsWith("#/components/schemas/"),
                status + ": " + responses.get(status));
          }
        }
      }
    }
  }
}
