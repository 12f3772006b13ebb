package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.serve.BatchedModel;
import dev.xlaactors.actors.serve.ModelServer;
import dev.xlaactors.actors.serve.ServeSettings;
import dev.xlaactors.runtime.XlaClient;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A client that closes its connection cancels its {@code infer} request: over 127.0.0.1 with raw sockets
 * and java.net.http, on the real plugin. The model (y = (x . W) * k, batch sizes 1, 2, 4) is served with
 * {@code max-batch-size} 4 and {@code max-delay} 60 s, so a batch starts only once four requests wait: a
 * request whose client left must leave the queue, or it would take a place in the next batch.
 */
class ClientDisconnectTest {
  private static final Duration WAIT = Duration.ofSeconds(30);
  private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

  private static ActorTestKit kit;
  private static XlaClient client;
  private static CallbackRuntime callbacks;
  private static BatchedModel model;
  private ActorRef<ModelServer.Command> server;
  private PrometheusMeterRegistry registry;
  private HttpServer http;

  @BeforeAll
  static void load() {
    kit = ActorTestKit.create("client-disconnect-test");
    client = XlaClient.create();
    callbacks = CallbackRuntime.create(kit.system(), client);
    model = ServingRoutesTest.affineModel(client);
  }

  @AfterAll
  static void unload() {
    kit.shutdownTestKit();
    callbacks.close();
    model.close();
    client.close();
  }

  /** A fresh server (its own meters) behind a fresh endpoint for each test. */
  @BeforeEach
  void start() {
    registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    ServeSettings.Model serve = new ServeSettings.Model(4, Duration.ofSeconds(60), 64, Duration.ofMinutes(2), 1);
    server = kit.spawn(ModelServer.create(model, callbacks, serve, registry));
    HttpSettings settings = HttpSettings.create(kit.system()).withPort(0);
    ServingRoutes routes = new ServingRoutes(kit.system(), settings, registry, List.of(InferenceEndpoint.of(model, TensorInference.of(server, kit.system()))), List.of());
    http = HttpServer.start(kit.system(), settings, routes.route());
  }

  @AfterEach
  void stop() {
    http.close();
    kit.stop(server);
  }

  private static String request(float[] x, long k) {
    StringBuilder xs = new StringBuilder();
    for (float v : x) {
      xs.append(xs.length() == 0 ? "" : ",").append(v);
    }
    return "{\"inputs\": [{\"name\": \"x\", \"datatype\": \"FP32\", \"shape\": [1, 4], \"data\": [" + xs + "]},"
        + " {\"name\": \"k\", \"datatype\": \"INT32\", \"shape\": [1], \"data\": [" + k + "]}]}";
  }

  /** Writes an infer request on {@code socket} (HTTP/1.1, {@code headers} added) without reading the answer. */
  private static void send(Socket socket, String body, String headers) throws Exception {
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    OutputStream out = socket.getOutputStream();
    out.write(("POST /v2/models/affine/infer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + headers
        + "Content-Length: " + bytes.length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
    out.write(bytes);
    out.flush();
  }

  private CompletableFuture<HttpResponse<String>> post(String body) {
    return HTTP.sendAsync(HttpRequest.newBuilder(URI.create(http.url() + "/v2/models/affine/infer")).timeout(WAIT)
        .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
  }

  /** Waits until the server holds {@code queued} requests waiting for a batch. */
  private void awaitQueued(int queued) {
    TestProbe<ModelServer.Status> probe = kit.createTestProbe();
    probe.awaitAssert(WAIT, () -> {
      server.tell(new ModelServer.GetStatus(probe.ref()));
      assertEquals(queued, probe.receiveMessage().queued());
      return null;
    });
  }

  private double requests(String outcome) {
    return registry.get("xla.serve.requests").tag("outcome", outcome).counter().count();
  }

  private static void assertAnswer(float[] x, long k, String body) throws Exception {
    JsonNode root = TensorJson.MAPPER.readTree(body);
    assertEquals(4, root.get("parameters").get("requests_in_batch").asInt(), body);
    assertEquals(4, root.get("parameters").get("batch_size").asInt(), body);
    JsonNode data = root.get("outputs").get(0).get("data");
    for (int j = 0; j < 3; j++) {
      float want = 0;
      for (int i = 0; i < 4; i++) {
        want += x[i] * ServingRoutesTest.W[i * 3 + j];
      }
      want *= k;
      assertEquals(want, (float) data.get(j).asDouble(), 1e-5f * (1 + Math.abs(want)), body);
    }
  }

  /** Four requests, through java.net.http: they fill a batch of their own (max-delay is 60 s), each answered with its values. */
  private void fourRequestsFillABatch(List<float[]> xs, List<CompletableFuture<HttpResponse<String>>> answers, int first) {
    for (int i = first; i < 4; i++) {
      float[] x = {i, -i / 2f, 1, i % 3};
      xs.add(x);
      answers.add(post(request(x, i + 2)));
    }
  }

  @Test
  void aQueuedRequestWhoseClientClosesOrResetsItsConnectionLeavesTheQueueAndIsNeverComputed() throws Exception {
    try (Socket gone = new Socket("127.0.0.1", http.port())) {
      send(gone, request(new float[] {9, 9, 9, 9}, 9), "");
      awaitQueued(1);
    } // closed: a FIN, as curl or a browser that gives up sends
    kit.createTestProbe().awaitAssert(WAIT, () -> {
      assertEquals(1.0, requests("cancelled"), "the request of the closed connection, cancelled");
      return null;
    });
    awaitQueued(0);
    try (Socket reset = new Socket("127.0.0.1", http.port())) {
      send(reset, request(new float[] {8, 8, 8, 8}, 8), "");
      awaitQueued(1);
      reset.setSoLinger(true, 0); // closed with a reset (RST) instead
    }
    kit.createTestProbe().awaitAssert(WAIT, () -> {
      assertEquals(2.0, requests("cancelled"), "the request of the reset connection, cancelled");
      return null;
    });
    awaitQueued(0);

    List<float[]> xs = new ArrayList<>();
    List<CompletableFuture<HttpResponse<String>>> answers = new ArrayList<>();
    fourRequestsFillABatch(xs, answers, 0);
    for (int i = 0; i < 4; i++) {
      HttpResponse<String> r = answers.get(i).get(WAIT.toSeconds(), TimeUnit.SECONDS);
      assertEquals(200, r.statusCode(), r.body());
      assertAnswer(xs.get(i), i + 2, r.body());
    }
    // One batch ran, of the four answered requests: the cancelled ones were never computed.
    assertEquals(1, registry.get("xla.serve.batch.size").summary().count());
    assertEquals(4.0, registry.get("xla.serve.batch.size").summary().totalAmount());
    assertEquals(4.0, requests("ok"));
    assertEquals(2.0, requests("cancelled"));
  }

  /**
   * A client that leaves is logged as a cancel (DEBUG, naming it), never as a WARN/ERROR unexpected failure: the
   * ActorSystem's log (where the routes write) captured while a queued request's client closes its connection.
   */
  @Test
  void aClientThatLeavesIsLoggedAsACancelNotAsAFailure() throws Exception {
    ch.qos.logback.classic.Logger log = (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory.getLogger(
        org.apache.pekko.actor.typed.ActorSystem.class);
    ch.qos.logback.classic.Level level = log.getLevel();
    ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent> seen = new ch.qos.logback.core.read.ListAppender<>();
    seen.start();
    log.addAppender(seen);
    log.setLevel(ch.qos.logback.classic.Level.DEBUG);
    try {
      try (Socket gone = new Socket("127.0.0.1", http.port())) {
        send(gone, request(new float[] {7, 7, 7, 7}, 7), "");
        awaitQueued(1);
      }
      kit.createTestProbe().awaitAssert(WAIT, () -> {
        assertEquals(1.0, requests("cancelled"));
        assertTrue(seen.list.stream().anyMatch(e -> e.getLevel() == ch.qos.logback.classic.Level.DEBUG
            && e.getFormattedMessage().contains("cancel")), "no DEBUG line names the cancel: " + lines(seen.list));
        return null;
      });
      assertTrue(seen.list.stream().noneMatch(e -> e.getLevel().isGreaterOrEqual(ch.qos.logback.classic.Level.WARN)),
          "a client that left was logged as a failure: " + lines(seen.list));
    } finally {
      log.detachAppender(seen);
      log.setLevel(level);
    }
  }

  private static String lines(List<ch.qos.logback.classic.spi.ILoggingEvent> events) {
    return events.stream().map(e -> e.getLevel() + " " + e.getFormattedMessage()).toList().toString();
  }

  @Test
  void aClientThatAsksToCloseAfterTheAnswerButWaitsForItIsAnswered() throws Exception {
    float[] x0 = {0.5f, -1, 2, 0.25f};
    try (Socket waiting = new Socket("127.0.0.1", http.port())) {
      // Connection: close ends the requests of this connection, not the connection: the answer must still come.
      send(waiting, request(x0, 3), "Connection: close\r\n");
      awaitQueued(1);
      List<float[]> xs = new ArrayList<>();
      List<CompletableFuture<HttpResponse<String>>> answers = new ArrayList<>();
      fourRequestsFillABatch(xs, answers, 1);
      waiting.setSoTimeout((int) WAIT.toMillis());
      String raw = new String(waiting.getInputStream().readAllBytes(), StandardCharsets.UTF_8); // until the server closes
      assertTrue(raw.startsWith("HTTP/1.1 200 OK"), raw);
      assertAnswer(x0, 3, raw.substring(raw.indexOf("\r\n\r\n") + 4));
      for (int i = 0; i < 3; i++) {
        HttpResponse<String> r = answers.get(i).get(WAIT.toSeconds(), TimeUnit.SECONDS);
        assertEquals(200, r.statusCode(), r.body());
        assertAnswer(xs.get(i), i + 3, r.body());
      }
    }
    assertEquals(4.0, requests("ok"));
    assertEquals(0.0, requests("cancelled"));
  }
}
