package dev.xlaactors.actors.serve;

import io.micrometer.core.instrument.Counter;
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
 * The Micrometer meters of one {@link GenerationServer}, all tagged {@code model=<name>}:
 * <ul>
 *   <li>{@code xla.generate.slots.active} (gauge): slots holding a request;
 *   <li>{@code xla.generate.waiting} (gauge): requests waiting for a slot;
 *   <li>{@code xla.generate.tokens} (counter): tokens streamed;
 *   <li>{@code xla.generate.prompt.tokens} (counter): prompt tokens of the requests admitted into a slot;
 *   <li>{@code xla.generate.prompt.tokens.cached} (counter): of those, the tokens the slot's row held already
 *       (the prompt cache), which were not prefilled;
 *   <li>{@code xla.generate.first.token} (timer, p50/p90/p99): arrival to a request's first token;
 *   <li>{@code xla.generate.iteration} (timer, p50/p99): one iteration (a decode step and the prefills of
 *       the requests admitted at its boundary);
 *   <li>{@code xla.generate.requests} (counter, tag {@code outcome} = finished, overloaded, timeout,
 *       cancelled, failed, invalid, stopped): requests ended, by outcome.
 * </ul>
 * The server removes its meters when it stops. Used by the server's actor only.
 */
public final class GenerationMetrics {
  /** The outcomes counted by {@code xla.generate.requests}. */
  public static final List<String> OUTCOMES = List.of("finished", "overloaded", "timeout", "cancelled", "failed", "invalid", "stopped");

  private final MeterRegistry registry;
  private final AtomicInteger active = new AtomicInteger();
  private final AtomicInteger waiting = new AtomicInteger();
  private final Counter tokens;
  private final Counter promptTokens;
  private final Counter cachedPromptTokens;
  private final Timer firstToken;
  private final Timer iteration;
  private final Map<String, Counter> outcomes = new HashMap<>();
  private final List<Meter> meters = new ArrayList<>();

  GenerationMetrics(MeterRegistry registry, String model) {
    this.registry = registry;
    Tags tags = Tags.of("model", model);
    meters.add(Gauge.builder("xla.generate.slots.active", active, AtomicInteger::get).tags(tags)
        .description("slots holding a request").register(registry));
    meters.add(Gauge.builder("xla.generate.waiting", waiting, AtomicInteger::get).tags(tags)
        .description("requests waiting for a slot").register(registry));
    tokens = Counter.builder("xla.generate.tokens").tags(tags).description("tokens streamed").register(registry);
    meters.add(tokens);
    promptTokens = Counter.builder("xla.generate.prompt.tokens").tags(tags).description("prompt tokens of admitted requests")
        .register(registry);
    meters.add(promptTokens);
    cachedPromptTokens = Counter.builder("xla.generate.prompt.tokens.cached").tags(tags)
        .description("prompt tokens a slot's cache row held already, not prefilled").register(registry);
    meters.add(cachedPromptTokens);
    firstToken = Timer.builder("xla.generate.first.token").tags(tags).description("arrival to a request's first token")
        .publishPercentiles(0.5, 0.9, 0.99).register(registry);
    meters.add(firstToken);
    iteration = Timer.builder("xla.generate.iteration").tags(tags).description("one decode step and the prefills at its boundary")
        .publishPercentiles(0.5, 0.99).register(registry);
    meters.add(iteration);
    for (String outcome : OUTCOMES) {
      Counter c = Counter.builder("xla.generate.requests").tags(tags.and("outcome", outcome))
          .description("generation requests ended, by outcome").register(registry);
      outcomes.put(outcome, c);
      meters.add(c);
    }
  }

  void occupancy(int activeSlots, int waitingRequests) {
    active.set(activeSlots);
    waiting.set(waitingRequests);
  }

  void token() {
    tokens.increment();
  }

  /** A request got a slot: {@code length} prompt tokens, of which {@code cached} its slot's row held already. */
  void prompt(int length, int cached) {
    promptTokens.increment(length);
    cachedPromptTokens.increment(cached);
  }

  void firstToken(long nanos) {
    firstToken.record(nanos, TimeUnit.NANOSECONDS);
  }

  void iteration(long nanos) {
    iteration.record(nanos, TimeUnit.NANOSECONDS);
  }

  void outcome(String outcome) {
    outcomes.get(outcome).increment();
  }

  void close() {
    occupancy(0, 0);
    meters.forEach(registry::remove);
  }
}
