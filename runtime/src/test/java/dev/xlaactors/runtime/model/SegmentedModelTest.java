package dev.xlaactors.runtime.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.SegmentationOptions;
import dev.xlaactors.graph.SegmentedProgram;
import dev.xlaactors.graph.SegmentedProgram.DeviceResult;
import dev.xlaactors.graph.SegmentedProgram.HostCallInvoker;
import dev.xlaactors.graph.SegmentedProgram.Placement;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.RunContext;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Segmented programs with bound parameters on the real plugin: weights uploaded once and read by every
 * stage, outputs left on the device, donation of an input its stage aliases, and the refusals.
 */
class SegmentedModelTest {
  static final int D = 256;
  static final TensorType MATRIX = TensorType.of(DType.F32, D, D);
  static final TensorType ROW = TensorType.of(DType.F32, 1, D);
  static final HostCallback RELU = new HostCallback("seg_relu", List.of(ROW), null, (in, s) -> {
    float[] v = in.get(0).toFloatArray();
    for (int i = 0; i < v.length; i++) {
      v[i] = Math.max(0, v[i]);
    }
    return List.of(HostTensor.ofFloats(v, 1, D));
  });

  private static XlaClient client;

  @BeforeAll
  static void open() {
    client = XlaClient.create();
  }

  @AfterAll
  static void close() {
    client.close();
  }

  /** z = relu(x . w) . w, and h = relu(x . w): both stages read w. */
  static Graph twoLayers() {
    GraphBuilder b = new GraphBuilder("two_layers");
    Value w = b.parameter(MATRIX);
    Value x = b.parameter(ROW);
    Value h = b.hostCall(RELU, b.matmul(x, w)).get(0);
    return b.build(b.matmul(h, w), h);
  }

  /** state' = state + relu(x . w + bias): the state is read by the last stage only, which can alias it. */
  static Graph accumulate() {
    GraphBuilder b = new GraphBuilder("accumulate");
    Value w = b.parameter(MATRIX);
    Value bias = b.parameter(ROW);
    Value state = b.parameter(ROW);
    Value x = b.parameter(ROW);
    Value r = b.hostCall(RELU, b.add(b.matmul(x, w), bias)).get(0);
    return b.build(b.add(state, r));
  }

  static float[] random(int n, long seed) {
    java.util.Random r = new java.util.Random(seed);
    float[] v = new float[n];
    for (int i = 0; i < n; i++) {
      v[i] = r.nextFloat() * 2 - 1;
    }
    return v;
  }

  /** The fused program on host tensors, its host call answered by the same function. */
  static List<HostTensor> fused(Graph graph, HostTensor... inputs) {
    return fused(client, graph, inputs);
  }

  /** As {@link #fused(Graph, HostTensor...)}, on {@code on} (a CPU client: the host call is the CPU plugin's). */
  static List<HostTensor> fused(XlaClient on, Graph graph, HostTensor... inputs) {
    try (Executable exe = graph.compile(on);
        RunContext context = RunContext.withHostCalls(on.plugin(), 1,
            call -> {
              try {
                call.complete(RELU.function().apply(call.inputs(), null));
              } catch (Exception e) {
                call.fail(ErrorCode.INTERNAL, e.toString());
              }
            }, Duration.ofSeconds(30))) {
      return exe.run(List.of(inputs), context);
    }
  }

  static HostTensor row(float[] v) {
    return HostTensor.ofFloats(v, 1, D);
  }

  @Test
  void boundWeightsAreUploadedOnceReadByEveryStageAndMatchTheFusedProgram() {
    Graph graph = twoLayers();
    float[] w = random(D * D, 1);
    try (SegmentedProgram program = new SegmentedProgram(graph.segment(SegmentationOptions.defaults()), Placement.on(client))) {
      assertEquals(2, program.graph().stages().size(), program.graph().describe());
      for (var stage : program.graph().stages()) {
        assertTrue(stage.inputTypes().contains(MATRIX), "stage reads w: " + stage);
      }
      long uploads = client.uploadCount();
      long bytes = client.uploadedBytes();
      try (SegmentedModel model = SegmentedModel.load(program, List.of("w", "x"), Map.of("w", HostTensor.ofFloats(w, D, D)),
          client.devices().get(0))) {
        assertEquals(1, client.uploadCount() - uploads, "w uploaded once when the model is made");
        assertEquals(4L * D * D, client.uploadedBytes() - bytes);
        assertEquals(List.of("x"), model.inputNames());
        for (int run = 0; run < 3; run++) {
          float[] x = random(D, 10 + run);
          List<HostTensor> expected = fused(graph, HostTensor.ofFloats(w, D, D), row(x));
          uploads = client.uploadCount();
          bytes = client.uploadedBytes();
          SegmentedProgram.Result result = model.run(List.of(Argument.of(row(x))), HostCallInvoker.direct());
          assertArrayEquals(expected.get(0).toFloatArray(), result.outputs().get(0).toFloatArray(), 1e-3f);
          assertArrayEquals(expected.get(1).toFloatArray(), result.outputs().get(1).toFloatArray(), 1e-5f);
          assertEquals(2, client.uploadCount() - uploads, "x and the callback's result, never w");
          assertEquals(2L * 4 * D, client.uploadedBytes() - bytes, "2 KiB per run, not w's 256 KiB");
          assertEquals(2L * 4 * D, result.stats().bytesToDevice());
        }
        assertEquals(0, program.openBuffers());
      }
    }
  }

  @Test
  void aStagePlacedOnAnotherDeviceReadsACopyMadeOnceWhenTheModelIsMade() {
    int devices = client.devices().size();
    org.junit.jupiter.api.Assumptions.assumeTrue(devices >= 2, "the CPU client reports one device: " + client.devices());
    Graph graph = twoLayers();
    float[] w = random(D * D, 8);
    Placement spread = stage -> SegmentedProgram.Target.of(client, stage.index() % 2); // stage 0 on device 0, 1 on 1
    try (SegmentedProgram program = new SegmentedProgram(graph.segment(SegmentationOptions.defaults()), spread);
        SegmentedModel model = SegmentedModel.load(program, List.of("w", "x"), Map.of("w", HostTensor.ofFloats(w, D, D)),
            client.devices().get(0))) {
      for (int run = 0; run < 3; run++) {
        float[] x = random(D, 50 + run);
        List<HostTensor> expected = fused(graph, HostTensor.ofFloats(w, D, D), row(x));
        SegmentedProgram.Result result = model.run(List.of(Argument.of(row(x))), HostCallInvoker.direct());
        assertArrayEquals(expected.get(0).toFloatArray(), result.outputs().get(0).toFloatArray(), 1e-3f);
        assertEquals(1, result.stats().stageExecutions().get(1).target().device().index());
        assertEquals(0, result.stats().deviceMoves(), "stage 1 read the copy of w made at load, not a copy per run");
      }
    }
    // Without the model, the same program copies w to device 1 on every run.
    try (SegmentedProgram program = new SegmentedProgram(graph.segment(SegmentationOptions.defaults()), spread);
        DeviceBuffer weights = client.upload(HostTensor.ofFloats(w, D, D))) {
      SegmentedProgram.Result result = program.runArguments(List.of(Argument.of(weights), Argument.of(row(random(D, 60)))),
          HostCallInvoker.direct());
      assertEquals(1, result.stats().deviceMoves(), result.stats().toString());
    }
  }

  @Test
  void outputsStayOnTheDeviceAndFeedTheNextRunWithoutAHostRoundTrip() {
    Graph graph = twoLayers();
    float[] w = random(D * D, 2);
    try (SegmentedProgram program = new SegmentedProgram(graph.segment(SegmentationOptions.defaults()), Placement.on(client));
        DeviceBuffer weights = client.upload(HostTensor.ofFloats(w, D, D));
        SegmentedModel model = SegmentedModel.bind(program, List.of("w", "x"), Map.of("w", weights))) {
      float[] x = random(D, 20);
      DeviceResult first = model.execute(List.of(Argument.of(row(x))), HostCallInvoker.direct());
      assertEquals(2, first.outputs().size());
      List<HostTensor> expected1 = fused(graph, HostTensor.ofFloats(w, D, D), row(x));
      long uploads = client.uploadCount();
      // z of the first run is the second run's x: read where it lives, so only the callback's result goes up.
      DeviceResult second = model.execute(List.of(Argument.of(first.outputs().get(0))), HostCallInvoker.direct());
      assertEquals(1, client.uploadCount() - uploads, "only the callback's result, which is also output h, handed over");
      assertEquals(4L * D, second.stats().bytesToHost(), "only the callback's input came down");
      List<HostTensor> expected2 = fused(graph, HostTensor.ofFloats(w, D, D), expected1.get(0));
      assertArrayEquals(expected1.get(0).toFloatArray(), first.outputs().get(0).toHost().toFloatArray(), 1e-3f);
      assertArrayEquals(expected1.get(1).toFloatArray(), first.outputs().get(1).toHost().toFloatArray(), 1e-5f);
      assertArrayEquals(expected2.get(0).toFloatArray(), second.outputs().get(0).toHost().toFloatArray(), 1e-2f);
      assertEquals(0, program.openBuffers(), "the outputs are the caller's, not the run's");
      first.outputs().forEach(DeviceBuffer::close);
      second.outputs().forEach(DeviceBuffer::close);
      assertFalse(weights.isClosed(), "the bound buffer stays its owner's");
    }
  }

  @Test
  void aDonatedStateIsUpdatedInPlaceAndNamesItsRunWhenUsedAfter() {
    Graph graph = accumulate();
    SegmentationOptions donating = SegmentationOptions.defaults().donating(2);
    float[] w = random(D * D, 3);
    float[] bias = random(D, 4);
    try (SegmentedProgram program = new SegmentedProgram(graph.segment(donating), Placement.on(client));
        SegmentedModel model = SegmentedModel.load(program, List.of("w", "bias", "state", "x"),
            Map.of("w", HostTensor.ofFloats(w, D, D), "bias", row(bias)), client.devices().get(0))) {
      assertEquals(List.of("state", "x"), model.inputNames());
      assertEquals(java.util.Set.of("state"), model.donatableInputs());
      assertTrue(program.graph().stages().get(1).stablehlo().contains("tf.aliasing_output = 0"),
          program.graph().stages().get(1).stablehlo());
      DeviceBuffer state = client.upload(row(new float[D]));
      float[] expected = new float[D];
      for (int step = 0; step < 5; step++) {
        float[] x = random(D, 30 + step);
        HostTensor reference = fused(graph, HostTensor.ofFloats(w, D, D), row(bias), row(expected), row(x)).get(0);
        long pointer = state.unsafeDevicePointer();
        DeviceResult r = model.execute(List.of(Argument.donated(state), Argument.of(row(x))), HostCallInvoker.direct());
        assertTrue(state.isDonated(), "step " + step + " consumed the state");
        assertEquals(pointer, r.outputs().get(0).unsafeDevicePointer(), "the new state is written in the old one's memory");
        DeviceBuffer used = state;
        XlaException after = assertThrows(XlaException.class, used::toHost);
        assertTrue(after.getMessage().contains("donated to run " + (step + 1) + " of segmented model 'accumulate'"),
            after.getMessage());
        state = r.outputs().get(0);
        expected = reference.toFloatArray();
        assertArrayEquals(expected, state.toHost().toFloatArray(), 1e-3f);
      }
      // Passed without donation, the state is copied (PJRT) and stays valid.
      DeviceResult kept = model.execute(List.of(Argument.of(state), Argument.of(row(random(D, 40)))), HostCallInvoker.direct());
      assertFalse(state.isClosed());
      kept.outputs().forEach(DeviceBuffer::close);
      state.close();
      assertEquals(0, program.openBuffers());
    }
  }

  @Test
  void closingTheModelMidRunLetsTheRunFinishWithItsWeightAndRefusesNewRuns() throws Exception {
    java.util.concurrent.CountDownLatch arrived = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
    HostCallback hold = new HostCallback("seg_hold", List.of(ROW), null, (in, s) -> {
      arrived.countDown();
      release.await(30, java.util.concurrent.TimeUnit.SECONDS);
      return RELU.function().apply(in, s);
    });
    GraphBuilder b = new GraphBuilder("held");
    Value wv = b.parameter(MATRIX);
    Value x = b.parameter(ROW);
    Graph graph = b.build(b.matmul(b.hostCall(hold, b.matmul(x, wv)).get(0), wv)); // w read after the callback
    float[] w = random(D * D, 9);
    float[] xv = random(D, 10);
    List<HostTensor> expected = fused(twoLayers(), HostTensor.ofFloats(w, D, D), row(xv));
    java.util.concurrent.ExecutorService runner = java.util.concurrent.Executors.newSingleThreadExecutor();
    try (SegmentedProgram program = new SegmentedProgram(graph.segment(SegmentationOptions.defaults()), Placement.on(client))) {
      DeviceBuffer weights = client.upload(HostTensor.ofFloats(w, D, D));
      SegmentedModel model = SegmentedModel.bind(program, List.of("w", "x"), Map.of("w", weights));
      java.util.concurrent.Future<float[]> inFlight = runner.submit(
          () -> model.run(List.of(Argument.of(row(xv))), HostCallInvoker.direct()).outputs().get(0).toFloatArray());
      assertTrue(arrived.await(30, java.util.concurrent.TimeUnit.SECONDS), "the run reached its callback");
      model.close();
      weights.close(); // the caller's handle too: the run in flight still holds the model's share
      XlaException refused = assertThrows(XlaException.class,
          () -> model.run(List.of(Argument.of(row(xv))), HostCallInvoker.direct()));
      assertEquals(ErrorCode.FAILED_PRECONDITION, refused.code());
      assertTrue(refused.getMessage().startsWith("segmented model 'held' is closed"), refused.getMessage());
      release.countDown();
      // The second stage reads w after the close: the run's reference kept it.
      assertArrayEquals(expected.get(0).toFloatArray(), inFlight.get(30, java.util.concurrent.TimeUnit.SECONDS), 1e-3f);
      assertEquals(0, program.openBuffers());
    } finally {
      runner.shutdownNow();
    }
  }

  @Test
  void donationAndBindingMistakesAreRefusedNamingTheBuffer() {
    Graph graph = accumulate();
    float[] w = random(D * D, 5);
    List<String> names = List.of("w", "bias", "state", "x");
    try (SegmentedProgram donating = new SegmentedProgram(graph.segment(SegmentationOptions.defaults().donating(2)),
            Placement.on(client));
        SegmentedProgram plain = new SegmentedProgram(graph.segment(SegmentationOptions.defaults()), Placement.on(client));
        DeviceBuffer weights = client.upload(HostTensor.ofFloats(w, D, D));
        DeviceBuffer bias = client.upload(row(random(D, 6)));
        SegmentedModel model = SegmentedModel.bind(donating, names, Map.of("w", weights, "bias", bias));
        SegmentedModel plainModel = SegmentedModel.bind(plain, names, Map.of("w", weights, "bias", bias))) {
      HostTensor x = row(random(D, 7));
      // Donating the bound bias as the state: refused, naming the parameter it is bound to.
      InvalidArgumentException bound = assertThrows(InvalidArgumentException.class,
          () -> model.execute(List.of(Argument.donated(bias), Argument.of(x)), HostCallInvoker.direct()));
      assertTrue(bound.getMessage().contains("donates the buffer bound to parameter 'bias'"), bound.getMessage());
      assertFalse(bias.isClosed());
      // A program not segmented to donate the state: refused naming the input.
      try (DeviceBuffer state = client.upload(row(new float[D]))) {
        InvalidArgumentException notDonatable = assertThrows(InvalidArgumentException.class,
            () -> plainModel.execute(List.of(Argument.donated(state), Argument.of(x)), HostCallInvoker.direct()));
        assertTrue(notDonatable.getMessage().contains("input 0 'state'") && notDonatable.getMessage().contains("donating(2)"),
            notDonatable.getMessage());
        assertFalse(state.isClosed());
        // Donating the per-request x, which the program does not donate.
        InvalidArgumentException xDonated = assertThrows(InvalidArgumentException.class,
            () -> model.execute(List.of(Argument.of(state), Argument.donated(state)), HostCallInvoker.direct()));
        assertTrue(xDonated.getMessage().contains("input 1 'x'"), xDonated.getMessage());
      }
      // Binding a weight to the donated parameter.
      InvalidArgumentException bindDonated = assertThrows(InvalidArgumentException.class,
          () -> SegmentedModel.bind(donating, names, Map.of("w", weights, "state", bias)));
      assertTrue(bindDonated.getMessage().contains("bound buffer 'state'") && bindDonated.getMessage().contains("donate"),
          bindDonated.getMessage());
      // Wrong type, unknown name.
      InvalidArgumentException wrongType = assertThrows(InvalidArgumentException.class,
          () -> SegmentedModel.bind(plain, names, Map.of("w", bias)));
      assertTrue(wrongType.getMessage().contains("bound buffer 'w'") && wrongType.getMessage().contains("expected " + MATRIX),
          wrongType.getMessage());
      InvalidArgumentException unknown = assertThrows(InvalidArgumentException.class,
          () -> SegmentedModel.bind(plain, names, Map.of("weights", weights)));
      assertTrue(unknown.getMessage().contains("'weights'"), unknown.getMessage());
      // Closed model.
      plainModel.close();
      XlaException closed = assertThrows(XlaException.class,
          () -> plainModel.run(List.of(Argument.of(row(new float[D])), Argument.of(x)), HostCallInvoker.direct()));
      assertEquals(ErrorCode.FAILED_PRECONDITION, closed.code());
    }
    // Segmenting to donate what cannot be donated: w (no stage output of its type), x read twice.
    InvalidArgumentException noOutput = assertThrows(InvalidArgumentException.class,
        () -> graph.segment(SegmentationOptions.defaults().donating(0)));
    assertTrue(noOutput.getMessage().contains("parameter 0 (" + MATRIX + ") is donated"), noOutput.getMessage());
    GraphBuilder b = new GraphBuilder("read_twice");
    Value x = b.parameter(ROW);
    Value y = b.hostCall(RELU, b.add(x, x)).get(0);
    Graph twice = b.build(b.add(y, x));
    InvalidArgumentException readTwice = assertThrows(InvalidArgumentException.class,
        () -> twice.segment(SegmentationOptions.defaults().donating(0)));
    assertTrue(readTwice.getMessage().contains("read by [stage 0"), readTwice.getMessage());
  }
}
