package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.serve.BatchedModel;
import dev.xlaactors.actors.serve.ModelServer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Model;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The HTTP endpoint over a real model on the real plugin, through java.net.http over 127.0.0.1 (inference
 * through the Open Inference Protocol's {@code /v2}): the
 * "affine" model y = (x . W) * k (x f32[4], k s32 per request, W f32[4,3] bound once), compiled at batch
 * sizes 1, 2 and 4 and served by a {@link ModelServer}.
 */
class ServingRoutesTest {
  static final float[] W = {1, 2, 3, -1, 0, 1, 0.5f, 0.25f, -2, 4, -3, 0};
  private static ActorTestKit kit;
  private static XlaClient client;
  private static CallbackRuntime callbacks;
  private static BatchedModel model;
  private static ActorRef<ModelServer.Command> server;
  private static PrometheusMeterRegistry registry;
  private static HttpServer http;
  private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  /**
   * The "affine" model of these tests at batch sizes 1, 2 and 4: y[i] = (x[i] . W) * k[i], with W (f32[4,3])
   * bound on {@code client}'s first device.
   */
  static BatchedModel affineModel(XlaClient client) {
    Map<Integer, Model> bySize = new TreeMap<>();
    for (int b : new int[] {1, 2, 4}) {
      try (Executable exe = client.compile(program(b))) {
        bySize.put(b, Model.load(exe, List.of("w", "x", "k"), Map.of("w", HostTensor.ofFloats(W, 4, 3)), client.devices().get(0)));
      }
    }
    return BatchedModel.of("affine", bySize);
  }

  private static String program(int b) {
    return """
        func.func @main(%w: tensor<4x3xf32>, %x: tensor<BX4xf32>, %k: tensor<BXi32>) -> tensor<BX3xf32> {
          %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<BX4xf32>, tensor<4x3xf32>) -> tensor<BX3xf32>
          %1 = stablehlo.convert %k : (tensor<BXi32>) -> tensor<BXf32>
          %2 = stablehlo.broadcast_in_dim %1, dims = [0] : (tensor<BXf32>) -> tensor<BX3xf32>
          %3 = stablehlo.multiply %0, %2 : tensor<BX3xf32>
          return %3 : tensor<BX3xf32>
        }""".replace("BX", b + "x");
  }

  @BeforeAll
  static void start() {
    kit = ActorTestKit.create("serving-routes-test");
    client = XlaClient.create();
    callbacks = CallbackRuntime.create(kit.system(), client);
    model = affineModel(client);
    registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    server = kit.spawn(ModelServer.create(model, callbacks, registry));
    HttpSettings settings = HttpSettings.create(kit.system()).withPort(0).withMaxBodyBytes(4096);
    ServingRoutes routes = new ServingRoutes(kit.system(), settings, registry, List.of(InferenceEndpoint.of(model, TensorInference.of(server, kit.system()))), List.of());
    http = HttpServer.start(kit.system(), settings, routes.route());
  }

  @AfterAll
  static void stop() {
    http.close();
    kit.shutdownTestKit();
    callbacks.close();
    model.close();
    client.close();
  }

  private static HttpResponse<String> post(String path, String body) throws Exception {
    return HTTP.send(HttpRequest.newBuilder(URI.create(http.url() + path)).timeout(Duration.ofSeconds(60))
        .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
  }

  private static HttpResponse<String> get(String path) throws Exception {
    return HTTP.send(HttpRequest.newBuilder(URI.create(http.url() + path)).timeout(Duration.ofSeconds(60)).GET().build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private static JsonNode json(HttpResponse<String> r) throws Exception {
    return TensorJson.MAPPER.readTree(r.body());
  }

  private static String request(float[] x, long k) {
    StringBuilder xs = new StringBuilder();
    for (float v : x) {
      xs.append(xs.length() == 0 ? "" : ",").append(v);
    }
    return "{\"inputs\": [{\"name\": \"x\", \"datatype\": \"FP32\", \"shape\": [1, 4], \"data\": [" + xs + "]},"
        + " {\"name\": \"k\", \"datatype\": \"INT32\", \"shape\": [1], \"data\": [" + k + "]}]}";
  }

  private static float[] expected(float[] x, long k) {
    float[] y = new float[3];
    for (int j = 0; j < 3; j++) {
      for (int i = 0; i < 4; i++) {
        y[j] += x[i] * W[i * 3 + j];
      }
      y[j] *= k;
    }
    return y;
  }

  private static void assertAnswer(float[] x, long k, HttpResponse<String> r) throws Exception {
    assertEquals(200, r.statusCode(), r.body());
    assertEquals("application/json", r.headers().firstValue("Content-Type").orElse(""));
    JsonNode out = json(r).get("outputs").get(0);
    assertEquals("output_0", out.get("name").asText());
    assertEquals("FP32", out.get("datatype").asText());
    assertEquals("[1,3]", out.get("shape").toString());
    float[] want = expected(x, k);
    for (int j = 0; j < 3; j++) {
      assertEquals(want[j], (float) out.get("data").get(j).asDouble(), 1e-5f * (1 + Math.abs(want[j])), r.body());
    }
  }

  @Test
  void inferAnswersWithTheModelsValuesAlsoUnderConcurrentRequests() throws Exception {
    float[] x = {0.5f, -1, 2, 0.25f};
    assertAnswer(x, 3, post("/v2/models/affine/infer", request(x, 3)));

    List<CompletableFuture<HttpResponse<String>>> pending = new ArrayList<>();
    List<float[]> xs = new ArrayList<>();
    for (int i = 0; i < 24; i++) {
      float[] xi = {i, -i / 2f, 1, i % 3};
      xs.add(xi);
      pending.add(HTTP.sendAsync(HttpRequest.newBuilder(URI.create(http.url() + "/v2/models/affine/infer"))
          .POST(HttpRequest.BodyPublishers.ofString(request(xi, i - 5))).build(), HttpResponse.BodyHandlers.ofString()));
    }
    for (int i = 0; i < pending.size(); i++) {
      assertAnswer(xs.get(i), i - 5, pending.get(i).get());
    }
  }

  @Test
  void badRequestsAreRefusedNamingTheFieldAndReachNoServer() throws Exception {
    String x = "{\"name\": \"x\", \"datatype\": \"FP32\", \"shape\": [1, 4], \"data\": [1, 2, 3, 4]}";
    String k = "{\"name\": \"k\", \"datatype\": \"INT32\", \"shape\": [1], \"data\": [1]}";
    Object[][] cases = {
        {"{\"inputs\": [", 400, "body", "malformed JSON"},
        {"[1, 2]", 400, "body", "expected a JSON object, got a list"},
        {"{\"inputs\": [" + x + "]}", 400, "inputs", "input 'k' is missing; model 'affine' takes (x FP32[-1, 4], k INT32[-1])"},
        {"{\"inputs\": [" + x + ", " + k + "], \"extra\": 1}", 400, "extra", "unknown field"},
        {"{\"inputs\": [" + x.replace("FP32", "INT32") + ", " + k + "]}", 400, "inputs[0].datatype", "input 'x' is FP32, got INT32"},
        {"{\"inputs\": [" + x.replace("FP32", "FP128") + ", " + k + "]}", 400, "inputs[0].datatype", "got FP128 (not a datatype"},
        {"{\"inputs\": [" + x.replace("[1, 4]", "[2, 2]") + ", " + k + "]}", 400, "inputs[0].shape",
            "input 'x' is [-1, 4] (n rows of f32[4]), got [2, 2]"},
        {"{\"inputs\": [" + x.replace("1, 2, 3, 4", "1, 2, 3") + ", " + k + "]}", 400, "inputs[0].data", "holds 4 values, got 3"},
        {"{\"inputs\": [" + x.replace("1, 2, 3, 4", "1, \"2\", 3, 4") + ", " + k + "]}", 400, "inputs[0].data[1]", "expected a number"},
        {"{\"inputs\": [" + x + ", " + k.replace("[1]}", "[2.5]}") + "]}", 400, "inputs[1].data[0]", "expected a whole number"},
        {"{\"inputs\": [" + x + ", " + k.replace("[1]}", "[3000000000]}") + "]}", 400, "inputs[1].data[0]", "outside the range of INT32"},
        {"{\"inputs\": [" + x.replace("\"x\"", "\"y\"") + ", " + k + "]}", 400, "inputs[0].name", "no input 'y'"},
        {"{\"inputs\": [" + x + ", " + k + "], \"parameters\": {\"timeout\": -1}}", 400, "parameters.timeout", "in microseconds"},
        {"{\"inputs\": [" + x + ", " + k + "], \"inputs\": []}", 400, "body", "Duplicate field 'inputs'"},
    };
    for (Object[] c : cases) {
      HttpResponse<String> r = post("/v2/models/affine/infer", (String) c[0]);
      assertEquals(c[1], r.statusCode(), c[0] + " -> " + r.body());
      JsonNode body = json(r);
      assertEquals(1, body.size(), r.body()); // the protocol's {"error"}
      assertTrue(body.get("error").asText().startsWith(c[2] + ": "), r.body());
      assertTrue(body.get("error").asText().contains((String) c[3]), c[0] + " -> " + r.body());
    }

    HttpResponse<String> unknown = post("/v2/models/nope/infer", "{}");
    assertEquals(404, unknown.statusCode());
    assertTrue(json(unknown).get("error").asText().contains("no model 'nope'; models: affine"), unknown.body());

    HttpResponse<String> big = post("/v2/models/affine/infer", "{\"inputs\": [" + " ".repeat(5000) + "]}");
    assertEquals(413, big.statusCode(), big.body());
    assertTrue(json(big).get("error").asText().contains("xla-actors.http.max-body-bytes"), big.body());

    assertEquals(405, get("/v2/models/affine/infer").statusCode());
    // None of them reached the server: it answered only valid requests (ok) and nothing else.
    HttpResponse<String> metrics = get("/metrics");
    for (String outcome : List.of("invalid", "failed")) {
      assertTrue(metrics.body().contains("xla_serve_requests_total{model=\"affine\",outcome=\"" + outcome + "\"} 0.0"), metrics.body());
    }
  }

  @Test
  void healthReadyModelsAndPrometheusMetrics() throws Exception {
    HttpResponse<String> health = get("/health");
    assertEquals(200, health.statusCode());
    assertEquals("ok", json(health).get("status").asText());

    HttpResponse<String> ready = get("/ready");
    assertEquals(200, ready.statusCode(), ready.body());
    assertEquals("[\"affine\"]", json(ready).get("models").toString());

    JsonNode models = json(get("/v1/endpoints")).get("models");
    assertEquals("affine", models.get(0).get("name").asText());
    assertEquals("/v2/models/affine/infer", models.get(0).get("url").asText());
    assertEquals("[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[-1,4]},{\"name\":\"k\",\"datatype\":\"INT32\",\"shape\":[-1]}]",
        models.get(0).get("inputs").toString());

    float[] x = {1, 1, 1, 1};
    assertAnswer(x, 1, post("/v2/models/affine/infer", request(x, 1)));
    HttpResponse<String> metrics = get("/metrics");
    assertEquals(200, metrics.statusCode());
    assertTrue(metrics.headers().firstValue("Content-Type").orElse("").startsWith("text/plain; version=0.0.4"), metrics.headers().toString());
    String text = metrics.body();
    for (String line : List.of("# TYPE xla_serve_requests_total counter", "xla_serve_queue_depth{model=\"affine\"}",
        "xla_serve_batch_size_count{model=\"affine\"}", "xla_serve_latency_seconds_bucket{model=\"affine\",le=\"+Inf\"}")) {
      assertTrue(text.contains(line), line + " missing from\n" + text);
    }
    double ok = text.lines().filter(l -> l.startsWith("xla_serve_requests_total{model=\"affine\",outcome=\"ok\"}"))
        .mapToDouble(l -> Double.parseDouble(l.substring(l.lastIndexOf(' ') + 1))).findFirst().orElse(-1);
    assertTrue(ok >= 1, text);
  }

  @Test
  void readyIsUnavailableNamingAServerThatStopped() throws Exception {
    ActorRef<ModelServer.Command> second = kit.spawn(ModelServer.create(model, callbacks,
        new io.micrometer.core.instrument.simple.SimpleMeterRegistry()));
    HttpSettings settings = HttpSettings.create(kit.system()).withPort(0);
    ServingRoutes routes = new ServingRoutes(kit.system(), settings, registry,
        List.of(new InferenceEndpoint("other", TensorInference.of(second, kit.system()), model.inputNames(), model.requestInputTypes())), List.of());
    try (HttpServer other = HttpServer.start(kit.system(), settings, routes.route())) {
      HttpRequest ready = HttpRequest.newBuilder(URI.create(other.url() + "/ready")).GET().build();
      assertEquals(200, HTTP.send(ready, HttpResponse.BodyHandlers.ofString()).statusCode());
      kit.stop(second);
      HttpResponse<String> r = HTTP.send(ready, HttpResponse.BodyHandlers.ofString());
      assertEquals(503, r.statusCode(), r.body());
      assertTrue(json(r).get("error").asText().contains("other: no status within"), r.body());
      // An infer request to it is refused at once (its server is watched), not after its ask times out.
      long started = System.nanoTime();
      HttpResponse<String> infer = HTTP.send(HttpRequest.newBuilder(URI.create(other.url() + "/v2/models/other/infer"))
          .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(request(new float[] {1, 2, 3, 4}, 1)))
          .build(), HttpResponse.BodyHandlers.ofString());
      long tookMs = (System.nanoTime() - started) / 1_000_000;
      assertEquals(503, infer.statusCode(), infer.body());
      assertTrue(json(infer).get("error").asText().contains("has stopped"), infer.body());
      assertTrue(tookMs < 5_000, "a stopped server's answer took " + tookMs + " ms");
    }
  }
}
