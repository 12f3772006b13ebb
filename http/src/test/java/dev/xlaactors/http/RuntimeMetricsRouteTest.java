package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.RuntimeMeters;
import dev.xlaactors.actors.RuntimeMetrics;
import dev.xlaactors.error.CallbackException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * GET /metrics shows a CallbackRuntime's run and callback figures when {@link RuntimeMeters} is bound to
 * the scraped registry: programs with a host callback run on the real plugin, then the scrape is read.
 */
class RuntimeMetricsRouteTest {
  private static final List<TensorType> F32_4 = List.of(TensorType.of(DType.F32, 4));
  private static final List<HostTensor> INPUT = List.of(HostTensor.ofFloats(new float[] {1, 2, 3, 4}));
  private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
  private static ActorTestKit kit;
  private static XlaClient client;
  private static CallbackRuntime callbacks;
  private static RuntimeMeters meters;
  private static HttpServer http;

  /** {@code main(x) -> f(x) * 3}, f the host callback {@code name}. */
  private static String program(String name) {
    return """
        func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
          %y = stablehlo.custom_call @xla_actors.host_callback(%x) {api_version = 4 : i32, backend_config = {callback = "NAME"}, has_side_effect = true} : (tensor<4xf32>) -> tensor<4xf32>
          %three = stablehlo.constant dense<3.0> : tensor<4xf32>
          %z = stablehlo.multiply %y, %three : tensor<4xf32>
          return %z : tensor<4xf32>
        }
        """.replace("NAME", name);
  }

  @BeforeAll
  static void start() {
    kit = ActorTestKit.create("runtime-metrics-route-test");
    client = XlaClient.create();
    callbacks = CallbackRuntime.create(kit.system(), client);
    callbacks.register("identity", F32_4, null, (in, s) -> in).toCompletableFuture().join();
    callbacks.register("throws", F32_4, null, (in, s) -> {
      throw new IllegalStateException("tokenizer exploded");
    }).toCompletableFuture().join();
    PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    meters = new RuntimeMeters(callbacks.metrics());
    meters.bindTo(registry);
    HttpSettings settings = HttpSettings.create(kit.system()).withPort(0);
    http = HttpServer.start(kit.system(), settings, new ServingRoutes(kit.system(), settings, registry, List.of(), List.of()).route());
  }

  @AfterAll
  static void stop() {
    http.close();
    meters.close();
    kit.shutdownTestKit();
    callbacks.close();
    client.close();
  }

  private static String scrape() throws Exception {
    HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create(http.url() + "/metrics")).timeout(Duration.ofSeconds(60)).GET().build(),
        HttpResponse.BodyHandlers.ofString());
    assertEquals(200, r.statusCode(), r.body());
    return r.body();
  }

  private static void assertLine(String text, String line) {
    assertTrue(text.lines().anyMatch(line::equals), "no line '" + line + "' in\n" + text);
  }

  @Test
  void metricsShowRunsAndCallbacksByOutcomeIncludingCallbacksFirstCalledLater() throws Exception {
    try (Model identity = Model.compile(client, program("identity")); Model throwing = Model.compile(client, program("throws"))) {
      for (int i = 0; i < 3; i++) {
        callbacks.run(identity, Argument.of(INPUT));
      }
      String first = scrape();
      assertLine(first, "# TYPE xla_runtime_runs_total counter");
      assertLine(first, "xla_runtime_runs_total{outcome=\"ok\"} 3.0");
      assertLine(first, "xla_runtime_runs_total{outcome=\"failed\"} 0.0");
      assertLine(first, "xla_runtime_callbacks_total{callback=\"identity\",outcome=\"ok\"} 3.0");
      assertLine(first, "xla_runtime_callback_threads_stuck 0.0");
      assertTrue(first.contains("xla_runtime_runs_latency_seconds{quantile=\"0.99\"} "), first);
      assertTrue(first.contains("xla_runtime_callbacks_latency_seconds{callback=\"identity\",quantile=\"0.5\"} "), first);
      assertTrue(first.contains("xla_runtime_runs_supervised_total "), first);
      assertFalse(first.contains("callback=\"throws\""), "not called yet:\n" + first);

      assertThrows(CallbackException.class, () -> callbacks.run(throwing, Argument.of(INPUT)));
      String second = scrape();
      RuntimeMetrics.Snapshot throwsFigures = callbacks.metrics().callbacks().get("throws");
      assertEquals(1, throwsFigures.failures(), throwsFigures.toString());
      assertLine(second, "xla_runtime_callbacks_total{callback=\"throws\",outcome=\"failed\"} 1.0");
      assertLine(second, "xla_runtime_callbacks_total{callback=\"throws\",outcome=\"ok\"} 0.0");
      assertLine(second, "xla_runtime_runs_total{outcome=\"ok\"} 3.0");
      assertLine(second, "xla_runtime_runs_total{outcome=\"failed\"} 1.0");
      assertLine(second, "xla_runtime_runs_total{outcome=\"timeout\"} 0.0");
    }
  }
}
