package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.HostFunction;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Nothing hangs: every way a callback can go wrong ends its run promptly with a CallbackException that
 * names the callback and the cause, and the next run works. Timeouts come from the test's
 * application.conf: default 3s, 'sleepy' 400ms.
 */
class CallbackFailuresTest {
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static final List<TensorType> F32_4 = List.of(TensorType.of(DType.F32, 4));
  private static final HostTensor INPUT = HostTensor.ofFloats(new float[] {1, 2, 3, 4});
  private static final Duration SLACK = Duration.ofMillis(1500);

  private static XlaClient client;
  private static CallbackRuntime callbacks;
  private static final CountDownLatch never = new CountDownLatch(1);

  @BeforeAll
  static void start() {
    client = XlaClient.create();
    callbacks = CallbackRuntime.create(testKit.system(), client);
    register("identity", (in, s) -> in);
    register("sleepy", (in, s) -> {
      never.await();
      return in;
    });
    register("hangs", (in, s) -> {
      never.await();
      return in;
    });
    register("throws", (in, s) -> {
      throw new IllegalStateException("tokenizer exploded");
    });
    register("returns-null", (in, s) -> null);
    register("wrong-shape", (in, s) -> List.of(HostTensor.ofFloats(new float[3])));
    register("wrong-dtype", (in, s) -> List.of(HostTensor.ofInts(new int[4])));
    register("wrong-count", (in, s) -> List.of(in.get(0), in.get(0)));
  }

  @AfterAll
  static void stop() {
    never.countDown();
    callbacks.close();
    client.close();
    testKit.shutdownTestKit();
  }

  @AfterEach
  void nothingIsLeftWaiting() throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    while (HostCall.pendingCount() > 0 && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(0, HostCall.pendingCount(), "a host call was left waiting");
    assertNextRunWorks();
  }

  private static void register(String name, HostFunction f) {
    callbacks.register(name, F32_4, null, f).toCompletableFuture().join();
  }

  private static CallbackException failingRun(String callback) {
    try (Model exe = Model.compile(client, Programs.oneCall(callback, "tensor<4xf32>"))) {
      return assertThrows(CallbackException.class, () -> callbacks.run(exe, Argument.of(List.of(INPUT))));
    }
  }

  private static void assertNextRunWorks() {
    try (Model exe = Model.compile(client, Programs.oneCall("identity", "tensor<4xf32>"))) {
      assertArrayEquals(new float[] {3, 6, 9, 12}, callbacks.run(exe, Argument.of(List.of(INPUT))).get(0).toFloatArray(), 0f);
    }
  }

  @Test
  void callbackThatNeverReturnsTimesOutNamingTheConfiguredDuration() {
    long start = System.nanoTime();
    CallbackException e = failingRun("sleepy");
    Duration took = Duration.ofNanos(System.nanoTime() - start);
    assertEquals(ErrorCode.DEADLINE_EXCEEDED, e.code());
    assertEquals("sleepy", e.callbackName());
    assertTrue(e.getMessage().contains("callback 'sleepy' did not answer within 400ms"), e.getMessage());
    assertTrue(e.getMessage().contains("xla-actors.actors.callbacks.timeouts.sleepy"), e.getMessage());
    assertTrue(took.compareTo(Duration.ofMillis(400)) >= 0 && took.compareTo(Duration.ofMillis(400).plus(SLACK)) < 0, "took " + took);
  }

  @Test
  void defaultTimeoutAppliesToCallbacksWithoutOverride() {
    long start = System.nanoTime();
    CallbackException e = failingRun("hangs");
    Duration took = Duration.ofNanos(System.nanoTime() - start);
    assertTrue(e.getMessage().contains("within 3s (xla-actors.actors.callbacks.default-timeout)"), e.getMessage());
    assertTrue(took.compareTo(Duration.ofSeconds(3).plus(SLACK)) < 0, "took " + took);
  }

  @Test
  void callbackThatThrowsAbortsWithClassMessageAndCause() {
    CallbackException e = failingRun("throws");
    assertEquals(ErrorCode.ABORTED, e.code());
    assertTrue(
        e.getMessage().contains("callback 'throws' threw java.lang.IllegalStateException: tokenizer exploded"), e.getMessage());
    assertInstanceOf(IllegalStateException.class, e.getCause());
  }

  @Test
  void callbackReturningNullIsABadResult() {
    CallbackException e = failingRun("returns-null");
    assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    assertTrue(e.getMessage().contains("callback 'returns-null' returned null, expected [f32[4]]"), e.getMessage());
  }

  @Test
  void wrongShapeSaysExpectedAndGot() {
    CallbackException e = failingRun("wrong-shape");
    assertTrue(e.getMessage().contains("callback 'wrong-shape' returned f32[3] as output 0, expected f32[4]"), e.getMessage());
  }

  @Test
  void wrongDtypeSaysExpectedAndGot() {
    CallbackException e = failingRun("wrong-dtype");
    assertTrue(e.getMessage().contains("callback 'wrong-dtype' returned s32[4] as output 0, expected f32[4]"), e.getMessage());
  }

  @Test
  void wrongCountSaysExpectedAndGot() {
    CallbackException e = failingRun("wrong-count");
    assertTrue(e.getMessage().contains("callback 'wrong-count' returned 2 tensor(s), expected 1 [f32[4]]"), e.getMessage());
  }

  @Test
  void unknownCallbackNamesItAndTheRegisteredOnes() {
    CallbackException e = failingRun("no-such-callback");
    assertEquals(ErrorCode.NOT_FOUND, e.code());
    assertTrue(e.getMessage().contains("unknown callback 'no-such-callback'"), e.getMessage());
    assertTrue(e.getMessage().contains("identity"), e.getMessage());
  }

  @Test
  void programDeclaringOtherOutputsThanTheTemplateIsRefused() {
    try (Model exe = Model.compile(client, Programs.oneCall("identity", "tensor<2xf32>"))) {
      CallbackException e =
          assertThrows(CallbackException.class, () -> callbacks.run(exe, Argument.of(List.of(HostTensor.ofFloats(new float[2])))));
      assertTrue(e.getMessage().contains("registered with output template [f32[4]], but the program expects [f32[2]]"), e.getMessage());
    }
  }

  @Test
  void stoppedServingActorAbortsTheRun() throws Exception {
    CountDownLatch received = new CountDownLatch(1);
    ActorRef<CallbackServer.Request> server =
        testKit.spawn(
            Behaviors.receive(CallbackServer.Request.class)
                .onMessage(
                    CallbackServer.Request.class,
                    request -> {
                      received.countDown();
                      return Behaviors.stopped(); // dies without answering
                    })
                .build());
    callbacks.registerServer("dies", F32_4, server).toCompletableFuture().join();
    long start = System.nanoTime();
    CallbackException e = failingRun("dies");
    assertTrue(received.await(1, TimeUnit.SECONDS));
    assertEquals(ErrorCode.UNAVAILABLE, e.code());
    assertTrue(e.getMessage().contains("callback 'dies': the actor serving it"), e.getMessage());
    assertTrue(e.getMessage().contains("stopped"), e.getMessage());
    assertTrue(Duration.ofNanos(System.nanoTime() - start).compareTo(Duration.ofSeconds(2)) < 0, "death must abort before the 3s timeout");
  }

  @Test
  void actorServedCallbackAnswers() {
    ActorRef<CallbackServer.Request> server =
        testKit.spawn(
            Behaviors.receive(CallbackServer.Request.class)
                .onMessage(
                    CallbackServer.Request.class,
                    request -> {
                      float[] x = request.call().inputs().get(0).toFloatArray();
                      for (int i = 0; i < x.length; i++) {
                        x[i] += 100;
                      }
                      request.replyTo().tell(CallbackServer.Response.ok(request.call().tag(), List.of(HostTensor.ofFloats(x))));
                      return Behaviors.same();
                    })
                .build());
    callbacks.registerServer("plus-100", F32_4, server).toCompletableFuture().join();
    try (Model exe = Model.compile(client, Programs.oneCall("plus-100", "tensor<4xf32>"))) {
      assertArrayEquals(new float[] {303, 306, 309, 312}, callbacks.run(exe, Argument.of(List.of(INPUT))).get(0).toFloatArray(), 0f);
    }
  }

  @Test
  void cancellingARunFailsItsPendingCallbackAtOnce() throws Exception {
    try (Model exe = Model.compile(client, Programs.oneCall("hangs", "tensor<4xf32>"))) {
      RunHandle run = callbacks.start(exe, Argument.of(List.of(INPUT)));
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
      while (HostCall.pendingCount() == 0 && System.nanoTime() < deadline) {
        Thread.sleep(5);
      }
      long start = System.nanoTime();
      run.cancel("user pressed Ctrl-C");
      var result = run.result().toCompletableFuture();
      Exception e = assertThrows(Exception.class, () -> result.get(2, TimeUnit.SECONDS));
      CallbackException cause = assertInstanceOf(CallbackException.class, e.getCause());
      assertEquals(ErrorCode.CANCELLED, cause.code());
      assertTrue(cause.getMessage().contains("user pressed Ctrl-C"), cause.getMessage());
      assertTrue(Duration.ofNanos(System.nanoTime() - start).compareTo(Duration.ofSeconds(1)) < 0);
    }
  }
}
