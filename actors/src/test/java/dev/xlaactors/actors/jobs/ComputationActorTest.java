package dev.xlaactors.actors.jobs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.CompileException;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.pattern.StatusReply;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Computations as actors, on the real plugin: serving, failed runs, compile failures, the pool. */
@SuppressWarnings("unchecked") // TestProbe.expectMessageClass(StatusReply.class) on a probe of StatusReply<List<HostTensor>>
class ComputationActorTest {
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static final Duration WAIT = Duration.ofSeconds(30);
  static final String TWICE_PLUS_ONE =
      """
      func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
        %two = stablehlo.constant dense<2.0> : tensor<4xf32>
        %one = stablehlo.constant dense<1.0> : tensor<4xf32>
        %0 = stablehlo.multiply %x, %two : tensor<4xf32>
        %1 = stablehlo.add %0, %one : tensor<4xf32>
        return %1 : tensor<4xf32>
      }
      """;

  private static XlaClient client;
  private static JobSettings settings;

  @BeforeAll
  static void start() {
    client = XlaClient.create();
    settings = JobSettings.create(testKit.system());
  }

  @AfterAll
  static void stop() {
    client.close();
    testKit.shutdownTestKit();
  }

  private static HostTensor vector(float first) {
    return HostTensor.ofFloats(new float[] {first, first + 1, first + 2, first + 3});
  }

  private static float[] twicePlusOne(float first) {
    return new float[] {2 * first + 1, 2 * first + 3, 2 * first + 5, 2 * first + 7};
  }

  @Test
  void servesRunsOfTheCompiledProgram() {
    ActorRef<ComputationActor.Command> computation =
        testKit.spawn(ComputationActor.create(Program.ofText("twice-plus-one", TWICE_PLUS_ONE), client, null, settings));
    TestProbe<StatusReply<List<HostTensor>>> probe = testKit.createTestProbe();
    // Sent at once, before the compile finishes: they wait in the queue and are answered in order.
    for (int i = 0; i < 5; i++) {
      computation.tell(new ComputationActor.Run(List.of(vector(i)), probe.getRef()));
    }
    for (int i = 0; i < 5; i++) {
      StatusReply<List<HostTensor>> reply = probe.expectMessageClass(StatusReply.class, WAIT);
      assertTrue(reply.isSuccess(), () -> "run failed: " + reply);
      assertArrayEquals(twicePlusOne(i), reply.getValue().get(0).toFloatArray(), 0f);
    }
    testKit.stop(computation);
  }

  @Test
  void aFailedRunIsAnErrorReplyAndTheActorKeepsServing() {
    TensorType f32x4 = TensorType.of(DType.F32, 4);
    HostCallback rejectNegative =
        new HostCallback("reject-negative", List.of(f32x4), null, (in, s) -> {
          if (in.get(0).toFloatArray()[0] < 0) {
            throw new IllegalArgumentException("negative input");
          }
          return in;
        });
    GraphBuilder b = new GraphBuilder("checked");
    Value x = b.parameter(f32x4);
    Value checked = b.hostCall(rejectNegative, x).get(0);
    Program program = Program.of(b.build(b.multiply(checked, b.constant(10f))));
    try (CallbackRuntime callbacks = CallbackRuntime.create(testKit.system(), client)) {
      ActorRef<ComputationActor.Command> computation =
          testKit.spawn(ComputationActor.create(program, client, callbacks, settings));
      TestProbe<StatusReply<List<HostTensor>>> probe = testKit.createTestProbe();

      computation.tell(new ComputationActor.Run(List.of(vector(-5)), probe.getRef()));
      StatusReply<List<HostTensor>> failed = probe.expectMessageClass(StatusReply.class, WAIT);
      assertTrue(failed.isError());
      CallbackException e = assertInstanceOf(CallbackException.class, failed.getError());
      assertTrue(e.getMessage().contains("negative input"), e.getMessage());

      computation.tell(new ComputationActor.Run(List.of(HostTensor.ofFloats(new float[] {1, 2})), probe.getRef()));
      StatusReply<List<HostTensor>> badInput = probe.expectMessageClass(StatusReply.class, WAIT);
      InvalidArgumentException bad = assertInstanceOf(InvalidArgumentException.class, badInput.getError());
      assertTrue(bad.getMessage().contains("expected f32[4], got f32[2]"), bad.getMessage());

      computation.tell(new ComputationActor.Run(List.of(vector(1)), probe.getRef()));
      StatusReply<List<HostTensor>> ok = probe.expectMessageClass(StatusReply.class, WAIT);
      assertArrayEquals(new float[] {10, 20, 30, 40}, ok.getValue().get(0).toFloatArray(), 0f);
      testKit.stop(computation);
    }
  }

  @Test
  void aRunThatCannotStartIsAnErrorReplyAndTheActorStaysFree() {
    TensorType f32x4 = TensorType.of(DType.F32, 4);
    GraphBuilder b = new GraphBuilder("unstartable");
    Value x = b.parameter(f32x4);
    Value same = b.hostCall(new HostCallback("same", List.of(f32x4), null, (in, s) -> in), x).get(0);
    Program program = Program.of(b.build(same));
    // Callbacks served by an actor system that has terminated: CallbackRuntime.start throws.
    org.apache.pekko.actor.typed.ActorSystem<Void> gone =
        org.apache.pekko.actor.typed.ActorSystem.create(org.apache.pekko.actor.typed.javadsl.Behaviors.empty(), "gone");
    CallbackRuntime callbacks = CallbackRuntime.create(gone, client);
    gone.terminate();
    gone.getWhenTerminated().toCompletableFuture().join();
    ActorRef<ComputationActor.Command> computation = testKit.spawn(ComputationActor.create(program, client, callbacks, settings));
    TestProbe<StatusReply<List<HostTensor>>> probe = testKit.createTestProbe();
    for (int i = 0; i < 2; i++) {
      computation.tell(new ComputationActor.Run(List.of(vector(i)), probe.getRef()));
      StatusReply<List<HostTensor>> reply = probe.expectMessageClass(StatusReply.class, WAIT);
      assertTrue(reply.isError(), "request " + i + " answered with an error, not left waiting: " + reply);
    }
    testKit.stop(computation);
  }

  @Test
  void aCompileFailureAnswersEveryRequestWithTheCompileError() {
    String broken = TWICE_PLUS_ONE.replace("stablehlo.add %0, %one", "stablehlo.add %0, %nothing");
    ActorRef<ComputationActor.Command> computation =
        testKit.spawn(ComputationActor.create(Program.ofText("broken", broken), client, null, settings));
    TestProbe<StatusReply<List<HostTensor>>> probe = testKit.createTestProbe();
    computation.tell(new ComputationActor.Run(List.of(vector(0)), probe.getRef())); // queued during the compile
    StatusReply<List<HostTensor>> first = probe.expectMessageClass(StatusReply.class, WAIT);
    CompileException e = assertInstanceOf(CompileException.class, first.getError());
    assertTrue(e.getMessage().startsWith("Program(broken) did not compile: "), e.getMessage());
    assertTrue(e.getMessage().contains("use of undeclared SSA value name"), e.getMessage());

    computation.tell(new ComputationActor.Run(List.of(vector(0)), probe.getRef())); // after it failed
    StatusReply<List<HostTensor>> later = probe.expectMessageClass(StatusReply.class, WAIT);
    assertEquals(e.getMessage(), later.getError().getMessage());
    testKit.stop(computation);
  }

  @Test
  void aPoolServesConcurrentRequestsEachWithItsOwnResult() {
    assertEquals(4, settings.poolSize());
    ActorRef<ComputationActor.Command> pool =
        testKit.spawn(ComputationPool.create(Program.ofText("pooled", TWICE_PLUS_ONE), client, null, settings));
    int requests = 64;
    List<TestProbe<StatusReply<List<HostTensor>>>> probes = new ArrayList<>();
    for (int i = 0; i < requests; i++) {
      TestProbe<StatusReply<List<HostTensor>>> probe = testKit.createTestProbe();
      probes.add(probe);
      pool.tell(new ComputationActor.Run(List.of(vector(i * 10)), probe.getRef()));
    }
    for (int i = 0; i < requests; i++) {
      StatusReply<List<HostTensor>> reply = probes.get(i).expectMessageClass(StatusReply.class, WAIT);
      assertArrayEquals(twicePlusOne(i * 10), reply.getValue().get(0).toFloatArray(), 0f, "request " + i);
    }
    testKit.stop(pool);
  }

  @Test
  void aFullQueueRefusesRequestsAtOnce() throws Exception {
    java.util.concurrent.CountDownLatch inCallback = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
    Program gated = JobPrograms.twicePlusOneChecked("gate", (in, s) -> {
      inCallback.countDown();
      release.await();
      return in;
    });
    JobSettings twoQueued = new JobSettings(1, 2, 0, Duration.ofMillis(1), Duration.ofMillis(1), Duration.ofMinutes(1), Duration.ofSeconds(1), 1);
    try (CallbackRuntime callbacks = CallbackRuntime.create(testKit.system(), client)) {
      ActorRef<ComputationActor.Command> computation = testKit.spawn(ComputationActor.create(gated, client, callbacks, twoQueued));
      TestProbe<StatusReply<List<HostTensor>>> probe = testKit.createTestProbe();
      computation.tell(new ComputationActor.Run(List.of(vector(0)), probe.getRef()));
      assertTrue(inCallback.await(30, java.util.concurrent.TimeUnit.SECONDS), "the first run is in progress");
      for (int i = 1; i <= 3; i++) {
        computation.tell(new ComputationActor.Run(List.of(vector(i)), probe.getRef()));
      }
      StatusReply<List<HostTensor>> refused = probe.expectMessageClass(StatusReply.class, WAIT);
      assertEquals("Program(checked_gate) has 2 requests waiting (xla-actors.actors.computations.queue-capacity)",
          refused.getError().getMessage());
      release.countDown();
      for (int i : new int[] {0, 1, 2}) {
        StatusReply<List<HostTensor>> reply = probe.expectMessageClass(StatusReply.class, WAIT);
        assertArrayEquals(twicePlusOne(i), reply.getValue().get(0).toFloatArray(), 0f, "request " + i);
      }
      testKit.stop(computation);
    } finally {
      release.countDown();
    }
  }

  @Test
  void thePoolsWorkersRunAtTheSameTime() throws Exception {
    // Each run waits in its callback until pool-size runs are inside: this only finishes if they overlap.
    java.util.concurrent.CountDownLatch allInside = new java.util.concurrent.CountDownLatch(settings.poolSize());
    Program rendezvous = JobPrograms.twicePlusOneChecked("rendezvous", (in, s) -> {
      allInside.countDown();
      if (!allInside.await(20, java.util.concurrent.TimeUnit.SECONDS)) {
        throw new IllegalStateException("runs did not overlap");
      }
      return in;
    });
    try (CallbackRuntime callbacks = CallbackRuntime.create(testKit.system(), client)) {
      ActorRef<ComputationActor.Command> pool = testKit.spawn(ComputationPool.create(rendezvous, client, callbacks, settings));
      TestProbe<StatusReply<List<HostTensor>>> probe = testKit.createTestProbe();
      for (int i = 0; i < settings.poolSize(); i++) {
        pool.tell(new ComputationActor.Run(List.of(vector(i)), probe.getRef()));
      }
      for (int i = 0; i < settings.poolSize(); i++) {
        StatusReply<List<HostTensor>> reply = probe.expectMessageClass(StatusReply.class, WAIT);
        assertTrue(reply.isSuccess(), () -> reply.getError().toString());
      }
      testKit.stop(pool);
    }
  }
}
