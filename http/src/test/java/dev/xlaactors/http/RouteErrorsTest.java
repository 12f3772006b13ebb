package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.typesafe.config.ConfigFactory;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.http.javadsl.server.Directives;
import org.apache.pekko.http.javadsl.server.Route;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * What {@link HttpServer} answers itself, over HTTP: Pekko's rejections and request timeout in each
 * protocol's JSON error shape (405 with {@code Allow} for a method a path does not declare, TRACE and
 * QUERY included; JSON 404s), and a connection kept open past Pekko's idle timeout while its request waits
 * within {@code max-request-timeout}.
 */
class RouteErrorsTest {
  private static ActorTestKit kit;
  private static HttpServer http;
  private static final io.micrometer.core.instrument.simple.SimpleMeterRegistry REGISTRY =
      new io.micrometer.core.instrument.simple.SimpleMeterRegistry();

  @BeforeAll
  static void start() {
    // Pekko's idle timeout (1 s) far below the longest deadline a request may ask for (2 s, plus the 1 s margin).
    kit = ActorTestKit.create("route-errors-test", ConfigFactory.parseString("pekko.http.server.idle-timeout = 1s\n"
        + "pekko.http.server.request-timeout = 1s\nxla-actors.http.max-request-timeout = 2s\n"
        + "xla-actors.http.request-timeout-margin = 1s\nxla-actors.actors.generation.default-timeout = 2s")
        .withFallback(ConfigFactory.load()));
    HttpSettings settings = HttpSettings.create(kit.system()).withPort(0);
    Route slow = Directives.path("slow", () -> Directives.withRequestTimeout(scala.concurrent.duration.Duration.create(10, "s"),
        () -> Directives.completeWithFuture(CompletableFuture.supplyAsync(() -> org.apache.pekko.http.javadsl.model.HttpResponse.create()
            .withEntity("done"), CompletableFuture.delayedExecutor(2500, TimeUnit.MILLISECONDS)))));
    Route never = Directives.path("never", () -> Directives.completeWithFuture(new CompletableFuture<>()));
    // As the model routes do when a server misses its deadline: their own 504, set on the request's timeout.
    Route missed = Directives.path("missed", () -> Directives.optionalHeaderValueByType(
        org.apache.pekko.http.javadsl.model.headers.TimeoutAccess.class, access -> {
          access.orElseThrow().timeoutAccess().update(Duration.ofMillis(200), r -> RouteErrors.error(r, 504, "the model did not answer"));
          return Directives.completeWithFuture(new CompletableFuture<>());
        }));
    http = HttpServer.start(kit.system(), settings, Directives.concat(slow, never, missed,
        new OpenAiRoutes(kit.system(), settings, List.of(), List.of()).route(),
        new OpenInferenceRoutes(kit.system(), settings, List.of()).route()), REGISTRY);
  }

  @AfterAll
  static void stop() {
    http.close();
    kit.shutdownTestKit();
  }

  /**
   * A client of its own for each request, so each request gets a connection of its own: the server's idle
   * timeout here is 1 s, and a shared client once sent a TRACE down a pooled connection the server was just
   * closing (EOF, no answer; the JDK's client retries only GETs on such a connection).
   */
  private static HttpClient client() {
    return HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  }

  private static HttpResponse<String> send(String method, String path) throws Exception {
    return client().send(HttpRequest.newBuilder(URI.create(http.url() + path)).timeout(Duration.ofSeconds(30))
        .method(method, HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString());
  }

  private static JsonNode json(HttpResponse<String> r, int status) throws Exception {
    assertEquals(status, r.statusCode(), r.body());
    assertEquals("application/json", r.headers().firstValue("Content-Type").orElse(""), r.body());
    return TensorJson.MAPPER.readTree(r.body());
  }

  @Test
  void anAnswerSlowerThanPekkosIdleTimeoutStillArrives() throws Exception {
    HttpResponse<String> r = send("GET", "/slow"); // 2.5 s of silence on a connection whose configured idle timeout is 1 s
    assertEquals(200, r.statusCode(), r.body());
    assertEquals("done", r.body());
    assertEquals(Duration.ofSeconds(4).toMillis(), HttpServer.serverConfig(kit.system().settings().config(),
        HttpSettings.create(kit.system())).getDuration("pekko.http.server.idle-timeout").toMillis());
  }

  @Test
  void undeclaredMethodsAre405InTheirProtocolsShape() throws Exception {
    for (String method : List.of("TRACE", "DELETE", "PUT")) {
      HttpResponse<String> r = send(method, "/v1/completions");
      JsonNode e = json(r, 405).get("error");
      assertEquals("method_not_allowed", e.get("code").asText(), r.body());
      assertTrue(e.get("message").asText().startsWith(method + " /v1/completions: method not allowed"), r.body());
      assertEquals("POST", r.headers().firstValue("Allow").orElse(""));
    }
    HttpResponse<String> models = send("POST", "/v1/models");
    assertEquals("GET", models.headers().firstValue("Allow").orElse(""));
    assertTrue(json(models, 405).get("error").isObject(), models.body());
    HttpResponse<String> v2 = send("DELETE", "/v2/health/live");
    assertTrue(json(v2, 405).get("error").isTextual(), v2.body()); // the Open Inference Protocol's {"error": "..."}
    // Every refusal is counted, whatever answered it (here Pekko's rejections).
    assertTrue(REGISTRY.get("xla_http_refusals").tags("api", "openai", "status", "405").counter().count() >= 4);
    assertTrue(REGISTRY.get("xla_http_refusals").tags("api", "open_inference", "status", "405").counter().count() >= 1);
  }

  private static double refusals(String api, int status) {
    var counter = REGISTRY.find("xla_http_refusals").tags("api", api, "status", Integer.toString(status)).counter();
    return counter == null ? 0 : counter.count();
  }

  @Test
  void refusalsAnsweredOutsideTheRoutesAreCountedOnce() throws Exception {
    // A route's own 504 and Pekko's request timeout are written by Pekko's server stage, after the routes;
    // the parser's refusals (a TRACE with a body: 405) before them. Each is counted, once.
    double routes504 = refusals("ours", 504);
    double pekko503 = refusals("ours", 503);
    double parser405 = refusals("ours", 405);
    JsonNode missed = json(send("GET", "/missed"), 504);
    assertEquals("DEADLINE_EXCEEDED", missed.get("code").asText(), missed.toString());
    json(send("GET", "/never"), 503);
    HttpResponse<String> trace = client().send(HttpRequest.newBuilder(URI.create(http.url() + "/v1/models")).timeout(Duration.ofSeconds(30))
        .method("TRACE", HttpRequest.BodyPublishers.ofString("x")).build(), HttpResponse.BodyHandlers.ofString());
    json(trace, 405);
    assertEquals(routes504 + 1, refusals("ours", 504));
    assertEquals(pekko503 + 1, refusals("ours", 503));
    assertEquals(parser405 + 1, refusals("ours", 405));
  }

  @Test
  void unknownPathsAreJson404sAndPekkosTimeoutIsJson() throws Exception {
    JsonNode ours = json(send("GET", "/nope"), 404);
    assertEquals("NOT_FOUND", ours.get("code").asText());
    assertTrue(ours.get("error").asText().contains("GET /nope: no such route"), ours.toString());
    assertTrue(json(send("GET", "/v2/nope"), 404).get("error").isTextual());

    JsonNode timedOut = json(send("GET", "/never"), 503);
    assertEquals("UNAVAILABLE", timedOut.get("code").asText());
    assertTrue(timedOut.get("error").asText().contains("pekko.http.server.request-timeout"), timedOut.toString());
  }
}
