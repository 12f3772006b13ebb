package dev.xlaactors.actors.jobs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.SegmentationOptions;
import dev.xlaactors.graph.SegmentedProgram;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.SegmentedModel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.pattern.StatusReply;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A segmented model (a Java callback between two stages, w bound once) served by a ComputationPool and
 * run step by step by an InferenceJob whose Generation keeps its state on the device, donated each step.
 */
@SuppressWarnings("unchecked") // TestProbe.expectMessageClass(StatusReply.class) on a probe of StatusReply<List<...>>
class SegmentedModelJobTest {
  static final int D = 256;
  static final TensorType ROW = TensorType.of(DType.F32, 1, D);
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static final Duration WAIT = Duration.ofSeconds(60);
  private static final HostCallback RELU = new HostCallback("segjob_relu", List.of(ROW), null,
      (in, s) -> List.of(HostTensor.ofFloats(relu(in.get(0).toFloatArray()), 1, D)));
  private static XlaClient client;
  private static CallbackRuntime callbacks;
  private static JobSettings settings;
  private static float[] w;

  @BeforeAll
  static void start() {
    client = XlaClient.create();
    callbacks = CallbackRuntime.create(testKit.system(), client);
    callbacks.register(RELU).toCompletableFuture().join();
    settings = JobSettings.create(testKit.system());
    w = random(D * D, 1, 0.06f);
  }

  @AfterAll
  static void stop() {
    callbacks.close();
    client.close();
    testKit.shutdownTestKit();
  }

  static float[] random(int n, long seed, float scale) {
    Random r = new Random(seed);
    float[] v = new float[n];
    for (int i = 0; i < n; i++) {
      v[i] = (r.nextFloat() * 2 - 1) * scale;
    }
    return v;
  }

  static float[] relu(float[] v) {
    float[] r = v.clone();
    for (int i = 0; i < r.length; i++) {
      r[i] = Math.max(0, r[i]);
    }
    return r;
  }

  /** relu(x . w), in Java. */
  static float[] expected(float[] x) {
    float[] y = new float[D];
    for (int k = 0; k < D; k++) {
      for (int j = 0; j < D; j++) {
        y[j] += x[k] * w[k * D + j];
      }
    }
    return relu(y);
  }

  /** y = relu(x . w): stage, host call. */
  static Graph layer() {
    GraphBuilder b = new GraphBuilder("segjob_layer");
    Value wv = b.parameter(TensorType.of(DType.F32, D, D));
    Value x = b.parameter(ROW);
    return b.build(b.hostCall(RELU, b.matmul(x, wv)).get(0));
  }

  /** (state + y, y, sum(state + y)) with y = relu(x . w); the state is donatable. */
  static Graph statefulStep() {
    GraphBuilder b = new GraphBuilder("segjob_step");
    Value wv = b.parameter(TensorType.of(DType.F32, D, D));
    Value state = b.parameter(ROW);
    Value x = b.parameter(ROW);
    Value y = b.hostCall(RELU, b.matmul(x, wv)).get(0);
    Value next = b.add(state, y);
    return b.build(next, y, b.reduceSum(next));
  }

  @Test
  void aPoolServesOneSegmentedModelWithItsWeightUploadedOnce() {
    long uploads = client.uploadCount();
    try (SegmentedProgram program = new SegmentedProgram(layer().segment(SegmentationOptions.defaults()),
            SegmentedProgram.Placement.on(client));
        SegmentedModel model = SegmentedModel.load(program, List.of("w", "x"), Map.of("w", HostTensor.ofFloats(w, D, D)),
            client.devices().get(0))) {
      ActorRef<ComputationActor.Command> pool = testKit.spawn(ComputationPool.create(model, callbacks, settings));
      TestProbe<StatusReply<List<HostTensor>>> host = testKit.createTestProbe();
      List<float[]> inputs = new ArrayList<>();
      for (int i = 0; i < 6; i++) {
        inputs.add(random(D, 10 + i, 1f));
        pool.tell(new ComputationActor.Run(List.of(HostTensor.ofFloats(inputs.get(i), 1, D)), host.getRef()));
      }
      List<float[]> got = new ArrayList<>();
      for (int i = 0; i < 6; i++) {
        StatusReply<List<HostTensor>> r = host.expectMessageClass(StatusReply.class, WAIT);
        assertTrue(r.isSuccess(), () -> "run failed: " + r);
        got.add(r.getValue().get(0).toFloatArray());
      }
      for (float[] in : inputs) { // replies come in any order: each expected output is among them
        float[] want = expected(in);
        assertTrue(got.stream().anyMatch(g -> BoundModelTest.maxDiff(g, want) < 1e-4f), "an output for each input");
      }
      // On the device: the reply's buffer is the requester's.
      TestProbe<StatusReply<List<DeviceBuffer>>> device = testKit.createTestProbe();
      pool.tell(new ComputationActor.RunOnDevice(List.of(dev.xlaactors.runtime.model.Argument.of(
          HostTensor.ofFloats(inputs.get(0), 1, D))), device.getRef()));
      StatusReply<List<DeviceBuffer>> onDevice = device.expectMessageClass(StatusReply.class, WAIT);
      assertTrue(onDevice.isSuccess(), () -> "run failed: " + onDevice);
      assertArrayEquals(expected(inputs.get(0)), onDevice.getValue().get(0).toHost().toFloatArray(), 1e-4f);
      onDevice.getValue().forEach(DeviceBuffer::close);
      testKit.stop(pool);
    }
    // w once; x per request; the callback's result (the output) goes up only for the run on the device.
    assertEquals(1 + 7 + 1, client.uploadCount() - uploads);
  }

  @Test
  void anInferenceJobRunsASegmentedStepWithItsStateDonatedEachStep() {
    float[] x0 = random(D, 20, 1f);
    List<float[]> ys = new ArrayList<>();
    List<Float> totals = new ArrayList<>();
    try (SegmentedProgram program = new SegmentedProgram(statefulStep().segment(SegmentationOptions.defaults().donating(1)),
            SegmentedProgram.Placement.on(client));
        SegmentedModel model = SegmentedModel.load(program, List.of("w", "state", "x"),
            Map.of("w", HostTensor.ofFloats(w, D, D)), client.devices().get(0))) {
      DeviceBuffer state = client.upload(HostTensor.zeros(ROW));
      long uploads = client.uploadCount();
      Generation generation = Generation.withDeviceState(List.of(state), List.of(HostTensor.ofFloats(x0, 1, D)), 5,
          (step, outputs) -> {
            float[] y = outputs.get(0).toFloatArray();
            ys.add(y);
            totals.add(outputs.get(1).toFloatArray()[0]);
            return Optional.of(List.of(HostTensor.ofFloats(y, 1, D)));
          });
      TestProbe<JobResult> result = testKit.createTestProbe();
      ActorRef<InferenceJob.Command> job =
          testKit.spawn(InferenceJob.create("segmented-steps", model, callbacks, generation, settings));
      job.tell(new InferenceJob.Start(result.getRef()));
      JobResult done = result.expectMessageClass(JobResult.class, WAIT);
      assertInstanceOf(JobResult.Completed.class, done, done.toString());
      assertTrue(state.isDonated(), "the first state was donated to step 0");
      // x and the callback's result per step (y, handed back, is the callback's own upload): never w or the state.
      assertEquals(5 * 2, client.uploadCount() - uploads);
    }
    double running = 0;
    float[] x = x0;
    for (int step = 0; step < 5; step++) {
      x = expected(x);
      assertArrayEquals(x, ys.get(step), 1e-4f);
      for (float v : x) {
        running += v;
      }
      assertEquals(running, totals.get(step), 1e-3 * Math.max(1, Math.abs(running)), "total after step " + step);
    }
  }
}
