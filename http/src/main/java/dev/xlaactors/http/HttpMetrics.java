package dev.xlaactors.http;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.time.Duration;

/**
 * The HTTP layer's own meters, beside the servers' ({@code xla_serve_*}, {@code xla_generate_*}): every
 * refusal it answers, whatever refused it ({@code xla_http_refusals_total{api, status}}: a bad or too large
 * body, an unknown route or method, an overloaded or stopped server, a timeout, a request the parser
 * refused; {@code api} is the protocol of the path: {@code open_inference}, {@code openai} or {@code ours},
 * the last for the parser's refusals, which come before the path is known), and the embeddings the
 * OpenAI routes compute ({@code xla_openai_embeddings_total{model, outcome}}, {@code
 * xla_openai_embeddings_seconds{model}}). Thread-safe (Micrometer's meters are).
 */
final class HttpMetrics {
  private final MeterRegistry registry;

  HttpMetrics(MeterRegistry registry) {
    this.registry = registry;
  }

  /** Counts one response of {@code status} (at least 400) to a request of {@code path}. */
  void refused(String path, int status) {
    Counter.builder("xla_http_refusals").description("HTTP requests answered with an error status (4xx, 5xx), by protocol and status")
        .tag("api", RouteErrors.Shape.of(path).name().toLowerCase(java.util.Locale.ROOT)).tag("status", Integer.toString(status))
        .register(registry).increment();
  }

  /** Counts one embeddings request of {@code model} that ended as {@code outcome} after {@code took}. */
  void embeddings(String model, String outcome, Duration took) {
    Counter.builder("xla_openai_embeddings").description("POST /v1/embeddings requests by model and outcome")
        .tag("model", model).tag("outcome", outcome).register(registry).increment();
    Timer.builder("xla_openai_embeddings_seconds").description("Time to compute the embeddings of one request")
        .tag("model", model).register(registry).record(took);
  }
}
