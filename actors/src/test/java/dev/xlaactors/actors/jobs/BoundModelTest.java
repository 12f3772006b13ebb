package dev.xlaactors.actors.jobs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.DeviceRunHandle;
import dev.xlaactors.actors.RunHandle;
import dev.xlaactors.actors.RunMode;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.BoundProgram;
import dev.xlaactors.runtime.model.Model;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.pattern.StatusReply;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A bound model through the supervised layer, on the real plugin: y = relu(x[1,2048] . W[2048,2048]) with
 * W (16 MiB) bound once and relu a Java host callback, through CallbackRuntime, ComputationActor,
 * ComputationPool and InferenceJob; outputs left on the device; a device state donated each step.
 */
@SuppressWarnings("unchecked") // TestProbe.expectMessageClass(StatusReply.class) on a probe of StatusReply<List<...>>
class BoundModelTest {
  static final int D = 2048;
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static final Duration WAIT = Duration.ofSeconds(60);

  /** y = callback(x . w), with the callback named {@code callback}. */
  static String weighted(String callback) {
    return """
        func.func @main(%w: tensor<2048x2048xf32>, %x: tensor<1x2048xf32>) -> tensor<1x2048xf32> {
          %h = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<1x2048xf32>, tensor<2048x2048xf32>) -> tensor<1x2048xf32>
          %y = stablehlo.custom_call @xla_actors.host_callback(%h) {api_version = 4 : i32,
                 backend_config = {callback = "NAME"}, has_side_effect = true} : (tensor<1x2048xf32>) -> tensor<1x2048xf32>
          return %y : tensor<1x2048xf32>
        }
        """.replace("NAME", callback);
  }

  // A decoding-like step: the state (8 rows) gets row pos = relu(x . w); returns the state, y and the state's sum.
  static final String STATEFUL_STEP = """
      func.func @main(%w: tensor<2048x2048xf32>, %state: tensor<8x2048xf32> {tf.aliasing_output = 0 : i32},
                      %x: tensor<1x2048xf32>, %pos: tensor<i32>) -> (tensor<8x2048xf32>, tensor<1x2048xf32>, tensor<f32>) {
        %h = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<1x2048xf32>, tensor<2048x2048xf32>) -> tensor<1x2048xf32>
        %y = stablehlo.custom_call @xla_actors.host_callback(%h) {api_version = 4 : i32,
               backend_config = {callback = "relu"}, has_side_effect = true} : (tensor<1x2048xf32>) -> tensor<1x2048xf32>
        %zero = stablehlo.constant dense<0> : tensor<i32>
        %s = stablehlo.dynamic_update_slice %state, %y, %pos, %zero
            : (tensor<8x2048xf32>, tensor<1x2048xf32>, tensor<i32>, tensor<i32>) -> tensor<8x2048xf32>
        %init = stablehlo.constant dense<0.0> : tensor<f32>
        %total = stablehlo.reduce(%s init: %init) applies stablehlo.add across dimensions = [0, 1]
            : (tensor<8x2048xf32>, tensor<f32>) -> tensor<f32>
        return %s, %y, %total : tensor<8x2048xf32>, tensor<1x2048xf32>, tensor<f32>
      }
      """;

  private static XlaClient client;
  private static JobSettings settings;
  private static float[] w;
  private static Executable weighted;
  private CallbackRuntime callbacks;
  private final AtomicInteger reluCalls = new AtomicInteger();
  private volatile CountDownLatch holdArrived = new CountDownLatch(1);
  private volatile CompletableFuture<Void> holdRelease = new CompletableFuture<>();

  @BeforeAll
  static void start() {
    client = XlaClient.create();
    settings = JobSettings.create(testKit.system());
    w = random(D * D, 1, 0.03f);
    weighted = client.compile(weighted("relu"));
  }

  @AfterAll
  static void stop() {
    weighted.close();
    client.close();
    testKit.shutdownTestKit();
  }

  @BeforeEach
  void registerCallbacks() {
    callbacks = CallbackRuntime.create(testKit.system(), client);
    TensorType row = TensorType.of(DType.F32, 1, D);
    callbacks.register("relu", List.of(row), null, (in, s) -> {
      reluCalls.incrementAndGet();
      return List.of(HostTensor.ofFloats(relu(in.get(0).toFloatArray()), 1, D));
    }).toCompletableFuture().join();
    callbacks.register("hold", List.of(row), null, (in, s) -> {
      holdArrived.countDown();
      holdRelease.get(30, TimeUnit.SECONDS);
      return List.of(HostTensor.ofFloats(relu(in.get(0).toFloatArray()), 1, D));
    }).toCompletableFuture().join();
  }

  @AfterEach
  void closeCallbacks() throws InterruptedException {
    holdRelease.complete(null);
    long deadline = System.nanoTime() + 5_000_000_000L;
    while (HostCall.pendingCount() > 0 && System.nanoTime() < deadline) {
      Thread.sleep(5);
    }
    assertEquals(0, HostCall.pendingCount(), "host calls left pending");
    callbacks.close();
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
    float[] out = v.clone();
    for (int i = 0; i < out.length; i++) {
      out[i] = Math.max(0f, out[i]);
    }
    return out;
  }

  /** relu(x . w) in double precision. */
  static float[] expected(float[] x) {
    double[] y = new double[D];
    for (int i = 0; i < D; i++) {
      double xi = x[i];
      int base = i * D;
      for (int j = 0; j < D; j++) {
        y[j] += xi * w[base + j];
      }
    }
    float[] out = new float[D];
    for (int j = 0; j < D; j++) {
      out[j] = (float) Math.max(0, y[j]);
    }
    return out;
  }

  static HostTensor row(float[] x) {
    return HostTensor.ofFloats(x, 1, D);
  }

  private static Model load(Executable exe) {
    return Model.load(exe, List.of("w", "x"), Map.of("w", HostTensor.ofFloats(w, D, D)), client.devices().get(0));
  }

  @Test
  void callbackRuntimeRunsTheBoundModelWithWUploadedOnce() {
    long uploads = client.uploadCount();
    long bytes = client.uploadedBytes();
    try (Model model = load(weighted)) {
      assertEquals(1, client.uploadCount() - uploads, "W uploaded once, when the model is loaded");
      for (int run = 0; run < 5; run++) {
        float[] x = random(D, 10 + run, 1f);
        List<HostTensor> y = callbacks.run(model, List.of(Argument.of(row(x))));
        assertArrayEquals(expected(x), y.get(0).toFloatArray(), 1e-3f);
      }
      float[] x = random(D, 20, 1f);
      RunHandle started = callbacks.start(model, List.of(Argument.of(row(x))));
      assertArrayEquals(expected(x), started.result().toCompletableFuture().join().get(0).toFloatArray(), 1e-3f);
    }
    assertEquals(7, client.uploadCount() - uploads, "W once, then one x per run");
    assertEquals(4L * D * D + 6L * 4 * D, client.uploadedBytes() - bytes, "W's 16 MiB were sent once");
    assertEquals(6, reluCalls.get());
  }

  @Test
  void outputsLeftOnTheDeviceFeedTheNextRunWithoutAHostRoundTrip() {
    try (Model model = load(weighted)) {
      float[] x = random(D, 30, 1f);
      List<DeviceBuffer> first = callbacks.runOnDevice(model, List.of(Argument.of(row(x))));
      long uploads = client.uploadCount();
      DeviceRunHandle second = callbacks.startOnDevice(model, List.of(Argument.of(first.get(0))));
      List<DeviceBuffer> out = second.result().toCompletableFuture().join();
      assertEquals(uploads, client.uploadCount(), "nothing uploaded for the second run");
      assertTrue(!first.get(0).isClosed(), "an input passed with Argument.of stays the caller's");
      assertArrayEquals(expected(expected(x)), out.get(0).toHost().toFloatArray(), 1e-3f);
      first.forEach(DeviceBuffer::close);
      out.forEach(DeviceBuffer::close);
    }
  }

  @Test
  void aCancelledDeviceRunGivesNoBuffersAndClosingTheModelMidRunIsSafe() throws Exception {
    try (Executable held = client.compile(weighted("hold"))) {
      Model model = load(held);
      float[] x = random(D, 40, 1f);
      DeviceRunHandle cancelled = callbacks.startOnDevice(model, List.of(Argument.of(row(x))));
      assertTrue(holdArrived.await(30, TimeUnit.SECONDS));
      cancelled.cancel("test");
      Throwable why = assertThrows(Exception.class, () -> cancelled.result().toCompletableFuture().get(30, TimeUnit.SECONDS));
      assertInstanceOf(XlaException.class, why.getCause());
      assertEquals(ErrorCode.CANCELLED, ((XlaException) why.getCause()).code(), why.getCause().getMessage());
      holdRelease.complete(null);

      // Closing the model while a run is in its callback: that run finishes with the right values.
      holdArrived = new CountDownLatch(1);
      holdRelease = new CompletableFuture<>();
      RunHandle inFlight = callbacks.start(model, List.of(Argument.of(row(x))));
      assertTrue(holdArrived.await(30, TimeUnit.SECONDS));
      model.close();
      XlaException refused = assertThrows(XlaException.class, () -> callbacks.run(model, List.of(Argument.of(row(x)))));
      assertEquals(ErrorCode.FAILED_PRECONDITION, refused.code());
      assertTrue(refused.getMessage().contains("model '" + model.name() + "' is closed"), refused.getMessage());
      holdRelease.complete(null);
      assertArrayEquals(expected(x), inFlight.result().toCompletableFuture().get(30, TimeUnit.SECONDS).get(0).toFloatArray(), 1e-3f);
    }
  }

  @Test
  void computationActorAndPoolServeOneBoundModel() {
    long uploads = client.uploadCount();
    try (Model model = load(weighted)) {
      ActorRef<ComputationActor.Command> computation = testKit.spawn(ComputationActor.create(model, callbacks, settings));
      TestProbe<StatusReply<List<HostTensor>>> host = testKit.createTestProbe();
      TestProbe<StatusReply<List<DeviceBuffer>>> device = testKit.createTestProbe();
      float[] x = random(D, 50, 1f);
      computation.tell(new ComputationActor.Run(List.of(row(x)), host.getRef()));
      StatusReply<List<HostTensor>> reply = host.expectMessageClass(StatusReply.class, WAIT);
      assertTrue(reply.isSuccess(), () -> "run failed: " + reply);
      assertArrayEquals(expected(x), reply.getValue().get(0).toFloatArray(), 1e-3f);
      computation.tell(new ComputationActor.RunOnDevice(List.of(Argument.of(row(x))), device.getRef()));
      StatusReply<List<DeviceBuffer>> onDevice = device.expectMessageClass(StatusReply.class, WAIT);
      assertTrue(onDevice.isSuccess(), () -> "run failed: " + onDevice);
      DeviceBuffer y = onDevice.getValue().get(0);
      computation.tell(new ComputationActor.RunArguments(List.of(Argument.of(y)), host.getRef()));
      StatusReply<List<HostTensor>> chained = host.expectMessageClass(StatusReply.class, WAIT);
      assertTrue(chained.isSuccess(), () -> "run failed: " + chained);
      assertArrayEquals(expected(expected(x)), chained.getValue().get(0).toFloatArray(), 1e-3f);
      y.close();
      testKit.stop(computation);

      ActorRef<ComputationActor.Command> pool = testKit.spawn(ComputationPool.create(model, callbacks, settings));
      List<float[]> inputs = new ArrayList<>();
      for (int i = 0; i < 6; i++) {
        inputs.add(random(D, 60 + i, 1f));
        pool.tell(new ComputationActor.Run(List.of(row(inputs.get(i))), host.getRef()));
      }
      List<float[]> got = new ArrayList<>();
      for (int i = 0; i < 6; i++) {
        StatusReply<List<HostTensor>> r = host.expectMessageClass(StatusReply.class, WAIT);
        assertTrue(r.isSuccess(), () -> "run failed: " + r);
        got.add(r.getValue().get(0).toFloatArray());
      }
      for (float[] in : inputs) { // replies may come in any order: each expected output is among them
        float[] want = expected(in);
        assertTrue(got.stream().anyMatch(g -> maxDiff(g, want) < 1e-3f), "an output for each input");
      }
      testKit.stop(pool);
    }
    assertEquals(1 + 8, client.uploadCount() - uploads, "W once; x for each of the 8 host-tensor requests");
  }

  static float maxDiff(float[] a, float[] b) {
    float m = 0;
    for (int i = 0; i < a.length; i++) {
      m = Math.max(m, Math.abs(a[i] - b[i]));
    }
    return m;
  }

  private JobResult runJob(String name, Model model, JobWork work) {
    TestProbe<JobResult> result = testKit.createTestProbe();
    ActorRef<InferenceJob.Command> job = testKit.spawn(InferenceJob.create(name, model, callbacks, work, settings));
    job.tell(new InferenceJob.Start(result.getRef()));
    return result.expectMessageClass(JobResult.class, WAIT);
  }

  @Test
  void anInferenceJobRunsTheBoundModelStepByStep() {
    long uploads = client.uploadCount();
    float[] x0 = random(D, 70, 1f);
    List<float[]> seen = new ArrayList<>();
    try (Model model = load(weighted)) {
      Generation generation = Generation.create(List.of(row(x0)), 4, (step, outputs) -> {
        float[] y = outputs.get(0).toFloatArray();
        seen.add(y);
        return Optional.of(List.of(row(y)));
      });
      JobResult done = runJob("bound-steps", model, generation);
      assertInstanceOf(JobResult.Completed.class, done, done.toString());
    }
    float[] expected = x0;
    for (float[] y : seen) {
      expected = expected(expected);
      assertArrayEquals(expected, y, 1e-3f);
    }
    assertEquals(4, seen.size());
    assertEquals(1 + 4, client.uploadCount() - uploads, "W once, then one x per step");
  }

  @Test
  void aGenerationKeepsItsStateOnTheDeviceDonatedEachStep() {
    float[] x0 = random(D, 80, 1f);
    List<Float> totals = new ArrayList<>();
    List<float[]> ys = new ArrayList<>();
    try (Executable exe = client.compile(STATEFUL_STEP);
        Model model = Model.load(exe, List.of("w", "state", "x", "pos"), Map.of("w", HostTensor.ofFloats(w, D, D)),
            client.devices().get(0))) {
      assertEquals(java.util.Set.of("state"), model.donatableInputs());
      DeviceBuffer state = client.upload(HostTensor.zeros(TensorType.of(DType.F32, 8, D)));
      long uploads = client.uploadCount();
      Generation generation = Generation.withDeviceState(List.of(state), List.of(row(x0), HostTensor.scalar(0)), 6,
          (step, outputs) -> {
            float[] y = outputs.get(0).toFloatArray();
            ys.add(y);
            totals.add(outputs.get(1).toFloatArray()[0]);
            return Optional.of(List.of(row(y), HostTensor.scalar((int) step + 1)));
          });
      JobResult done = runJob("stateful", model, generation);
      assertInstanceOf(JobResult.Completed.class, done, done.toString());
      assertTrue(state.isDonated(), "the first state was donated to step 0");
      assertEquals(6 * 2, client.uploadCount() - uploads, "x and pos per step; the state never crossed");
    }
    // Each step's total is the sum of every row written so far: the state persisted on the device.
    double running = 0;
    float[] x = x0;
    for (int step = 0; step < 6; step++) {
      x = expected(x);
      assertArrayEquals(x, ys.get(step), 1e-3f);
      for (float v : x) {
        running += v;
      }
      assertEquals(running, totals.get(step), 1e-2 * Math.max(1, Math.abs(running)), "total after step " + step);
    }
  }

  @Test
  void aSegmentedRunReadsAWeightKeptOnTheDeviceWithoutUploadingIt() {
    dev.xlaactors.graph.GraphBuilder b = new dev.xlaactors.graph.GraphBuilder("weighted_segmented");
    dev.xlaactors.graph.Value wv = b.parameter(TensorType.of(DType.F32, D, D));
    dev.xlaactors.graph.Value xv = b.parameter(TensorType.of(DType.F32, 1, D));
    dev.xlaactors.runtime.HostCallback relu = new dev.xlaactors.runtime.HostCallback("relu", List.of(TensorType.of(DType.F32, 1, D)),
        null, (in, s) -> List.of(HostTensor.ofFloats(relu(in.get(0).toFloatArray()), 1, D)));
    dev.xlaactors.graph.Value y = b.hostCall(relu, b.matmul(xv, wv)).get(0);
    try (BoundProgram program = callbacks.compile(b.build(y), RunMode.SEGMENTED);
        DeviceBuffer weights = client.upload(HostTensor.ofFloats(w, D, D))) {
      for (int run = 0; run < 3; run++) {
        float[] x = random(D, 90 + run, 1f);
        long uploads = client.uploadCount();
        long uploaded = client.uploadedBytes();
        List<HostTensor> result = callbacks.run(program, List.of(Argument.of(weights), Argument.of(row(x))));
        assertArrayEquals(expected(x), result.get(0).toFloatArray(), 1e-3f);
        assertEquals(1, client.uploadCount() - uploads, "x only: the weight is read where it lives");
        assertEquals(4L * D, client.uploadedBytes() - uploaded, "x's 8 KiB, not W's 16 MiB");
      }
      assertTrue(!weights.isClosed(), "the weight stays the caller's");
      XlaException donated = assertThrows(XlaException.class,
          () -> callbacks.run(program, List.of(Argument.donated(weights), Argument.of(row(random(D, 99, 1f))))));
      assertTrue(donated.getMessage().contains("was not segmented to donate it"), donated.getMessage());
    }
  }
}
