package dev.xlaactors.actors.serve;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The Micrometer meters of one {@link ModelServer}, all tagged {@code model=<name>}:
 * <ul>
 *   <li>{@code xla.serve.queue.depth} (gauge): requests waiting for a batch;
 *   <li>{@code xla.serve.batch.size} (distribution summary, histogram): requests per batch (without padding);
 *   <li>{@code xla.serve.latency} (timer, p50/p90/p99 and histogram): arrival to answer of requests answered
 *       with a prediction;
 *   <li>{@code xla.serve.queue.time} (timer): arrival to the start of the request's batch;
 *   <li>{@code xla.serve.compute.time} (timer): run time of each batch that started a run (not of one
 *       refused by the runtime or whose inputs could not be assembled);
 *   <li>{@code xla.serve.requests} (counter, tag {@code outcome} = ok, overloaded, timeout, cancelled,
 *       failed, invalid, stopped): requests answered, by outcome (refusals are {@code overloaded}).
 * </ul>
 * The server removes its meters from the registry when it stops. Used by the server's actor only.
 */
public final class ServeMetrics {
  /** The outcomes counted by {@code xla.serve.requests}. */
  public static final List<String> OUTCOMES = List.of("ok", "overloaded", "timeout", "cancelled", "failed", "invalid", "stopped");

  private final MeterRegistry registry;
  private final AtomicInteger queueDepth = new AtomicInteger();
  private final DistributionSummary batchSize;
  private final Timer latency;
  private final Timer queueTime;
  private final Timer computeTime;
  private final Map<String, Counter> outcomes = new HashMap<>();
  private final List<Meter> meters = new ArrayList<>();

  ServeMetrics(MeterRegistry registry, String model) {
    this.registry = registry;
    Tags tags = Tags.of("model", model);
    meters.add(Gauge.builder("xla.serve.queue.depth", queueDepth, AtomicInteger::get).tags(tags)
        .description("requests waiting for a batch").register(registry));
    batchSize = DistributionSummary.builder("xla.serve.batch.size").tags(tags).description("requests per batch, padding not counted")
        .serviceLevelObjectives(1, 2, 4, 8, 16, 32, 64, 128, 256).publishPercentiles(0.5, 0.99).register(registry);
    meters.add(batchSize);
    latency = Timer.builder("xla.serve.latency").tags(tags).description("arrival to answer of requests answered with a prediction")
        .publishPercentiles(0.5, 0.9, 0.99).publishPercentileHistogram().register(registry);
    meters.add(latency);
    queueTime = Timer.builder("xla.serve.queue.time").tags(tags).description("arrival to the start of the request's batch")
        .publishPercentiles(0.5, 0.99).register(registry);
    meters.add(queueTime);
    computeTime = Timer.builder("xla.serve.compute.time").tags(tags).description("run time of a batch")
        .publishPercentiles(0.5, 0.99).register(registry);
    meters.add(computeTime);
    for (String outcome : OUTCOMES) {
      Counter c = Counter.builder("xla.serve.requests").tags(tags.and("outcome", outcome))
          .description("requests answered, by outcome").register(registry);
      outcomes.put(outcome, c);
      meters.add(c);
    }
  }

  void queued(int depth) {
    queueDepth.set(depth);
  }

  void batch(int requests) {
    batchSize.record(requests);
  }

  void latency(long nanos) {
    latency.record(nanos, TimeUnit.NANOSECONDS);
  }

  void queueTime(long nanos) {
    queueTime.record(nanos, TimeUnit.NANOSECONDS);
  }

  void computeTime(long nanos) {
    computeTime.record(nanos, TimeUnit.NANOSECONDS);
  }

  void outcome(String outcome) {
    outcomes.get(outcome).increment();
  }

  void close() {
    queueDepth.set(0);
    meters.forEach(registry::remove);
  }
}
