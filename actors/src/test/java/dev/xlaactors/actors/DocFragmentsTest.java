package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.PluginException;
import dev.xlaactors.graph.Composites;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.ImportedProgram;
import dev.xlaactors.graph.SegmentationOptions;
import dev.xlaactors.graph.SegmentedGraph;
import dev.xlaactors.graph.SegmentedProgram;
import dev.xlaactors.graph.SegmentedProgram.Target;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Device;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.Plugin;
import dev.xlaactors.runtime.RuntimeSettings;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.BoundProgram;
import dev.xlaactors.runtime.model.SegmentedModel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.junit.jupiter.api.Test;

/**
 * The Java fragments of docs/*.md, run with their values checked: keep each test's body in step with its fragment (the
 * snippets elide setup such as the client, which the tests spell out).
 */
class DocFragmentsTest {
  @Test
  void usingTheRuntime() {
    try (XlaClient client = XlaClient.create();
        Executable add =
            client.compile(
                """
                func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
                  %0 = stablehlo.add %a, %b : tensor<4xf32>
                  return %0 : tensor<4xf32>
                }""")) {
      List<HostTensor> out =
          add.run(HostTensor.ofFloats(new float[] {1, 2, 3, 4}), HostTensor.ofFloats(new float[] {10, 20, 30, 40}));
      float[] sum = out.get(0).toFloatArray(); // [11, 22, 33, 44]
      assertArrayEquals(new float[] {11, 22, 33, 44}, sum, 0f);
    }
  }

  @Test
  void writingProgramsInJava() {
    try (XlaClient client = XlaClient.create()) {
      GraphBuilder b = new GraphBuilder("mlp");
      Value x = b.parameter(TensorType.of(DType.F32, 4, 8));
      Value w = b.parameter(TensorType.of(DType.F32, 8, 3));
      Value logits = b.add(b.matmul(x, w), b.constant(0.1f)); // NumPy-style broadcasting
      Graph graph = b.build(Composites.softmax(b, logits, -1));
      try (Executable exe = graph.compile(client)) {
        float[] p = exe.run(HostTensor.ofFloats(new float[32], 4, 8), HostTensor.ofFloats(new float[24], 8, 3))
            .get(0).toFloatArray();
        assertEquals(12, p.length);
        assertEquals(1f / 3, p[0], 1e-6f); // all logits equal: a uniform softmax
      }
    }
  }

  @Test
  void hostCallbacks() {
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "app");
    try (XlaClient client = XlaClient.create();
        CallbackRuntime callbacks = CallbackRuntime.create(system, client)) {
      HostCallback clip = HostCallback.of("clip", List.of(TensorType.of(DType.F32, 3)), 2.5f,
          (inputs, limit) -> List.of(clipTo(inputs.get(0), limit)));       // limit is a Float
      GraphBuilder b = new GraphBuilder("with_java");
      Value x = b.parameter(TensorType.of(DType.F32, 3));
      Value y = b.hostCall(clip, b.multiply(x, b.constant(2f))).get(0); // Java runs here
      Graph graph = b.build(b.add(y, b.constant(1f)));

      callbacks.registerAll(graph.hostCallbacks()).toCompletableFuture().join();
      HostTensor input = HostTensor.ofFloats(new float[] {0.5f, 1f, 3f});
      try (BoundProgram program = callbacks.compile(graph)) { // fused, or segmented: xla-actors.actors.runs.mode
        List<HostTensor> out = callbacks.run(program, Argument.of(List.of(input))); // or start(...) -> RunHandle
        assertArrayEquals(new float[] {2f, 3f, 3.5f}, out.get(0).toFloatArray(), 0f);
      }
    } finally {
      system.terminate();
    }
  }

  @Test
  void devicesTransfersAndASecondPlugin() throws Exception {
    String program =
        """
        func.func @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {
          %0 = stablehlo.add %a, %b : tensor<2xf32>
          return %0 : tensor<2xf32>
        }""";
    HostTensor x = HostTensor.ofFloats(new float[] {1, 2}, 2);
    try (XlaClient client = XlaClient.create();
        Executable add = client.compile(program)) { // portable: runs on any device
      Device gpuLike = client.devices().get(1);
      DeviceBuffer a = client.upload(x, gpuLike); // or uploadAsync(x, device)
      List<DeviceBuffer> out = add.execute(List.of(a, a), null, gpuLike); // outputs stay on device 1
      DeviceBuffer there = out.get(0).copyToDevice(client.devices().get(2)); // device to device
      CompletableFuture<HostTensor> back = there.toHostAsync();
      assertArrayEquals(new float[] {2, 4}, back.get(30, TimeUnit.SECONDS).toFloatArray(), 0f);
      assertEquals(client.devices().get(2), there.device());
    }
    if (Files.isRegularFile(RuntimeSettings.gpuPluginPath())) {
      Plugin cuda = Plugin.load(RuntimeSettings.gpuPluginPath()); // after bash native/fetch-cuda-plugin.sh
      try (XlaClient gpu = XlaClient.create(cuda, Map.of(), 16)) { // its own client options (named values)
        assertEquals("cuda", gpu.platformName());
      } catch (PluginException noGpu) {
        assertTrue(noGpu.getMessage().contains("No visible GPU devices"), noGpu.getMessage());
      }
    }
  }

  @Test
  void runAJaxModelFromJava() throws Exception {
    // The README's mlp.mlir is the JAX export of tools/jax_fixtures.py's mlp, committed as a fixture.
    Path mlpFile = Path.of("../runtime/src/test/resources/fixtures/mlp.mlir");
    try (XlaClient client = XlaClient.create()) {
      HostTensor x = HostTensor.ofFloats(new float[32], 4, 8);
      HostTensor w1 = HostTensor.ofFloats(new float[128], 8, 16);
      HostTensor b1 = HostTensor.ofFloats(new float[16], 16);
      HostTensor w2 = HostTensor.ofFloats(new float[64], 16, 4);
      HostTensor b2 = HostTensor.ofFloats(new float[4], 4);
      ImportedProgram mlp = ImportedProgram.fromFile(mlpFile);
      System.out.println(mlp.parameterTypes()); // [f32[4,8], f32[8,16], f32[16], f32[16,4], f32[4]]
      assertEquals("[f32[4,8], f32[8,16], f32[16], f32[16,4], f32[4]]", mlp.parameterTypes().toString());
      try (Executable exe = mlp.compile(client)) {
        List<HostTensor> out = exe.run(x, w1, b1, w2, b2);
        assertArrayEquals(new float[] {0.25f, 0.25f, 0.25f, 0.25f}, java.util.Arrays.copyOf(out.get(0).toFloatArray(), 4), 1e-6f);
      }
    }
  }

  @Test
  void segmentedRuns() throws Exception {
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "phase2");
    try (XlaClient client = XlaClient.create();
        CallbackRuntime callbacks = CallbackRuntime.create(system, client)) {
      HostCallback clip =
          new HostCallback("clip", List.of(TensorType.of(DType.F32, 3)), 2.5f,
              (in, limit) -> List.of(clipTo(in.get(0), (Float) limit)));
      GraphBuilder b = new GraphBuilder("segmented");
      Value x = b.parameter(TensorType.of(DType.F32, 3));
      Value y = b.hostCall(clip, b.multiply(x, b.constant(2f))).get(0);
      Graph graph = b.build(b.add(y, b.constant(1f))); // the same graph as for a fused run
      List<HostTensor> inputs = List.of(HostTensor.ofFloats(new float[] {0.5f, 1f, 3f}));
      XlaClient gpuClient = client; // stands in for a client of a GPU plugin
      Device gpuDevice = client.devices().get(1);

      callbacks.registerAll(graph.hostCallbacks()).toCompletableFuture().join();
      try (BoundProgram fused = callbacks.compile(graph, RunMode.FUSED);
          BoundProgram segmented = callbacks.compile(graph, RunMode.SEGMENTED);
          BoundProgram configured = callbacks.compile(graph)) { // xla-actors.actors.runs.mode (default fused)
        List<HostTensor> a = callbacks.run(fused, Argument.of(inputs));
        List<HostTensor> s = callbacks.run(segmented, Argument.of(inputs)); // equal to a
        List<HostTensor> c = callbacks.run(configured, Argument.of(inputs));
        RunHandle h = callbacks.start(segmented, Argument.of(inputs)); // cancellable between stages
        assertArrayEquals(a.get(0).toFloatArray(), s.get(0).toFloatArray(), 0f);
        assertArrayEquals(a.get(0).toFloatArray(), c.get(0).toFloatArray(), 0f);
        assertArrayEquals(
            a.get(0).toFloatArray(), h.result().toCompletableFuture().get(30, TimeUnit.SECONDS).get(0).toFloatArray(), 0f);
      }

      SegmentedGraph plan = graph.segment(SegmentationOptions.defaults());
      System.out.println(plan.describe()); // the stages, host calls and Java-driven loops
      try (SegmentedProgram p = new SegmentedProgram(plan, stage -> new Target(gpuClient, gpuDevice));
          SegmentedModel onGpu = SegmentedModel.of(p)) {
        List<HostTensor> out = callbacks.run(onGpu, Argument.of(inputs)); // supervised, stages where placed
        assertArrayEquals(new float[] {2f, 3f, 3.5f}, out.get(0).toFloatArray(), 0f);
      }
      assertEquals(2, plan.stages().size(), plan.describe());
    } finally {
      system.terminate();
    }
  }

  // Defined in the README's snippet too.
  private static HostTensor clipTo(HostTensor tensor, float limit) {
    float[] values = tensor.toFloatArray();
    for (int i = 0; i < values.length; i++) {
      values[i] = Math.min(values[i], limit);
    }
    return HostTensor.ofFloats(values, tensor.shape().dims());
  }
}
