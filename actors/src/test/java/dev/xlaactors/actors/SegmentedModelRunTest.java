package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.SegmentedModel;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A segmented model (weights bound once) run through the supervised CallbackRuntime on the real plugin:
 * its callback served by the runtime, outputs on the host or left on the device, a state donated.
 */
class SegmentedModelRunTest {
  static final int D = 512;
  static final TensorType ROW = TensorType.of(DType.F32, 1, D);
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static XlaClient client;
  private static CallbackRuntime callbacks;
  private static final AtomicInteger reluCalls = new AtomicInteger();
  private static final HostCallback RELU = new HostCallback("segmodel_relu", List.of(ROW), null, (in, s) -> {
    reluCalls.incrementAndGet();
    return List.of(HostTensor.ofFloats(relu(in.get(0).toFloatArray()), 1, D));
  });

  @BeforeAll
  static void start() {
    client = XlaClient.create();
    callbacks = CallbackRuntime.create(testKit.system(), client);
    callbacks.register(RELU).toCompletableFuture().join();
  }

  @AfterAll
  static void stop() {
    callbacks.close();
    client.close();
    testKit.shutdownTestKit();
  }

  static float[] relu(float[] v) {
    float[] r = v.clone();
    for (int i = 0; i < r.length; i++) {
      r[i] = Math.max(0, r[i]);
    }
    return r;
  }

  static float[] random(int n, long seed) {
    Random r = new Random(seed);
    float[] v = new float[n];
    for (int i = 0; i < n; i++) {
      v[i] = (r.nextFloat() * 2 - 1) * 0.05f;
    }
    return v;
  }

  static float[] times(float[] x, float[] w) {
    float[] y = new float[D];
    for (int k = 0; k < D; k++) {
      for (int j = 0; j < D; j++) {
        y[j] += x[k] * w[k * D + j];
      }
    }
    return y;
  }

  /** state' = state + relu(x . w); returns state' (aliased to state when donated). */
  static Graph step() {
    GraphBuilder b = new GraphBuilder("segmodel_step");
    Value w = b.parameter(TensorType.of(DType.F32, D, D));
    Value state = b.parameter(ROW);
    Value x = b.parameter(ROW);
    return b.build(b.add(state, b.hostCall(RELU, b.matmul(x, w)).get(0)));
  }

  @Test
  void aBoundSegmentedModelRunsSupervisedWithItsWeightUploadedOnce() throws Exception {
    float[] w = random(D * D, 1);
    Graph graph = step();
    try (SegmentedProgram program = new SegmentedProgram(graph.segment(SegmentationOptions.defaults().donating(1)),
            SegmentedProgram.Placement.on(client));
        SegmentedModel model = SegmentedModel.load(program, List.of("w", "state", "x"),
            Map.of("w", HostTensor.ofFloats(w, D, D)), client.devices().get(0))) {
      float[] x = random(D, 2);
      float[] zero = new float[D];
      float[] expected = relu(times(x, w));
      int calls = reluCalls.get();
      long uploads = client.uploadCount();
      // On the host, on the calling thread and started on the run dispatcher.
      List<HostTensor> here = callbacks.run(model,
          List.of(Argument.of(HostTensor.ofFloats(zero, 1, D)), Argument.of(HostTensor.ofFloats(x, 1, D))));
      assertArrayEquals(expected, here.get(0).toFloatArray(), 1e-4f);
      RunHandle started = callbacks.start(model,
          List.of(Argument.of(HostTensor.ofFloats(zero, 1, D)), Argument.of(HostTensor.ofFloats(x, 1, D))));
      assertArrayEquals(expected, started.result().toCompletableFuture().get(60, TimeUnit.SECONDS).get(0).toFloatArray(), 1e-4f);
      assertEquals(2 * 3, client.uploadCount() - uploads, "state, x and the callback's result per run; never w");
      assertEquals(calls + 2, reluCalls.get(), "the runtime served the callback");
      // On the device, the state donated each step and updated in place.
      DeviceBuffer state = client.upload(HostTensor.ofFloats(zero, 1, D));
      float[] total = new float[D];
      for (int s = 0; s < 4; s++) {
        float[] xs = random(D, 10 + s);
        long pointer = state.unsafeDevicePointer();
        List<Argument> inputs = List.of(Argument.donated(state), Argument.of(HostTensor.ofFloats(xs, 1, D)));
        List<DeviceBuffer> out = s % 2 == 0
            ? callbacks.runOnDevice(model, inputs)
            : callbacks.startOnDevice(model, inputs).result().toCompletableFuture().get(60, TimeUnit.SECONDS);
        assertTrue(state.isDonated(), "step " + s);
        assertEquals(pointer, out.get(0).unsafeDevicePointer(), "step " + s + " wrote the state in place");
        state = out.get(0);
        float[] r = relu(times(xs, w));
        for (int i = 0; i < D; i++) {
          total[i] += r[i];
        }
      }
      assertArrayEquals(total, state.toHost().toFloatArray(), 1e-4f);
      state.close();
      assertEquals(0, program.openBuffers());
    }
  }
}
