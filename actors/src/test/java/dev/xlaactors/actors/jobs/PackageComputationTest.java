package dev.xlaactors.actors.jobs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.LoadedPackage;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.Role;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.pattern.StatusReply;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A model package's program as a computation and as a job, on the real plugin: the runtime's tensor fixture
 * ("affine", y = x . w + b at batch 1 and 2, weights bound once by the package) and the scoring package,
 * whose host callbacks must be registered before anything of it may run.
 */
@SuppressWarnings("unchecked") // TestProbe.expectMessageClass(StatusReply.class) on a probe of StatusReply<List<...>>
class PackageComputationTest {
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static final Duration WAIT = Duration.ofSeconds(60);
  private static XlaClient client;
  private static JobSettings settings;
  private static LoadedPackage affine;
  private static LoadedPackage scoring;

  static Path resource(String dir) {
    try {
      return Path.of(PackageComputationTest.class.getResource("/" + dir + "/" + ModelPackage.MANIFEST).toURI()).getParent();
    } catch (URISyntaxException e) {
      throw new IllegalStateException(e);
    }
  }

  @BeforeAll
  static void load() {
    client = XlaClient.create();
    settings = JobSettings.create(testKit.system());
    affine = ModelPackage.open(resource("packages/tensor")).load(client.devices().get(0));
    scoring = ModelPackage.open(resource("scoring")).load(client.devices().get(0));
  }

  @AfterAll
  static void close() {
    testKit.shutdownTestKit();
    affine.close();
    scoring.close();
    client.close();
  }

  /** y = x . w + b of the fixture: w = [[-2, -1], [0, 1], [2, 3]], b = [0.5, -1]. */
  static float[] expected(float... x) {
    float[] y = new float[x.length / 3 * 2];
    for (int r = 0; r < x.length / 3; r++) {
      y[2 * r] = -2 * x[3 * r] + 2 * x[3 * r + 2] + 0.5f;
      y[2 * r + 1] = -x[3 * r] + x[3 * r + 1] + 3 * x[3 * r + 2] - 1;
    }
    return y;
  }

  private static float[] run(ActorRef<ComputationActor.Command> computation, HostTensor x) {
    TestProbe<StatusReply<List<HostTensor>>> reply = testKit.createTestProbe();
    computation.tell(new ComputationActor.Run(List.of(x), reply.getRef()));
    StatusReply<List<HostTensor>> r = reply.expectMessageClass(StatusReply.class, WAIT);
    assertTrue(r.isSuccess(), () -> String.valueOf(r.getError()));
    return r.getValue().get(0).toFloatArray();
  }

  @Test
  void aComputationOfAPackageRunsItsMainProgramAtTheSmallestBatchByDefault() {
    ActorRef<ComputationActor.Command> computation = testKit.spawn(ComputationActor.create(affine, null, settings));
    assertArrayEquals(new float[] {4.5f, 9f}, run(computation, HostTensor.ofFloats(new float[] {1, 2, 3}, 1, 3)));
    assertArrayEquals(expected(-1, 0.5f, 4), run(computation, HostTensor.ofFloats(new float[] {-1, 0.5f, 4}, 1, 3)));
    testKit.stop(computation);
  }

  @Test
  void aComputationOfAPackageRunsTheProgramOfTheRoleAndSizeItNames() {
    ActorRef<ComputationActor.Command> computation =
        testKit.spawn(ComputationActor.create(affine, Role.MAIN, 2, null, settings));
    float[] x = {1, 2, 3, 0, -1, 2};
    assertArrayEquals(expected(x), run(computation, HostTensor.ofFloats(x, 2, 3)));
    testKit.stop(computation);
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
        () -> ComputationActor.create(affine, Role.MAIN, 4, null, settings));
    assertTrue(e.getMessage().contains("has no main program at batch 4; it has main at batch [1, 2]"), e.getMessage());
  }

  /** Three items, item i being the row [i, 1, -i]; the outputs go to {@code got}. */
  private static JobWork threeRows(Map<Long, float[]> got) {
    return new JobWork() {
      @Override
      public Plan open() {
        return new Plan(3, 0);
      }

      @Override
      public OptionalLong next(long previous) {
        return previous + 1 < 3 ? OptionalLong.of(previous + 1) : OptionalLong.empty();
      }

      @Override
      public List<HostTensor> input(long item) {
        return List.of(HostTensor.ofFloats(new float[] {item, 1, -item}, 1, 3));
      }

      @Override
      public boolean accept(long item, List<HostTensor> outputs) {
        got.put(item, outputs.get(0).toFloatArray());
        return true;
      }

      @Override
      public void close() {}
    };
  }

  @Test
  void aJobOfAPackageRunsItsProgramOverEveryItem() {
    Map<Long, float[]> got = new ConcurrentHashMap<>();
    JobWork work = threeRows(got);
    try (CallbackRuntime callbacks = CallbackRuntime.create(testKit.system(), client)) {
      TestProbe<JobResult> result = testKit.createTestProbe();
      ActorRef<InferenceJob.Command> job = testKit.spawn(InferenceJob.create("affine", affine, callbacks, work, settings));
      job.tell(new InferenceJob.Start(result.getRef()));
      JobResult done = result.expectMessageClass(JobResult.class, WAIT);
      assertInstanceOf(JobResult.Completed.class, done, done.toString());
      assertEquals(3, ((JobResult.Completed) done).done());
      for (long i = 0; i < 3; i++) {
        assertArrayEquals(expected(i, 1, -i), got.get(i), 1e-6f, "item " + i);
      }
    }
  }

  @Test
  void aPackageWhoseCallbacksAreNotRegisteredIsRefusedBeforeAnythingRuns() {
    try (CallbackRuntime callbacks = CallbackRuntime.create(testKit.system(), client)) {
      XlaException e = assertThrows(XlaException.class, () -> ComputationActor.create(scoring, callbacks, settings));
      assertEquals(ErrorCode.FAILED_PRECONDITION, e.code());
      assertTrue(e.getMessage().startsWith("model package 'scoring' (") && e.getMessage().contains("calls host callbacks "
          + "[relu_b1, relu_b16, relu_b2, relu_b32, relu_b4, relu_b8] that are not registered on this CallbackRuntime"),
          e.getMessage());
      e = assertThrows(XlaException.class, () -> InferenceJob.create("scoring", scoring, Role.MAIN, 8, callbacks,
          threeRows(new ConcurrentHashMap<>()), settings));
      assertEquals(ErrorCode.FAILED_PRECONDITION, e.code());
      InvalidArgumentException none = assertThrows(InvalidArgumentException.class,
          () -> ComputationActor.create(scoring, null, settings));
      assertTrue(none.getMessage().contains("give the computation a CallbackRuntime"), none.getMessage());

      callbacks.register("relu_b1", List.of(dev.xlaactors.runtime.TensorType.of(dev.xlaactors.runtime.DType.F32, 1, 64)),
          null, (in, s) -> List.of(HostTensor.ofFloats(new float[64], 1, 64))).toCompletableFuture().join();
      e = assertThrows(XlaException.class, () -> ComputationActor.create(scoring, callbacks, settings));
      assertTrue(e.getMessage().contains("[relu_b16, relu_b2, relu_b32, relu_b4, relu_b8]"), e.getMessage());

      // Once every callback is there, the package runs (here relu_b2 returns 7s, so the callback's output is seen).
      for (int b : new int[] {2, 4, 8, 16, 32}) {
        int rows = b;
        float[] sevens = new float[rows * 64];
        java.util.Arrays.fill(sevens, 7f);
        callbacks.register("relu_b" + b, List.of(dev.xlaactors.runtime.TensorType.of(dev.xlaactors.runtime.DType.F32, b, 64)),
            null, (in, s) -> List.of(HostTensor.ofFloats(sevens, rows, 64))).toCompletableFuture().join();
      }
      ActorRef<ComputationActor.Command> computation =
          testKit.spawn(ComputationActor.create(scoring, Role.MAIN, 2, callbacks, settings));
      float[] y = run(computation, HostTensor.ofFloats(new float[2 * 64], 2, 64));
      float[] want = new float[2 * 64];
      java.util.Arrays.fill(want, 7f);
      assertArrayEquals(want, y);
      testKit.stop(computation);
    }
  }

  @Test
  void onlyATensorPackageHasADefaultProgram() {
    try (LoadedPackage lm = ModelPackage.open(resource("packages/causal-lm")).load(client.devices().get(0))) {
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
          () -> ComputationActor.create(lm, null, settings));
      assertTrue(e.getMessage().contains("model package 'toy-lm' (kind causal-lm) has no main program to default to"),
          e.getMessage());
      ActorRef<ComputationActor.Command> score = testKit.spawn(ComputationActor.create(lm, Role.SCORE, 1, null, settings));
      TestProbe<StatusReply<List<HostTensor>>> reply = testKit.createTestProbe();
      score.tell(new ComputationActor.Run(List.of(HostTensor.ofInts(new int[] {1, 2, 3, 0}, 1, 4)), reply.getRef()));
      StatusReply<List<HostTensor>> r = reply.expectMessageClass(StatusReply.class, WAIT);
      assertTrue(r.isSuccess(), () -> String.valueOf(r.getError()));
      assertEquals(List.of(1L, 4L, 8L), java.util.Arrays.stream(r.getValue().get(0).type().shape().dims()).boxed().toList());
      testKit.stop(score);
    }
  }
}
