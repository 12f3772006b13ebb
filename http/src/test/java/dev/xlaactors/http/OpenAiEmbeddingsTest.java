package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.serve.BatchedModel;
import dev.xlaactors.actors.serve.ModelServer;
import dev.xlaactors.actors.serve.ServeSettings;
import dev.xlaactors.lm.EmbeddingModel;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.Role;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@code POST /v1/embeddings} through the model server of the embedding package's {@code embed} programs
 * (runtime's fixture {@code toy-embedder}, batch 1 and 2, length 4, mean pooling, normalised): the vectors
 * are the model's own, and the server's admission and deadline answer for the route: a request that
 * finds the queue full is refused at once (503, Retry-After), one whose deadline passes in the queue is
 * answered 504, one with more inputs than the queue holds is 400 naming the key; each counted.
 */
class OpenAiEmbeddingsTest {
  private static final HttpClient HTTP = HttpClient.newHttpClient();
  private static ActorTestKit kit;
  private static XlaClient client;
  private static CallbackRuntime callbacks;
  private static EmbeddingModel model;
  private static PrometheusMeterRegistry registry;
  /** Served with the default settings (max-delay 2 ms). */
  private static HttpServer served;
  /** Served by a server that queues one request, waits 2 s to fill a batch and gives each 300 ms. */
  private static HttpServer tight;
  private static ActorRef<ModelServer.Command> tightServer;

  @BeforeAll
  static void start() {
    kit = ActorTestKit.create("openai-embeddings-test");
    client = XlaClient.create();
    callbacks = CallbackRuntime.create(kit.system(), client);
    model = EmbeddingModel.load(ModelPackage.open(OpenInferenceFixture.PACKAGES.resolve("embedding")), client.devices().get(0), callbacks);
    registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    BatchedModel batched = BatchedModel.of(model.name(), model.loaded().models(Role.EMBED));
    HttpSettings settings = HttpSettings.create(kit.system()).withPort(0);
    ServeSettings.Model defaults = ServeSettings.create(kit.system()).forModel(model.name());
    ServeSettings.Model small = defaults.withQueueCapacity(1).withMaxDelay(Duration.ofSeconds(2)).withDefaultTimeout(Duration.ofMillis(300));
    served = serve(kit.spawn(ModelServer.create(batched, callbacks, defaults, registry), "serve-default"), defaults, settings);
    tightServer = kit.spawn(ModelServer.create(batched, callbacks, small, registry), "serve-tight");
    tight = serve(tightServer, small, settings);
  }

  private static HttpServer serve(ActorRef<ModelServer.Command> server, ServeSettings.Model serve, HttpSettings settings) {
    EmbeddingEndpoint ep = new EmbeddingEndpoint(model, TensorInference.of(server, kit.system()), serve);
    return HttpServer.start(kit.system(), settings, new OpenAiRoutes(kit.system(), settings, List.of(), List.of(ep), registry).route(),
        registry);
  }

  @AfterAll
  static void stop() {
    served.close();
    tight.close();
    kit.shutdownTestKit();
    callbacks.close();
    model.close();
    client.close();
  }

  private static CompletableFuture<HttpResponse<String>> post(HttpServer http, String body) {
    return HTTP.sendAsync(HttpRequest.newBuilder(URI.create(http.url() + "/v1/embeddings")).header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
  }

  private static JsonNode error(HttpResponse<String> r, int status) throws Exception {
    assertEquals(status, r.statusCode(), r.body());
    JsonNode e = TensorJson.MAPPER.readTree(r.body()).get("error");
    for (String field : List.of("message", "type", "param", "code")) {
      assertTrue(e.has(field), "error without " + field + ": " + r.body());
    }
    return e;
  }

  private static double count(String name, String... tags) {
    var search = registry.find(name).tags(tags);
    return search.counter() == null ? 0 : search.counter().count();
  }

  private static int queued() throws Exception {
    return org.apache.pekko.actor.typed.javadsl.AskPattern.<ModelServer.Command, ModelServer.Status>ask(tightServer,
        ModelServer.GetStatus::new, Duration.ofSeconds(3), kit.system().scheduler()).toCompletableFuture().get().queued();
  }

  @Test
  void embeddingsAreTheModelsOwnComputedByItsServer() throws Exception {
    double before = count("xla.serve.requests", "model", model.name(), "outcome", "ok");
    HttpResponse<String> r = post(served, "{\"model\":\"toy-embedder\",\"input\":[[1,2,3],[4,5],[7],[0,6,2,3]]}").get();
    assertEquals(200, r.statusCode(), r.body());
    JsonNode data = TensorJson.MAPPER.readTree(r.body()).get("data");
    float[][] expected = model.embed(List.of(new int[] {1, 2, 3}, new int[] {4, 5}, new int[] {7}, new int[] {0, 6, 2, 3}));
    assertEquals(4, data.size());
    for (int i = 0; i < 4; i++) {
      assertEquals(i, data.get(i).get("index").asInt());
      JsonNode v = data.get(i).get("embedding");
      assertEquals(expected[i].length, v.size());
      double norm = 0;
      for (int j = 0; j < v.size(); j++) {
        assertEquals(expected[i][j], v.get(j).floatValue(), 1e-5, "input " + i + " dimension " + j);
        norm += v.get(j).doubleValue() * v.get(j).doubleValue();
      }
      assertEquals(1, norm, 1e-4, "the package asks for unit length");
    }
    // Each input was a request to the model's server, not a run beside it.
    assertEquals(before + 4, count("xla.serve.requests", "model", model.name(), "outcome", "ok"));
    assertEquals(1, count("xla_openai_embeddings", "model", model.name(), "outcome", "ok"));
  }

  @Test
  void aFullQueueIsRefusedAtOnceAndAPassedDeadlineIs504() throws Exception {
    // More inputs than the queue holds could never all be admitted: refused naming the key (and the route is warm).
    JsonNode e = error(post(tight, "{\"model\":\"toy-embedder\",\"input\":[[1],[2]]}").get(), 400);
    assertEquals("input", e.get("param").asText());
    assertTrue(e.get("message").asText().contains("xla-actors.actors.serve.models.toy-embedder.queue-capacity"), e.toString());

    long t0 = System.nanoTime();
    // Waits in the queue for a second input to fill the batch of 2, which never comes: its deadline passes.
    CompletableFuture<HttpResponse<String>> waiting = post(tight, "{\"model\":\"toy-embedder\",\"input\":[[1,2]]}");
    while (queued() < 1) {
      assertTrue(System.nanoTime() - t0 < 5_000_000_000L, "the first request never reached the server's queue");
      Thread.sleep(5);
    }
    long t1 = System.nanoTime();
    HttpResponse<String> refused = post(tight, "{\"model\":\"toy-embedder\",\"input\":[[3]]}").get();
    long refusedMs = (System.nanoTime() - t1) / 1_000_000;
    e = error(refused, 503);
    assertEquals("server_error", e.get("type").asText());
    assertTrue(e.get("message").asText().contains("toy-embedder"), e.toString());
    assertEquals("1", refused.headers().firstValue("Retry-After").orElse(null));
    assertTrue(refusedMs < 1500, "refused after " + refusedMs + " ms, not at once"); // a queued one would wait 2 s for its batch

    HttpResponse<String> late = waiting.get();
    long lateMs = (System.nanoTime() - t0) / 1_000_000;
    e = error(late, 504);
    assertEquals("timeout_error", e.get("type").asText());
    assertEquals("deadline_exceeded", e.get("code").asText(), e.toString());
    assertTrue(lateMs >= 300, "answered after " + lateMs + " ms, before its 300 ms deadline");

    assertEquals(1, count("xla_openai_embeddings", "model", model.name(), "outcome", "unavailable"));
    assertEquals(1, count("xla_openai_embeddings", "model", model.name(), "outcome", "timeout"));
    assertEquals(1, count("xla_http_refusals", "api", "openai", "status", "503"));
    assertEquals(1, count("xla_http_refusals", "api", "openai", "status", "504"));
  }

  /**
   * A client that leaves cancels its embeddings in the model server: the input waiting there for a batch (max-delay
   * 60 s) leaves the queue, is never computed, and is counted cancelled, not run nor timed out.
   */
  @Test
  void aClientThatLeavesCancelsItsQueuedEmbeddings() throws Exception {
    PrometheusMeterRegistry own = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    ServeSettings.Model waiting = ServeSettings.create(kit.system()).forModel(model.name()).withMaxDelay(Duration.ofSeconds(60))
        .withDefaultTimeout(Duration.ofSeconds(60));
    ActorRef<ModelServer.Command> server = kit.spawn(ModelServer.create(BatchedModel.of(model.name(), model.loaded().models(Role.EMBED)),
        callbacks, waiting, own), "serve-waiting");
    HttpSettings settings = HttpSettings.create(kit.system()).withPort(0);
    EmbeddingEndpoint ep = new EmbeddingEndpoint(model, TensorInference.of(server, kit.system()), waiting);
    HttpServer http = HttpServer.start(kit.system(), settings, new OpenAiRoutes(kit.system(), settings, List.of(), List.of(ep), own).route(), own);
    try {
      byte[] body = "{\"model\":\"toy-embedder\",\"input\":[[1,2]]}".getBytes(java.nio.charset.StandardCharsets.UTF_8);
      try (java.net.Socket gone = new java.net.Socket("127.0.0.1", http.port())) {
        gone.getOutputStream().write(("POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + "Content-Length: " + body.length + "\r\n\r\n").getBytes(java.nio.charset.StandardCharsets.US_ASCII));
        gone.getOutputStream().write(body);
        gone.getOutputStream().flush();
        awaitQueued(server, 1);
      } // closed: the client left
      awaitQueued(server, 0);
      kit.createTestProbe().awaitAssert(Duration.ofSeconds(10), () -> {
        assertEquals(1.0, own.get("xla.serve.requests").tag("outcome", "cancelled").counter().count());
        assertEquals(1.0, own.get("xla_openai_embeddings").tag("outcome", "cancelled").counter().count());
        return null;
      });
      var batches = own.find("xla.serve.batch.size").summary();
      assertTrue(batches == null || batches.count() == 0, "a batch ran: " + (batches == null ? 0 : batches.count()));
    } finally {
      http.close();
      kit.stop(server);
    }
  }

  private static void awaitQueued(ActorRef<ModelServer.Command> server, int queued) {
    org.apache.pekko.actor.testkit.typed.javadsl.TestProbe<ModelServer.Status> probe = kit.createTestProbe();
    probe.awaitAssert(Duration.ofSeconds(10), () -> {
      server.tell(new ModelServer.GetStatus(probe.ref()));
      assertEquals(queued, probe.receiveMessage().queued());
      return null;
    });
  }
}
