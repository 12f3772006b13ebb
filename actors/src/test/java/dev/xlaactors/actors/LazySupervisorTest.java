package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.ConfigFactory;
import dev.xlaactors.actors.RunHandle.CancelOutcome;
import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A run spawns its {@link RunSupervisor} only when it needs one: runs whose callbacks go straight to
 * their functions and answer in time end without an actor, and every promise still holds when the
 * supervisor comes late: a failed or overdue direct call, the run's own deadline (enforced by the
 * watchdog), a cancel, an actor-served call. {@link RuntimeMetrics#supervisedRuns()} counts the runs that
 * needed one. Also: {@link DeviceRunHandle#cancel} reports its outcome as {@link RunHandle#cancel} does.
 */
class LazySupervisorTest {
  private static final List<TensorType> F4 = List.of(TensorType.of(DType.F32, 4));
  private static final HostTensor INPUT = HostTensor.ofFloats(new float[] {1, 2, 3, 4});
  private static final float[] TRIPLED = {3, 6, 9, 12};
  private static XlaClient client;
  private final CountDownLatch release = new CountDownLatch(1);
  private ActorTestKit testKit;
  private CallbackRuntime callbacks;

  @BeforeAll
  static void start() {
    client = XlaClient.create();
  }

  @AfterAll
  static void stop() {
    client.close();
  }

  @AfterEach
  void stopRuntime() {
    release.countDown();
    if (callbacks != null) {
      callbacks.close();
    }
    if (testKit != null) {
      testKit.shutdownTestKit();
    }
  }

  /** A runtime with {@code config} over the defaults and the callbacks echo, fails, blocks and sleeps. */
  private void runtime(String config) {
    testKit = ActorTestKit.create(ConfigFactory.parseString(config).withFallback(ConfigFactory.load()));
    callbacks = CallbackRuntime.create(testKit.system(), client);
    callbacks.register("echo", F4, null, (in, s) -> in).toCompletableFuture().join();
    callbacks.register("fails", F4, null, (in, s) -> {
      throw new IllegalStateException("broken on purpose");
    }).toCompletableFuture().join();
    callbacks.register("blocks", F4, null, (in, s) -> {
      release.await();
      return in;
    }).toCompletableFuture().join();
    callbacks.register("sleeps", F4, null, (in, s) -> {
      Thread.sleep(5_000);
      return in;
    }).toCompletableFuture().join();
  }

  private static Model oneCall(String name) {
    return Model.compile(client, Programs.oneCall(name, "tensor<4xf32>"));
  }

  private static Throwable failureOf(CompletableFuture<?> f) throws Exception {
    try {
      f.get(20, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      return e.getCause();
    }
    throw new AssertionError("the run succeeded, but it should have failed");
  }

  @Test
  void runsWhoseCallbacksGoStraightToTheirFunctionsSpawnNoSupervisor() throws Exception {
    runtime("");
    try (Executable echoProgram = client.compile(Programs.oneCall("echo", "tensor<4xf32>"));
        Model echo = Model.of(echoProgram);
        Model noCalls = Model.compile(client, Programs.lines(
            "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {",
            "  %y = stablehlo.add %x, %x : tensor<4xf32>",
            "  return %y : tensor<4xf32>",
            "}"));
        Model model = Model.load(echoProgram, List.of("x"), Map.of(), client.devices().get(0))) {
      for (int i = 0; i < 10; i++) {
        assertArrayEquals(TRIPLED, callbacks.run(echo, Argument.of(List.of(INPUT))).get(0).toFloatArray(), 0f);
        assertArrayEquals(TRIPLED, callbacks.run(model, List.of(Argument.of(INPUT))).get(0).toFloatArray(), 0f);
        assertArrayEquals(TRIPLED,
            callbacks.start(echo, Argument.of(List.of(INPUT))).result().toCompletableFuture().get(20, TimeUnit.SECONDS).get(0).toFloatArray(), 0f);
        try (DeviceBuffer out = callbacks.runOnDevice(model, List.of(Argument.of(INPUT))).get(0)) {
          assertArrayEquals(TRIPLED, out.toHost().toFloatArray(), 0f);
        }
        assertArrayEquals(new float[] {2, 4, 6, 8}, callbacks.run(noCalls, Argument.of(List.of(INPUT))).get(0).toFloatArray(), 0f);
      }
    }
    RuntimeMetrics metrics = callbacks.metrics();
    assertEquals(50, metrics.runs().count(), metrics.toString());
    assertEquals(0, metrics.runs().failures(), metrics.toString());
    assertEquals(40, metrics.callbacks().get("echo").count(), "every call is counted: " + metrics);
    assertEquals(0, metrics.supervisedRuns(), "no run needed a supervisor actor: " + metrics);
  }

  @Test
  void aCallServedByAnActorSpawnsTheRunsSupervisor() throws Exception {
    runtime("");
    callbacks.registerServer("served", F4, testKit.spawn(Behaviors.<CallbackServer.Request>receiveMessage(r -> {
      r.replyTo().tell(new CallbackServer.Response(r.call().tag(), r.call().inputs(), null));
      return Behaviors.same();
    }))).toCompletableFuture().join();
    try (Model served = oneCall("served")) {
      assertArrayEquals(TRIPLED, callbacks.run(served, Argument.of(List.of(INPUT))).get(0).toFloatArray(), 0f);
      assertArrayEquals(TRIPLED,
          callbacks.start(served, Argument.of(List.of(INPUT))).result().toCompletableFuture().get(20, TimeUnit.SECONDS).get(0).toFloatArray(), 0f);
    }
    assertEquals(2, callbacks.metrics().supervisedRuns(), callbacks.metrics().toString());
    assertEquals(2, callbacks.metrics().callbacks().get("served").count());
  }

  @Test
  void aDirectCallbackThatThrowsAbortsTheRunThroughASupervisorSpawnedForIt() throws Exception {
    runtime("");
    try (Model fails = oneCall("fails")) {
      CallbackException e = assertInstanceOf(CallbackException.class,
          org.junit.jupiter.api.Assertions.assertThrows(CallbackException.class, () -> callbacks.run(fails, Argument.of(List.of(INPUT)))));
      assertEquals("fails", e.callbackName());
      assertEquals(ErrorCode.ABORTED, e.code());
      assertTrue(e.getMessage().contains("IllegalStateException: broken on purpose"), e.getMessage());
    }
    RuntimeMetrics metrics = callbacks.metrics();
    assertEquals(1, metrics.supervisedRuns(), metrics.toString());
    assertEquals(1, metrics.runs().failures(), metrics.toString());
    assertEquals(1, metrics.callbacks().get("fails").failures(), metrics.toString());
  }

  @Test
  void theRunTimeoutEndsARunWithoutSupervisorWhoseCallbackIsStillWithinItsOwnTimeout() throws Exception {
    // The callback's own timeout (30 s) is far away; only the run's deadline, which no actor timer
    // watches until the watchdog spawns the supervisor, can end the run.
    runtime("xla-actors.actors.runs.timeout = 500ms");
    try (Model sleeps = oneCall("sleeps")) {
      long start = System.nanoTime();
      Throwable failure = failureOf(callbacks.start(sleeps, Argument.of(List.of(INPUT))).result().toCompletableFuture());
      long tookMillis = (System.nanoTime() - start) / 1_000_000;
      CallbackException e = assertInstanceOf(CallbackException.class, failure);
      assertEquals(ErrorCode.DEADLINE_EXCEEDED, e.code(), e.getMessage());
      assertTrue(e.getMessage().contains("xla-actors.actors.runs.timeout"), e.getMessage());
      assertTrue(tookMillis < 4_000, "the run's 500ms timeout ended it after " + tookMillis + " ms, not the 5 s callback");
      // The blocking form throws the same once XLA gets its thread back (the call is failed at once).
      CallbackException blocking = org.junit.jupiter.api.Assertions.assertThrows(CallbackException.class,
          () -> callbacks.run(sleeps, Argument.of(List.of(INPUT))));
      assertEquals(ErrorCode.DEADLINE_EXCEEDED, blocking.code(), blocking.getMessage());
    }
    RuntimeMetrics metrics = callbacks.metrics();
    assertEquals(2, metrics.runs().timeouts(), metrics.toString());
    assertEquals(2, metrics.supervisedRuns(), metrics.toString());
    assertEquals(2, metrics.callbacks().get("sleeps").failures(), "the abandoned calls are counted: " + metrics);
  }

  @Test
  void anOverdueDirectCallTimesOutNamingItsKey() throws Exception {
    runtime("xla-actors.actors.callbacks.timeouts.sleeps = 300ms");
    try (Model sleeps = oneCall("sleeps")) {
      CallbackException e = org.junit.jupiter.api.Assertions.assertThrows(CallbackException.class,
          () -> callbacks.run(sleeps, Argument.of(List.of(INPUT))));
      assertEquals(ErrorCode.DEADLINE_EXCEEDED, e.code(), e.getMessage());
      assertEquals("sleeps", e.callbackName());
      assertTrue(e.getMessage().contains("xla-actors.actors.callbacks.timeouts.sleeps"), e.getMessage());
    }
    RuntimeMetrics.Snapshot sleeps = callbacks.metrics().callbacks().get("sleeps");
    assertEquals(1, sleeps.timeouts(), sleeps.toString());
    assertEquals(1, callbacks.metrics().supervisedRuns());
  }

  @Test
  void cancelSpawnsTheSupervisorOnlyWhileTheRunIsInProgress() throws Exception {
    runtime("");
    try (Model echo = oneCall("echo"); Model blocks = oneCall("blocks")) {
      RunHandle finished = callbacks.start(echo, Argument.of(List.of(INPUT)));
      finished.result().toCompletableFuture().get(20, TimeUnit.SECONDS);
      assertEquals(CancelOutcome.ALREADY_FINISHED, finished.cancel("too late").toCompletableFuture().get(20, TimeUnit.SECONDS));
      assertEquals(0, callbacks.metrics().supervisedRuns(), "a cancel after the end needs no actor");

      RunHandle blocked = callbacks.start(blocks, Argument.of(List.of(INPUT)));
      assertEquals(CancelOutcome.CANCELLED, blocked.cancel("in time").toCompletableFuture().get(20, TimeUnit.SECONDS));
      CallbackException e = assertInstanceOf(CallbackException.class, failureOf(blocked.result().toCompletableFuture()));
      assertEquals(ErrorCode.CANCELLED, e.code());
      assertTrue(e.getMessage().contains("in time"), e.getMessage());
      assertEquals(1, callbacks.metrics().supervisedRuns());
    }
  }

  @Test
  void theSupervisorOfARunThatEndedWithoutOneStopsAtOnce() throws Exception {
    runtime("");
    try (Model echo = oneCall("echo")) {
      RunHandle run = callbacks.start(echo, Argument.of(List.of(INPUT)));
      run.result().toCompletableFuture().get(20, TimeUnit.SECONDS);
      TestProbe<Object> probe = testKit.createTestProbe();
      probe.expectTerminated(run.supervisor(), Duration.ofSeconds(10));
      assertEquals(1, callbacks.metrics().runs().count(), "the run is counted once");
    }
  }

  @Test
  void deviceRunHandleCancelReportsItsOutcome() throws Exception {
    runtime("");
    try (Model echoModel = oneCall("echo"); Model blocksModel = oneCall("blocks"); Model failsModel = oneCall("fails")) {
      DeviceRunHandle finished = callbacks.startOnDevice(echoModel, List.of(Argument.of(INPUT)));
      List<DeviceBuffer> outputs = finished.result().toCompletableFuture().get(20, TimeUnit.SECONDS);
      assertEquals(CancelOutcome.ALREADY_FINISHED, finished.cancel("too late").toCompletableFuture().get(20, TimeUnit.SECONDS));
      try (DeviceBuffer out = outputs.get(0)) {
        assertArrayEquals(TRIPLED, out.toHost().toFloatArray(), 0f); // the outputs stand, still the caller's
      }

      DeviceRunHandle failed = callbacks.startOnDevice(failsModel, List.of(Argument.of(INPUT)));
      failureOf(failed.result().toCompletableFuture());
      assertEquals(CancelOutcome.ALREADY_FAILED, failed.cancel("too late").toCompletableFuture().get(20, TimeUnit.SECONDS));

      DeviceRunHandle blocked = callbacks.startOnDevice(blocksModel, List.of(Argument.of(INPUT)));
      assertEquals(CancelOutcome.CANCELLED, blocked.cancel("in time").toCompletableFuture().get(20, TimeUnit.SECONDS));
      CallbackException e = assertInstanceOf(CallbackException.class, failureOf(blocked.result().toCompletableFuture()));
      assertEquals(ErrorCode.CANCELLED, e.code());
    }
  }
}
