package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.xlaactors.error.CallbackException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/** Metrics per callback name and for runs, and log lines that carry the run id and callback name. */
class ObservabilityTest {
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static final List<TensorType> F32_4 = List.of(TensorType.of(DType.F32, 4));
  private static final org.slf4j.Logger userLog = LoggerFactory.getLogger("user.callback");
  private static final CountDownLatch never = new CountDownLatch(1);
  private static XlaClient client;
  private static CallbackRuntime callbacks;

  @BeforeAll
  static void start() {
    client = XlaClient.create();
    callbacks = CallbackRuntime.create(testKit.system(), client);
    callbacks.register("logs", F32_4, null, (in, s) -> {
      userLog.warn("inside the callback");
      return in;
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

  @Test
  void logLinesFromCallbacksCarryRunIdAndCallbackName() {
    Logger logger = (Logger) LoggerFactory.getLogger("user.callback");
    ListAppender<ILoggingEvent> appender = new ListAppender<>();
    appender.start();
    logger.addAppender(appender);
    try (Model exe = Model.compile(client, Programs.oneCall("logs", "tensor<4xf32>"))) {
      RunHandle run = callbacks.start(exe, Argument.of(List.of(HostTensor.ofFloats(new float[4]))));
      run.result().toCompletableFuture().join();
      ILoggingEvent event = appender.list.get(0);
      assertEquals("inside the callback", event.getFormattedMessage());
      assertEquals("logs", event.getMDCPropertyMap().get("callback"));
      assertEquals(Long.toString(run.runId()), event.getMDCPropertyMap().get("runId"));
    } finally {
      logger.detachAppender(appender);
    }
  }

  @Test
  void metricsCountCallsFailuresTimeoutsAndLatencies() {
    try (Model ok = Model.compile(client, Programs.oneCall("logs", "tensor<4xf32>"));
        Model slow = Model.compile(client, Programs.oneCall("sleepy", "tensor<4xf32>"))) {
      long runsBefore = callbacks.metrics().runs().count();
      for (int i = 0; i < 3; i++) {
        callbacks.run(ok, Argument.of(List.of(HostTensor.ofFloats(new float[4]))));
      }
      assertThrows(CallbackException.class, () -> callbacks.run(slow, Argument.of(List.of(HostTensor.ofFloats(new float[4])))));
      RuntimeMetrics.Snapshot logs = callbacks.metrics().callbacks().get("logs");
      assertTrue(logs.count() >= 3);
      assertEquals(0, logs.failures());
      assertTrue(logs.medianLatency().toNanos() > 0 && logs.p99Latency().compareTo(logs.medianLatency()) >= 0);
      RuntimeMetrics.Snapshot sleepy = callbacks.metrics().callbacks().get("sleepy");
      assertEquals(1, sleepy.count());
      assertEquals(1, sleepy.failures());
      assertEquals(1, sleepy.timeouts());
      assertTrue(sleepy.medianLatency().toMillis() >= 400, "timed out after the configured 400ms: " + sleepy);
      RuntimeMetrics.Snapshot runs = callbacks.metrics().runs();
      assertEquals(runsBefore + 4, runs.count());
      assertTrue(runs.failures() >= 1 && runs.timeouts() >= 1, runs.toString());
    }
  }
}
