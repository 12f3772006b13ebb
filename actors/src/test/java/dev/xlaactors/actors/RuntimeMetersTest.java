package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * RuntimeMeters shows a CallbackRuntime's RuntimeMetrics as Micrometer meters: the same counts, for
 * callbacks first called before and after binding. Timeouts come from the test's application-test.conf
 * ('sleepy' 400ms).
 */
class RuntimeMetersTest {
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static final List<TensorType> F32_4 = List.of(TensorType.of(DType.F32, 4));
  private static final List<HostTensor> INPUT = List.of(HostTensor.ofFloats(new float[] {1, 2, 3, 4}));
  private static final CountDownLatch never = new CountDownLatch(1);
  private static XlaClient client;
  private static CallbackRuntime callbacks;

  @BeforeAll
  static void start() {
    client = XlaClient.create();
    callbacks = CallbackRuntime.create(testKit.system(), client);
    callbacks.register("identity", F32_4, null, (in, s) -> in).toCompletableFuture().join();
    callbacks.register("throws", F32_4, null, (in, s) -> {
      throw new IllegalStateException("tokenizer exploded");
    }).toCompletableFuture().join();
    callbacks.register("sleepy", F32_4, null, (in, s) -> {
      never.await();
      return in;
    }).toCompletableFuture().join();
  }

  @AfterAll
  static void stop() {
    never.countDown();
    callbacks.close();
    client.close();
    testKit.shutdownTestKit();
  }

  private static void run(String callback, int times) {
    try (Model exe = Model.compile(client, Programs.oneCall(callback, "tensor<4xf32>"))) {
      for (int i = 0; i < times; i++) {
        callbacks.run(exe, Argument.of(INPUT));
      }
    }
  }

  private static void runFailing(String callback) {
    try (Model exe = Model.compile(client, Programs.oneCall(callback, "tensor<4xf32>"))) {
      assertThrows(CallbackException.class, () -> callbacks.run(exe, Argument.of(INPUT)));
    }
  }

  private static double counter(SimpleMeterRegistry registry, String name, Tags tags) {
    FunctionCounter c = registry.find(name).tags(tags).functionCounter();
    assertNotNull(c, name + " " + tags + " is not registered; registry has " + registry.getMetersAsString());
    return c.count();
  }

  private static double gauge(SimpleMeterRegistry registry, String name, Tags tags) {
    Gauge g = registry.find(name).tags(tags).gauge();
    assertNotNull(g, name + " " + tags + " is not registered; registry has " + registry.getMetersAsString());
    return g.value();
  }

  /** Every meter equals the RuntimeMetrics figure it shows. */
  private static void assertMetersMatch(SimpleMeterRegistry registry, Tags extra) {
    RuntimeMetrics metrics = callbacks.metrics();
    RuntimeMetrics.Snapshot runs = metrics.runs();
    assertEquals(runs.count() - runs.failures(), counter(registry, "xla.runtime.runs", extra.and("outcome", "ok")));
    assertEquals(runs.failures() - runs.timeouts(), counter(registry, "xla.runtime.runs", extra.and("outcome", "failed")));
    assertEquals(runs.timeouts(), counter(registry, "xla.runtime.runs", extra.and("outcome", "timeout")));
    assertEquals(runs.medianLatency().toNanos() / 1e9, gauge(registry, "xla.runtime.runs.latency", extra.and("quantile", "0.5")));
    assertEquals(runs.p99Latency().toNanos() / 1e9, gauge(registry, "xla.runtime.runs.latency", extra.and("quantile", "0.99")));
    assertEquals(metrics.supervisedRuns(), counter(registry, "xla.runtime.runs.supervised", extra));
    assertEquals(metrics.stuckCallbackThreads(), gauge(registry, "xla.runtime.callback.threads.stuck", extra));
    for (var e : metrics.callbacks().entrySet()) {
      Tags named = extra.and("callback", e.getKey());
      RuntimeMetrics.Snapshot s = e.getValue();
      assertEquals(s.count() - s.failures(), counter(registry, "xla.runtime.callbacks", named.and("outcome", "ok")), e.getKey());
      assertEquals(s.failures() - s.timeouts(), counter(registry, "xla.runtime.callbacks", named.and("outcome", "failed")), e.getKey());
      assertEquals(s.timeouts(), counter(registry, "xla.runtime.callbacks", named.and("outcome", "timeout")), e.getKey());
      assertEquals(s.medianLatency().toNanos() / 1e9, gauge(registry, "xla.runtime.callbacks.latency", named.and("quantile", "0.5")));
      assertEquals(s.p99Latency().toNanos() / 1e9, gauge(registry, "xla.runtime.callbacks.latency", named.and("quantile", "0.99")));
    }
  }

  @Test
  void metersShowTheRuntimeFiguresForCallbacksCalledBeforeAndAfterBinding() {
    run("identity", 2); // before binding
    SimpleMeterRegistry early = new SimpleMeterRegistry();
    try (RuntimeMeters meters = new RuntimeMeters(callbacks.metrics())) {
      meters.bindTo(early);
      assertNotNull(early.find("xla.runtime.callbacks").tag("callback", "identity").functionCounter(), "called before binding");
      assertNull(early.find("xla.runtime.callbacks").tag("callback", "throws").functionCounter(), "not called yet: " + callbacks.metrics());
      run("identity", 3);
      runFailing("throws"); // first called after binding: its meters appear then
      runFailing("sleepy"); // times out after 400ms
      assertMetersMatch(early, Tags.empty());
      assertEquals(1, counter(early, "xla.runtime.callbacks", Tags.of("callback", "throws", "outcome", "failed")));
      assertEquals(1, counter(early, "xla.runtime.callbacks", Tags.of("callback", "sleepy", "outcome", "timeout")));
      assertEquals(0, counter(early, "xla.runtime.callbacks", Tags.of("callback", "sleepy", "outcome", "failed")));
      assertTrue(counter(early, "xla.runtime.callbacks", Tags.of("callback", "identity", "outcome", "ok")) >= 5);
      assertTrue(counter(early, "xla.runtime.runs", Tags.of("outcome", "failed")) >= 1);
      assertTrue(counter(early, "xla.runtime.runs", Tags.of("outcome", "timeout")) >= 1);
      assertTrue(counter(early, "xla.runtime.runs.supervised", Tags.empty()) >= 2, "the failing runs needed a supervisor");
      assertTrue(gauge(early, "xla.runtime.callbacks.latency", Tags.of("callback", "sleepy", "quantile", "0.5")) >= 0.4);

      // A registry bound later (with a tag) gets every name called so far at once.
      SimpleMeterRegistry late = new SimpleMeterRegistry();
      meters.bindTo(late);
      assertMetersMatch(late, Tags.empty());
      run("identity", 1);
      assertMetersMatch(early, Tags.empty());
      assertMetersMatch(late, Tags.empty());
    }
    assertTrue(early.getMeters().isEmpty(), "close() removes the meters: " + early.getMetersAsString());
  }

  @Test
  void extraTagsTellRuntimesApartAndClosedMetersRefuseToBind() {
    run("identity", 1);
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    RuntimeMeters meters = new RuntimeMeters(callbacks.metrics(), Tags.of("runtime", "main"));
    meters.bindTo(registry);
    assertMetersMatch(registry, Tags.of("runtime", "main"));
    meters.close();
    meters.close(); // idempotent
    assertTrue(registry.getMeters().isEmpty(), registry.getMetersAsString());
    XlaException closed = assertThrows(XlaException.class, () -> meters.bindTo(registry));
    assertEquals(ErrorCode.FAILED_PRECONDITION, closed.code());
    assertTrue(closed.getMessage().contains("closed"), closed.getMessage());
  }
}
