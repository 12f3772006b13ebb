package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The Open Inference Protocol routes over real packages on the real plugin ({@link OpenInferenceFixture}),
 * through java.net.http: health, metadata, inference of one and of several rows, output selection, INT32
 * inputs, and every refusal answered {@code {"error"}} with the protocol's status.
 */
class OpenInferenceRoutesTest {
  private static OpenInferenceFixture fixture;
  private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  @BeforeAll
  static void start() {
    fixture = new OpenInferenceFixture("open-inference-routes-test");
  }

  @AfterAll
  static void stop() {
    fixture.close();
  }

  private static HttpResponse<String> post(String path, String body, String... headers) throws Exception {
    HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(fixture.http.url() + path)).timeout(Duration.ofSeconds(60))
        .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body));
    for (int i = 0; i < headers.length; i += 2) {
      b.header(headers[i], headers[i + 1]);
    }
    return HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  private static HttpResponse<String> get(String path) throws Exception {
    return HTTP.send(HttpRequest.newBuilder(URI.create(fixture.http.url() + path)).timeout(Duration.ofSeconds(60)).GET().build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private static JsonNode json(HttpResponse<String> r) throws Exception {
    return TensorJson.MAPPER.readTree(r.body());
  }

  /** Asserts an error answer: {@code status}, a body of exactly {@code {"error"}} containing {@code words}. */
  private static void assertError(int status, HttpResponse<String> r, String... words) throws Exception {
    assertEquals(status, r.statusCode(), r.body());
    JsonNode body = json(r);
    assertEquals(1, body.size(), r.body());
    for (String w : words) {
      assertTrue(body.get("error").asText().contains(w), "'" + w + "' in " + r.body());
    }
  }

  private static String affineRequest(String shape, String data) {
    return "{\"id\": \"r1\", \"inputs\": [{\"name\": \"input_1\", \"shape\": " + shape + ", \"datatype\": \"FP32\", \"data\": " + data + "}]}";
  }

  @Test
  void healthAndMetadata() throws Exception {
    assertEquals(200, get("/v2/health/live").statusCode());
    HttpResponse<String> ready = get("/v2/health/ready");
    assertEquals(200, ready.statusCode(), ready.body());
    JsonNode server = json(get("/v2"));
    assertEquals("xla-actors", server.get("name").asText());
    assertTrue(server.get("version").isTextual());
    assertTrue(server.get("extensions").isArray());

    JsonNode affine = json(get("/v2/models/affine"));
    assertEquals("{\"name\":\"affine\",\"versions\":[\"1\"],\"platform\":\"xla\","
        + "\"inputs\":[{\"name\":\"input_1\",\"datatype\":\"FP32\",\"shape\":[-1,3]}],"
        + "\"outputs\":[{\"name\":\"output_0\",\"datatype\":\"FP32\",\"shape\":[-1,2]}]}", affine.toString());
    JsonNode embedder = json(get("/v2/models/toy-embedder/versions/1"));
    assertEquals("[{\"name\":\"input_1\",\"datatype\":\"INT32\",\"shape\":[-1,4]},{\"name\":\"input_2\",\"datatype\":\"INT32\",\"shape\":[-1,4]}]",
        embedder.get("inputs").toString());
    assertEquals("[{\"name\":\"output_0\",\"datatype\":\"FP32\",\"shape\":[-1,4,4]}]", embedder.get("outputs").toString());
    assertEquals(200, get("/v2/models/affine/ready").statusCode());
    assertEquals(200, get("/v2/models/affine/versions/1/ready").statusCode());

    assertError(404, get("/v2/models/nope"), "no model 'nope'", "affine, toy-embedder");
    assertError(404, get("/v2/models/nope/ready"), "no model 'nope'");
    assertError(404, get("/v2/models/affine/versions/2"), "no version '2'");
  }

  @Test
  void infersOneAndSeveralRows() throws Exception {
    HttpResponse<String> one = post("/v2/models/affine/infer", affineRequest("[1, 3]", "[1, 2, 3]"));
    assertEquals(200, one.statusCode(), one.body());
    JsonNode r = json(one);
    assertEquals("affine", r.get("model_name").asText());
    assertEquals("1", r.get("model_version").asText());
    assertEquals("r1", r.get("id").asText());
    assertEquals(1, r.get("parameters").get("rows").asInt());
    JsonNode out = r.get("outputs").get(0);
    assertEquals("output_0", out.get("name").asText());
    assertEquals("FP32", out.get("datatype").asText());
    assertEquals("[1,2]", out.get("shape").toString());
    assertData(OpenInferenceFixture.affine(new float[] {1, 2, 3}), out.get("data"), 0);

    // Three rows (beyond the largest compiled batch, 2): three requests to the server, one answer; nested data.
    float[][] x = {{1, 0, -1}, {0.5f, 2, 4}, {-3, 1, 0}};
    HttpResponse<String> three = post("/v2/models/affine/infer", affineRequest("[3, 3]", "[[1, 0, -1], [0.5, 2, 4], [-3, 1, 0]]"));
    assertEquals(200, three.statusCode(), three.body());
    JsonNode y = json(three).get("outputs").get(0);
    assertEquals("[3,2]", y.get("shape").toString());
    for (int row = 0; row < 3; row++) {
      assertData(OpenInferenceFixture.affine(x[row]), y.get("data"), row * 2);
    }
    assertEquals(3, json(three).get("parameters").get("rows").asInt());

    // docs/http.md's example, as written there.
    HttpResponse<String> doc = post("/v2/models/affine/infer", "{\"id\": \"req-7\", \"parameters\": {\"timeout\": 500000}, \"inputs\":"
        + " [{\"name\": \"input_1\", \"shape\": [2, 3], \"datatype\": \"FP32\", \"data\": [1, 2, 3, 0.5, -1, 4]}],"
        + " \"outputs\": [{\"name\": \"output_0\"}]}");
    assertEquals(200, doc.statusCode(), doc.body());
    assertEquals("{\"name\":\"output_0\",\"datatype\":\"FP32\",\"shape\":[2,2],\"data\":[4.5,9.0,7.5,9.5]}",
        json(doc).get("outputs").get(0).toString());
    assertEquals("req-7", json(doc).get("id").asText());
  }

  @Test
  void rowsAndAnswersReusePooledMemory() throws Exception {
    // The rows of a request, the batches' inputs and the answers' rows are pooled at every size (these are
    // bytes): once warm, requests reuse the blocks the previous ones gave back, and allocate none of their own.
    post("/v2/models/affine/infer", affineRequest("[3, 3]", "[[1, 0, -1], [0.5, 2, 4], [-3, 1, 0]]"));
    dev.xlaactors.runtime.HostMemoryPool.Stats before = dev.xlaactors.runtime.HostMemoryPool.shared().stats();
    int requests = 8;
    for (int q = 0; q < requests; q++) {
      float[][] x = {{q, 1, -q}, {0.5f * q, 2, 4}, {-3, q, 0}};
      HttpResponse<String> r = post("/v2/models/affine/infer", affineRequest("[3, 3]", java.util.Arrays.deepToString(x)));
      assertEquals(200, r.statusCode(), r.body());
      JsonNode y = json(r).get("outputs").get(0);
      for (int row = 0; row < 3; row++) { // right answers in memory that former requests used
        assertData(OpenInferenceFixture.affine(x[row]), y.get("data"), row * 2);
      }
    }
    dev.xlaactors.runtime.HostMemoryPool.Stats after = dev.xlaactors.runtime.HostMemoryPool.shared().stats();
    long reused = after.reusedBlocks() - before.reusedBlocks();
    long fresh = after.freshBlocks() - before.freshBlocks();
    // Each request: 3 input rows and 3 answer rows at least (plus its batches' inputs), all from idle blocks.
    assertTrue(reused >= 6L * requests, "reused " + reused + " blocks for " + requests + " requests of 3 rows (" + before + " -> " + after + ")");
    assertTrue(fresh < requests, "allocated " + fresh + " fresh blocks for " + requests + " requests: rows are not reused");
  }

  private static void assertData(float[] want, JsonNode data, int offset) {
    for (int j = 0; j < want.length; j++) {
      assertEquals(want[j], (float) data.get(offset + j).asDouble(), 1e-5f * (1 + Math.abs(want[j])), data.toString());
    }
  }

  @Test
  void int32InputsAndOutputSelection() throws Exception {
    String body = "{\"inputs\": [{\"name\": \"input_2\", \"shape\": [2, 4], \"datatype\": \"INT32\", \"data\": [1, 1, 0, 1, 1, 1, 1, 1]},"
        + " {\"name\": \"input_1\", \"shape\": [2, 4], \"datatype\": \"INT32\", \"data\": [3, 1, 4, 1, 5, 2, 6, 7]}],"
        + " \"outputs\": [{\"name\": \"output_0\", \"parameters\": {\"binary_data\": false}}], \"parameters\": {\"timeout\": 30000000}}";
    HttpResponse<String> r = post("/v2/models/toy-embedder/infer", body);
    assertEquals(200, r.statusCode(), r.body());
    assertFalse(json(r).has("id"));
    JsonNode out = json(r).get("outputs").get(0);
    assertEquals("[2,4,4]", out.get("shape").toString());
    assertData(OpenInferenceFixture.embed(new int[] {3, 1, 4, 1}, new int[] {1, 1, 0, 1}), out.get("data"), 0);
    assertData(OpenInferenceFixture.embed(new int[] {5, 2, 6, 7}, new int[] {1, 1, 1, 1}), out.get("data"), 16);

    assertError(400, post("/v2/models/affine/infer", "{\"inputs\": [{\"name\": \"input_1\", \"shape\": [1, 3], \"datatype\": \"FP32\","
        + " \"data\": [1, 2, 3]}], \"outputs\": [{\"name\": \"y\"}]}"), "outputs[0].name", "no output \"y\"", "output_0");
  }

  /** The binary tensor data extension: inputs' raw bytes after the JSON, outputs' likewise when asked. */
  @Test
  void binaryTensorData() throws Exception {
    String json = "{\"inputs\": [{\"name\": \"input_1\", \"shape\": [2, 3], \"datatype\": \"FP32\", \"parameters\": {\"binary_data_size\": 24}}],"
        + " \"outputs\": [{\"name\": \"output_0\", \"parameters\": {\"binary_data\": true}}]}";
    float[][] x = {{1, 2, 3}, {0.5f, -1, 4}};
    java.nio.ByteBuffer body = java.nio.ByteBuffer.allocate(json.length() + 24).order(java.nio.ByteOrder.LITTLE_ENDIAN);
    body.put(json.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    for (float[] row : x) {
      for (float v : row) {
        body.putFloat(v);
      }
    }
    HttpResponse<byte[]> r = HTTP.send(HttpRequest.newBuilder(URI.create(fixture.http.url() + "/v2/models/affine/infer"))
        .header("Inference-Header-Content-Length", Integer.toString(json.length()))
        .POST(HttpRequest.BodyPublishers.ofByteArray(body.array())).build(), HttpResponse.BodyHandlers.ofByteArray());
    assertEquals(200, r.statusCode(), new String(r.body(), java.nio.charset.StandardCharsets.UTF_8));
    int length = Integer.parseInt(r.headers().firstValue("Inference-Header-Content-Length").orElseThrow());
    JsonNode head = TensorJson.MAPPER.readTree(java.util.Arrays.copyOf(r.body(), length));
    JsonNode out = head.get("outputs").get(0);
    assertEquals("[2,2]", out.get("shape").toString());
    assertEquals(16, out.get("parameters").get("binary_data_size").asInt(), head.toString());
    assertFalse(out.has("data"));
    assertEquals(length + 16, r.body().length);
    java.nio.ByteBuffer y = java.nio.ByteBuffer.wrap(r.body(), length, 16).order(java.nio.ByteOrder.LITTLE_ENDIAN);
    for (float[] row : x) {
      float[] want = OpenInferenceFixture.affine(row);
      assertEquals(want[0], y.getFloat(), 1e-5f);
      assertEquals(want[1], y.getFloat(), 1e-5f);
    }

    // Sizes that do not add up are refused, naming what was expected.
    assertError(400, post("/v2/models/affine/infer", json.replace("24", "8") + "\0\0\0\0\0\0\0\0", "Inference-Header-Content-Length",
        Integer.toString(json.length() - 1)), "inputs[0].parameters.binary_data_size", "takes 24 bytes, got 8");
    assertError(400, post("/v2/models/affine/infer", json + "\0\0\0\0", "Inference-Header-Content-Length", Integer.toString(json.length())),
        "need 24 bytes after the JSON, the body has 4");
  }

  @Test
  void refusals() throws Exception {
    String infer = "/v2/models/affine/infer";
    assertError(404, post("/v2/models/nope/infer", "{}"), "no model 'nope'");
    assertError(400, post(infer, "{\"inputs\": [{\"name\": \"input_1\", \"shape\": [1, 3], \"datatype\": \"INT32\", \"data\": [1, 2, 3]}]}"),
        "inputs[0].datatype", "input 'input_1' is FP32, got INT32");
    assertError(400, post(infer, "{\"inputs\": [{\"name\": \"input_1\", \"shape\": [1], \"datatype\": \"BYTES\", \"data\": [\"a\"]}]}"),
        "is FP32, got BYTES");
    assertError(400, post(infer, affineRequest("[1, 4]", "[1, 2, 3, 4]")), "inputs[0].shape", "[-1, 3]", "got [1, 4]");
    assertError(400, post(infer, affineRequest("[3]", "[1, 2, 3]")), "inputs[0].shape");
    assertError(400, post(infer, affineRequest("[2, 3]", "[1, 2, 3]")), "inputs[0].data", "holds 6 values, got 3");
    assertError(400, post(infer, affineRequest("[1, 3]", "[1, \"2\", 3]")), "inputs[0].data[1]", "expected a number (FP32)");
    assertError(400, post(infer, "{\"inputs\": [{\"name\": \"x\", \"shape\": [1, 3], \"datatype\": \"FP32\", \"data\": [1, 2, 3]}]}"),
        "no input 'x'", "input_1 FP32[-1, 3]");
    assertError(400, post(infer, "{\"inputs\": []}"), "input 'input_1' is missing");
    assertError(400, post("/v2/models/toy-embedder/infer", "{\"inputs\": [{\"name\": \"input_1\", \"shape\": [1, 4], \"datatype\": \"INT32\","
        + " \"data\": [1, 2, 3, 4]}, {\"name\": \"input_2\", \"shape\": [2, 4], \"datatype\": \"INT32\", \"data\": [1, 1, 1, 1, 1, 1, 1, 1]}]}"),
        "input 'input_2' has 2 rows, input 'input_1' 1");
    assertError(400, post(infer, "{\"inputs\": [], \"parameters\": {\"sequence_id\": 3}}"), "parameters.sequence_id", "not supported");
    assertError(400, post(infer, "{\"inputs\": [], \"instances\": []}"), "instances: unknown field");
    assertError(400, post(infer, "{\"inputs\": ["), "malformed JSON");
    assertError(400, post(infer, affineRequest("[1, 3]", "[1, 2, 3]"), "Inference-Header-Content-Length", "x"),
        "Inference-Header-Content-Length: expected the length of the request's JSON");
    assertError(413, post(infer, affineRequest("[1, 3]", "[" + "1,".repeat(3000) + "1]")), "larger than 4096 bytes", "max-body-bytes");
    assertEquals(405, get(infer).statusCode());

    // Rows are requests to the server: at most its queue-capacity (8) of them, and the values counted accordingly.
    assertError(400, post(infer, affineRequest("[9, 3]", "[]")), "inputs[0].shape[0]", "expected 1..8 rows", "got 9");
    assertError(413, post(infer, affineRequest("[8, 3]", "[" + "1,".repeat(1000) + "1]")),
        "more JSON values than a request to model 'affine' of at most 8 rows holds");
  }

  /** A row that fails fails the request: here every row's deadline (1 µs) passes while it waits for its batch. */
  @Test
  void aRowPastItsDeadlineFailsTheRequestWith504() throws Exception {
    HttpResponse<String> r = post("/v2/models/affine/infer", "{\"parameters\": {\"timeout\": 1}, \"inputs\": [{\"name\": \"input_1\","
        + " \"shape\": [3, 3], \"datatype\": \"FP32\", \"data\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}]}");
    assertError(504, r, "timed out");
    // The server is fine afterwards.
    assertEquals(200, post("/v2/models/affine/infer", affineRequest("[1, 3]", "[1, 2, 3]")).statusCode());
  }
}
