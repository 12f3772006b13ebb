package dev.xlaactors.actors;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BiConsumer;
import java.util.function.ToDoubleFunction;

/**
 * The figures of a {@link RuntimeMetrics} (a {@link CallbackRuntime}'s runs and host callbacks) as
 * Micrometer meters, read from it when the registry is read (a scrape), so the runs and callbacks pay
 * nothing for them:
 * <ul>
 *   <li>{@code xla.runtime.runs} (function counter, tag {@code outcome} = ok, failed, timeout): runs that
 *       ended, by outcome ({@code failed}: any failure but a timeout);
 *   <li>{@code xla.runtime.runs.latency} (gauge, seconds, tag {@code quantile} = 0.5, 0.99): start to end of
 *       the most recent 4096 runs;
 *   <li>{@code xla.runtime.runs.supervised} (function counter): runs that needed a {@link RunSupervisor}
 *       actor ({@link RuntimeMetrics#supervisedRuns()});
 *   <li>{@code xla.runtime.callbacks} (function counter, tags {@code callback} = the name, {@code outcome}
 *       = ok, failed, timeout): host callback calls that ended;
 *   <li>{@code xla.runtime.callbacks.latency} (gauge, seconds, tags {@code callback}, {@code quantile} =
 *       0.5, 0.99): arrival to answer of the most recent 4096 calls of that callback;
 *   <li>{@code xla.runtime.callback.threads.stuck} (gauge): {@link RuntimeMetrics#stuckCallbackThreads()}.
 * </ul>
 * A callback's meters are registered when it is first called (also after binding), so the names in the
 * registry are those of {@link RuntimeMetrics#callbacks()}. Every meter also carries the tags given to the
 * constructor: give each runtime its own (say {@code runtime=<name>}) when several share a registry.
 *
 * <pre>{@code
 * RuntimeMeters meters = new RuntimeMeters(callbacks.metrics());
 * meters.bindTo(registry); // e.g. the PrometheusMeterRegistry that ServingRoutes scrapes on GET /metrics
 * }</pre>
 *
 * {@link #close()} removes the meters from every registry bound. Thread-safe.
 */
public final class RuntimeMeters implements MeterBinder, AutoCloseable {
  /** The outcomes of the {@code outcome} tag. */
  public static final List<String> OUTCOMES = List.of("ok", "failed", "timeout");

  private static final Map<String, ToDoubleFunction<RuntimeMetrics.Counter>> BY_OUTCOME = Map.of(
      "ok", RuntimeMetrics.Counter::succeeded,
      "failed", RuntimeMetrics.Counter::failedOtherwise,
      "timeout", RuntimeMetrics.Counter::timeouts);

  private final RuntimeMetrics metrics;
  private final Tags tags;
  private final List<Binding> bindings = new CopyOnWriteArrayList<>();
  private final BiConsumer<String, RuntimeMetrics.Counter> onFirstCall = this::firstCall;
  private boolean watching;
  private volatile boolean closed;

  /** Meters of {@code metrics}, without extra tags. */
  public RuntimeMeters(RuntimeMetrics metrics) {
    this(metrics, Tags.empty());
  }

  /** Meters of {@code metrics}, each also tagged with {@code tags}. */
  public RuntimeMeters(RuntimeMetrics metrics, Iterable<Tag> tags) {
    this.metrics = Objects.requireNonNull(metrics, "metrics");
    this.tags = Tags.of(Objects.requireNonNull(tags, "tags"));
  }

  /**
   * Registers the meters in {@code registry}: those of the runs and of every callback called so far,
   * and, later, those of each callback when it is first called. Binding one registry twice is harmless.
   *
   * @throws XlaException ({@code FAILED_PRECONDITION}) after {@link #close()}
   */
  @Override
  public void bindTo(MeterRegistry registry) {
    Binding binding = new Binding(registry);
    synchronized (this) {
      if (closed) {
        throw new XlaException(ErrorCode.FAILED_PRECONDITION, "these RuntimeMeters are closed (close() removed their meters): create new"
            + " RuntimeMeters to bind " + registry.getClass().getSimpleName());
      }
      bindings.add(binding);
      if (!watching) {
        metrics.watchCallbacks(onFirstCall);
        watching = true;
      }
    }
    binding.runMeters();
    // After the listener is in place: a name first called meanwhile is met here or by the listener (or both).
    metrics.callbackCounters().forEach(binding::callbackMeters);
  }

  private void firstCall(String name, RuntimeMetrics.Counter counter) {
    if (closed) { // told just as close() ran
      return;
    }
    for (Binding b : bindings) {
      b.callbackMeters(name, counter);
    }
  }

  /** Removes the meters from every registry bound and stops registering new ones. Idempotent. */
  @Override
  public void close() {
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
      metrics.unwatchCallbacks(onFirstCall);
    }
    bindings.forEach(Binding::remove);
    bindings.clear();
  }

  /** The meters registered in one registry. */
  private final class Binding {
    private final MeterRegistry registry;
    private final List<Meter> meters = new CopyOnWriteArrayList<>();
    private final Set<String> callbacks = ConcurrentHashMap.newKeySet();

    Binding(MeterRegistry registry) {
      this.registry = registry;
    }

    void runMeters() {
      RuntimeMetrics.Counter runs = metrics.runCounter();
      BY_OUTCOME.forEach((outcome, f) -> meters.add(FunctionCounter.builder("xla.runtime.runs", runs, f)
          .tags(tags.and("outcome", outcome)).description("runs that ended, by outcome").register(registry)));
      latency("xla.runtime.runs.latency", runs, tags, "start to end of the most recent " + RuntimeMetrics.WINDOW + " runs");
      meters.add(FunctionCounter.builder("xla.runtime.runs.supervised", metrics, RuntimeMetrics::supervisedRuns).tags(tags)
          .description("runs that needed a supervisor actor").register(registry));
      meters.add(Gauge.builder("xla.runtime.callback.threads.stuck", metrics, RuntimeMetrics::stuckCallbackThreads).tags(tags)
          .description("callback threads still running a call that was given up").register(registry));
    }

    void callbackMeters(String name, RuntimeMetrics.Counter counter) {
      if (!callbacks.add(name)) {
        return;
      }
      Tags named = tags.and("callback", name);
      BY_OUTCOME.forEach((outcome, f) -> meters.add(FunctionCounter.builder("xla.runtime.callbacks", counter, f)
          .tags(named.and("outcome", outcome)).description("host callback calls that ended, by outcome").register(registry)));
      latency("xla.runtime.callbacks.latency", counter, named, "arrival to answer of the most recent " + RuntimeMetrics.WINDOW + " calls");
    }

    private void latency(String name, RuntimeMetrics.Counter counter, Tags tags, String description) {
      meters.add(Gauge.builder(name, counter, c -> c.snapshot().medianLatency().toNanos() / 1e9).tags(tags.and("quantile", "0.5"))
          .baseUnit("seconds").description(description).register(registry));
      meters.add(Gauge.builder(name, counter, c -> c.snapshot().p99Latency().toNanos() / 1e9).tags(tags.and("quantile", "0.99"))
          .baseUnit("seconds").description(description).register(registry));
    }

    void remove() {
      meters.forEach(registry::remove);
    }
  }
}
