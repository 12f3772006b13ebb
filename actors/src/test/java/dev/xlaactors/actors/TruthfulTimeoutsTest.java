package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Timeouts, cancel and metrics tell the truth (issue 10, items 1-6), on the real plugin: an aborted run
 * never reports success and its caller learns of it at once; the run clock starts at execution and the
 * queue is bounded; given-up callbacks are skipped or interrupted and hung ones do not stop other runs;
 * late answers are not counted; names can be unregistered and re-bound; the native backstop is per call,
 * names the callback and is counted.
 */
class TruthfulTimeoutsTest {
  private static final TensorType F32 = TensorType.of(DType.F32);
  private static final int N = 256;
  private static XlaClient client;
  private static Model busyLoop;
  private static Model busyThenCall;
  private static Model oneCall;
  /** Loop iterations that keep XLA busy, without host calls, for about one second here. */
  private static int oneSecond;

  private ActorTestKit testKit;
  private CallbackRuntime callbacks;
  private final CountDownLatch release = new CountDownLatch(1);

  /** {@code n} iterations of {@code v = tanh(m . v)} on f32[256]: XLA computes without calling back. */
  private static final String BUSY_LOOP =
      Programs.lines(
          "func.func @main(%n: tensor<i32>, %m: tensor<256x256xf32>, %x: tensor<256xf32>) -> tensor<256xf32> {",
          "  %zero = stablehlo.constant dense<0> : tensor<i32>",
          "  %one = stablehlo.constant dense<1> : tensor<i32>",
          "  %r:4 = stablehlo.while(%i = %zero, %k = %n, %w = %m, %v = %x) : tensor<i32>, tensor<i32>, tensor<256x256xf32>, tensor<256xf32>",
          "    cond {",
          "      %p = stablehlo.compare LT, %i, %k : (tensor<i32>, tensor<i32>) -> tensor<i1>",
          "      stablehlo.return %p : tensor<i1>",
          "    } do {",
          "      %d = stablehlo.dot_general %w, %v, contracting_dims = [1] x [0] : (tensor<256x256xf32>, tensor<256xf32>) -> tensor<256xf32>",
          "      %t = stablehlo.tanh %d : tensor<256xf32>",
          "      %next = stablehlo.add %i, %one : tensor<i32>",
          "      stablehlo.return %next, %k, %w, %t : tensor<i32>, tensor<i32>, tensor<256x256xf32>, tensor<256xf32>",
          "    }",
          "  return %r#3 : tensor<256xf32>",
          "}");

  @BeforeAll
  static void compile() {
    client = XlaClient.create();
    busyLoop = Model.compile(client, BUSY_LOOP);
    busyThenCall = Model.compile(client, 
            BUSY_LOOP
                .replace("  return %r#3 : tensor<256xf32>",
                    Programs.call("%c", "late", List.of("%r#3"), List.of("tensor<256xf32>"), List.of("tensor<256xf32>"))
                        + "\n  return %c : tensor<256xf32>"));
    oneCall = Model.compile(client, Programs.oneCall("work", "tensor<f32>"));
    // Calibrate: the fastest of three runs of 2000 iterations, scaled to about one second. The fastest,
    // as a run slowed by a busy machine would make "one second" of work too short for the timeouts below.
    busyLoop.run(Argument.of(busyInputs(200)), null);
    double perIteration = Double.MAX_VALUE;
    for (int i = 0; i < 3; i++) {
      long start = System.nanoTime();
      busyLoop.run(Argument.of(busyInputs(2000)), null);
      perIteration = Math.min(perIteration, (System.nanoTime() - start) / 2000.0);
    }
    oneSecond = (int) Math.max(200, Math.min(2_000_000, 1e9 / perIteration));
  }

  @AfterAll
  static void close() {
    busyLoop.close();
    busyThenCall.close();
    oneCall.close();
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

  private void runtime(String config) {
    Config c = ConfigFactory.parseString(config).withFallback(ConfigFactory.load());
    testKit = ActorTestKit.create(c);
    callbacks = CallbackRuntime.create(testKit.system(), client);
  }

  private static List<HostTensor> busyInputs(int iterations) {
    float[] m = new float[N * N];
    for (int i = 0; i < N; i++) {
      m[i * N + i] = 0.5f;
    }
    return List.of(HostTensor.scalar(iterations), HostTensor.ofFloats(m, N, N), HostTensor.ofFloats(new float[N], N));
  }

  private static Throwable failureOf(CompletableFuture<?> f, Duration within) {
    try {
      f.get(within.toMillis(), TimeUnit.MILLISECONDS);
    } catch (java.util.concurrent.ExecutionException e) {
      return e.getCause();
    } catch (Exception e) {
      throw new AssertionError("the run did not fail within " + within + ": " + e, e);
    }
    throw new AssertionError("the run succeeded, but it was aborted");
  }

  private static void await(BooleanSupplier condition, Duration within, String what) throws InterruptedException {
    long deadline = System.nanoTime() + within.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("not within " + within + ": " + what);
      }
      Thread.sleep(10);
    }
  }

  // ---- 1. an aborted run never reports success, and its caller learns of it at once

  @Test
  void cancelDuringAComputationWithoutCallbacksFailsTheRunAtOnceAndItNeverSucceeds() throws Exception {
    runtime("");
    RunHandle handle = callbacks.start(busyLoop, Argument.of(busyInputs(2 * oneSecond)));
    Thread.sleep(200);
    long cancelled = System.nanoTime();
    handle.cancel("the user changed their mind");
    Throwable failure = failureOf(handle.result().toCompletableFuture(), Duration.ofSeconds(1));
    long tookMillis = (System.nanoTime() - cancelled) / 1_000_000;
    CallbackException e = assertInstanceOf(CallbackException.class, failure);
    assertEquals(ErrorCode.CANCELLED, e.code());
    assertTrue(e.getMessage().contains("the user changed their mind"), e.getMessage());
    assertTrue(tookMillis < 500, "the caller got the cancellation " + tookMillis + " ms after cancel, while XLA still computed");
    assertEquals(1, callbacks.metrics().runs().failures(), "the run is counted as failed at once");
    // XLA finishes in the background; the run's supervisor stops then, and nothing counts the run again.
    TestProbe<Object> probe = testKit.createTestProbe();
    probe.expectTerminated(handle.supervisor(), Duration.ofSeconds(20));
    assertEquals(1, callbacks.metrics().runs().count());
    assertEquals(1, callbacks.metrics().runs().failures());
  }

  @Test
  void theRunTimeoutFailsARunThatMakesNoCallsAtTheTimeout() {
    runtime("xla-actors.actors.runs.timeout = 500ms");
    long start = System.nanoTime();
    RunHandle handle = callbacks.start(busyLoop, Argument.of(busyInputs(3 * oneSecond)));
    Throwable failure = failureOf(handle.result().toCompletableFuture(), Duration.ofSeconds(2));
    long tookMillis = (System.nanoTime() - start) / 1_000_000;
    CallbackException e = assertInstanceOf(CallbackException.class, failure);
    assertEquals(ErrorCode.DEADLINE_EXCEEDED, e.code());
    assertTrue(e.getMessage().contains("xla-actors.actors.runs.timeout"), e.getMessage());
    assertTrue(tookMillis < 1500, "the timeout of 500ms reached the caller after " + tookMillis + " ms");
    assertEquals(1, callbacks.metrics().runs().timeouts());
  }

  @Test
  void aBlockingRunThatTimedOutThrowsWhenXlaReturnsAndNeverReturnsOutputs() {
    runtime("xla-actors.actors.runs.timeout = 300ms");
    CallbackException e = assertThrows(CallbackException.class, () -> callbacks.run(busyLoop, Argument.of(busyInputs(3 * oneSecond))));
    assertEquals(ErrorCode.DEADLINE_EXCEEDED, e.code());
    assertEquals(1, callbacks.metrics().runs().failures());
  }

  // ---- 2. the clock starts at execution; the queue is bounded; a queued run can be cancelled

  @Test
  void aQueuedRunsTimeoutStartsWhenItExecutesAndTheQueueIsBounded() throws Exception {
    runtime("""
        xla-actors.actors.runs.timeout = 1500ms
        xla-actors.actors.runs.queue-capacity = 2
        xla-actors.actors.run-dispatcher.thread-pool-executor.fixed-pool-size = 1
        """);
    AtomicInteger worked = new AtomicInteger();
    callbacks.register("work", List.of(F32), null, (in, s) -> {
      worked.incrementAndGet();
      return in;
    }).toCompletableFuture().join();
    List<HostTensor> oneSecondOfWork = busyInputs(oneSecond);
    RunHandle first = callbacks.start(busyLoop, Argument.of(oneSecondOfWork));
    Thread.sleep(100); // the first run holds the only run thread
    RunHandle second = callbacks.start(busyLoop, Argument.of(oneSecondOfWork));
    RunHandle third = callbacks.start(oneCall, Argument.of(List.of(HostTensor.scalar(1f))));
    XlaException refused =
        assertThrows(XlaException.class, () -> callbacks.start(oneCall, Argument.of(List.of(HostTensor.scalar(2f)))));
    assertEquals(ErrorCode.RESOURCE_EXHAUSTED, refused.code());
    assertTrue(refused.getMessage().contains("xla-actors.actors.runs.queue-capacity = 2"), refused.getMessage());
    third.cancel("no longer needed");
    CallbackException cancelled =
        assertInstanceOf(CallbackException.class, failureOf(third.result().toCompletableFuture(), Duration.ofMillis(500)));
    assertEquals(ErrorCode.CANCELLED, cancelled.code());
    // The second run waited about a second, then executed for about a second: within its 1.5 s.
    first.result().toCompletableFuture().get(20, TimeUnit.SECONDS);
    second.result().toCompletableFuture().get(20, TimeUnit.SECONDS);
    Thread.sleep(200);
    assertEquals(0, worked.get(), "a run cancelled while queued never executes");
    assertEquals(List.of(3f * 5f),
        List.of(callbacks.start(oneCall, Argument.of(List.of(HostTensor.scalar(5f)))).result().toCompletableFuture()
            .get(20, TimeUnit.SECONDS).get(0).toFloatArray()[0]),
        "the queue has room again");
  }

  // ---- 3. given-up callbacks are skipped or interrupted; hung ones do not stop other runs

  @Test
  void hungCallbacksAreInterruptedOrReplacedAndOtherRunsAreStillServed() throws Exception {
    runtime("""
        xla-actors.actors.callbacks.threads = 2
        xla-actors.actors.callbacks.timeouts.work = 300ms
        """);
    AtomicInteger started = new AtomicInteger();
    AtomicInteger interrupted = new AtomicInteger();
    List<String> seen = new java.util.concurrent.CopyOnWriteArrayList<>();
    callbacks.register("work", List.of(F32), null, (in, s) -> {
      started.incrementAndGet();
      float x = in.get(0).toFloatArray()[0];
      seen.add(x + "@" + Thread.currentThread().getName());
      if (x == 1f) { // hangs and ignores interrupts
        boolean wasInterrupted = false;
        while (release.getCount() > 0) {
          try {
            release.await();
          } catch (InterruptedException e) {
            wasInterrupted = true;
          }
        }
        if (wasInterrupted) {
          interrupted.incrementAndGet();
        }
      } else if (x == 2f) { // hangs until interrupted
        try {
          Thread.sleep(60_000);
        } catch (InterruptedException e) {
          interrupted.incrementAndGet();
          throw e;
        }
      }
      return in;
    }).toCompletableFuture().join();
    // Two runs hang both threads and ignore interrupts.
    List<CompletableFuture<List<HostTensor>>> hung = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      hung.add(callbacks.start(oneCall, Argument.of(List.of(HostTensor.scalar(1f)))).result().toCompletableFuture());
    }
    // A third run's call waits for a thread; the run is cancelled meanwhile: its function must never run.
    Thread.sleep(50);
    RunHandle waiting = callbacks.start(oneCall, Argument.of(List.of(HostTensor.scalar(4f))));
    Thread.sleep(50);
    waiting.cancel("not needed");
    assertEquals(ErrorCode.CANCELLED,
        assertInstanceOf(CallbackException.class, failureOf(waiting.result().toCompletableFuture(), Duration.ofSeconds(1))).code());
    for (CompletableFuture<List<HostTensor>> f : hung) {
      CallbackException e = assertInstanceOf(CallbackException.class, failureOf(f, Duration.ofSeconds(3)));
      assertEquals(ErrorCode.DEADLINE_EXCEEDED, e.code());
      assertTrue(e.getMessage().contains("xla-actors.actors.callbacks.timeouts.work"), e.getMessage());
    }
    assertEquals(2, callbacks.metrics().stuckCallbackThreads(), "the two hung functions' threads are stuck; started " + seen);
    // Other runs are served by the threads that replaced the stuck ones.
    long start = System.nanoTime();
    assertEquals(9f, callbacks.run(oneCall, Argument.of(List.of(HostTensor.scalar(3f)))).get(0).toFloatArray()[0]);
    assertTrue(System.nanoTime() - start < 250_000_000L, "served at once, not after the hung ones");
    // A function that honours interrupts is interrupted when its call times out: no thread stays stuck.
    CallbackException sleepy =
        assertThrows(CallbackException.class, () -> callbacks.run(oneCall, Argument.of(List.of(HostTensor.scalar(2f)))));
    assertEquals(ErrorCode.DEADLINE_EXCEEDED, sleepy.code());
    await(() -> interrupted.get() == 1, Duration.ofSeconds(2), "the sleeping function was interrupted");
    await(() -> callbacks.metrics().stuckCallbackThreads() == 2, Duration.ofSeconds(2), "only the two hung threads stay stuck");
    assertEquals(2 + 1 + 1, started.get(),
        "the call given up before its function started never ran (no effects after the failure)");
    release.countDown();
    await(() -> callbacks.metrics().stuckCallbackThreads() == 0, Duration.ofSeconds(2), "released threads are no longer stuck");
    assertEquals(3, interrupted.get(), "the hung functions saw their interrupts too");
  }

  // ---- 4. an answer after the timeout is not counted

  @Test
  void anAnswerThatArrivesAfterItsCallTimedOutIsNotCounted() throws Exception {
    runtime("xla-actors.actors.callbacks.timeouts.work = 200ms");
    CountDownLatch answered = new CountDownLatch(1);
    callbacks.register("work", List.of(F32), null, (in, s) -> {
      long until = System.nanoTime() + 500_000_000L;
      while (System.nanoTime() < until) { // ignores the interrupt and answers late
        Thread.onSpinWait();
      }
      answered.countDown();
      return in;
    }).toCompletableFuture().join();
    CallbackException e = assertThrows(CallbackException.class, () -> callbacks.run(oneCall, Argument.of(List.of(HostTensor.scalar(1f)))));
    assertEquals(ErrorCode.DEADLINE_EXCEEDED, e.code());
    assertTrue(answered.await(5, TimeUnit.SECONDS));
    Thread.sleep(100);
    RuntimeMetrics.Snapshot work = callbacks.metrics().callbacks().get("work");
    assertEquals(1, work.count(), "one call: " + work);
    assertEquals(1, work.failures());
    assertEquals(1, work.timeouts());
  }

  // ---- 5. names can be unregistered and re-bound, with the project's exceptions

  @Test
  void aNameWhoseServerStoppedCanBeServedByANewActorAndNamesCanBeUnregistered() throws Exception {
    runtime("");
    ActorRef<CallbackServer.Request> first = testKit.spawn(echoServer(1f));
    callbacks.registerServer("work", List.of(F32), first).toCompletableFuture().join();
    assertEquals(3f * 2f, callbacks.run(oneCall, Argument.of(List.of(HostTensor.scalar(1f)))).get(0).toFloatArray()[0]);
    ActorRef<CallbackServer.Request> rival = testKit.spawn(echoServer(5f));
    CompletionException taken =
        assertThrows(CompletionException.class,
            () -> callbacks.registerServer("work", List.of(F32), rival).toCompletableFuture().join());
    XlaException alreadyTaken = assertInstanceOf(XlaException.class, taken.getCause());
    assertEquals(ErrorCode.ALREADY_EXISTS, alreadyTaken.code());
    assertTrue(alreadyTaken.getMessage().contains("unregister it first"), alreadyTaken.getMessage());

    testKit.stop(first);
    // The dispatcher frees the stopped server's name; a new actor takes it.
    long deadline = System.nanoTime() + 3_000_000_000L;
    while (true) {
      try {
        callbacks.registerServer("work", List.of(F32), rival).toCompletableFuture().join();
        break;
      } catch (CompletionException stillTaken) {
        if (System.nanoTime() > deadline) {
          throw stillTaken;
        }
        Thread.sleep(20);
      }
    }
    assertEquals(3f * 6f, callbacks.run(oneCall, Argument.of(List.of(HostTensor.scalar(1f)))).get(0).toFloatArray()[0]);

    assertEquals("work", callbacks.unregister("work").toCompletableFuture().join().name());
    CallbackException unknown = assertThrows(CallbackException.class, () -> callbacks.run(oneCall, Argument.of(List.of(HostTensor.scalar(1f)))));
    assertEquals(ErrorCode.NOT_FOUND, unknown.code());
    CompletionException notThere =
        assertThrows(CompletionException.class, () -> callbacks.unregister("work").toCompletableFuture().join());
    assertEquals(ErrorCode.NOT_FOUND, assertInstanceOf(XlaException.class, notThere.getCause()).code());
    callbacks.register("work", List.of(F32), null, (in, s) -> in).toCompletableFuture().join();
    assertEquals(3f, callbacks.run(oneCall, Argument.of(List.of(HostTensor.scalar(1f)))).get(0).toFloatArray()[0], "re-bound to a function");
  }

  private static org.apache.pekko.actor.typed.Behavior<CallbackServer.Request> echoServer(float plus) {
    return Behaviors.receiveMessage(r -> {
      float x = r.call().inputs().get(0).toFloatArray()[0];
      r.replyTo().tell(CallbackServer.Response.ok(r.call().tag(), List.of(HostTensor.scalar(x + plus))));
      return Behaviors.same();
    });
  }

  // ---- 6. the native backstop is per call, names the callback and is counted

  @Test
  void theNativeBackstopIsPerCallNamesTheCallbackAndIsCounted() throws Exception {
    runtime("""
        xla-actors.actors.callbacks.timeouts.late = 300ms
        xla-actors.actors.callbacks.timeouts.slow = 2h
        xla-actors.actors.runs.native-backstop-slack = 200ms
        """);
    // 'late' is served by an actor that never answers (calls to actors go through the run's supervisor).
    callbacks.registerServer("late", List.of(TensorType.of(DType.F32, N)), testKit.spawn(Behaviors.ignore()))
        .toCompletableFuture().join();
    RunHandle handle = callbacks.start(busyThenCall, Argument.of(busyInputs(Math.max(200, oneSecond / 2))));
    // Lose the run's supervisor before the call arrives, so no actor ever answers or times it out: only
    // the native wait's backstop (the call's 300ms + 200ms, not the 2h of another callback) ends the run.
    handle.supervisor().tell(new RunSupervisor.RunEnded());
    long start = System.nanoTime();
    Throwable failure = failureOf(handle.result().toCompletableFuture(), Duration.ofSeconds(10));
    long tookMillis = (System.nanoTime() - start) / 1_000_000;
    CallbackException e = assertInstanceOf(CallbackException.class, failure);
    assertEquals(ErrorCode.DEADLINE_EXCEEDED, e.code(), e.getMessage());
    assertEquals("late", e.callbackName());
    assertTrue(e.getMessage().contains("host callback 'late' got no reply within 500 ms"), e.getMessage());
    assertTrue(e.getMessage().contains("xla-actors.actors.callbacks.timeouts.late"), e.getMessage());
    assertTrue(tookMillis < 4000, "the backstop fired after " + tookMillis + " ms");
    RuntimeMetrics.Snapshot late = callbacks.metrics().callbacks().get("late");
    assertEquals(1, late.timeouts(), "the backstop's timeout is counted: " + late);
    assertFalse(callbacks.metrics().callbacks().containsKey("slow"));
  }
}
