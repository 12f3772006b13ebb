package dev.xlaactors.runtime.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.CompileException;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.JaxFixture;
import dev.xlaactors.graph.SegmentationOptions;
import dev.xlaactors.graph.SegmentedProgram;
import dev.xlaactors.graph.SegmentedProgram.DeviceResult;
import dev.xlaactors.graph.SegmentedProgram.HostCallInvoker;
import dev.xlaactors.graph.SegmentedProgram.Placement;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.GpuPlugin;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.XlaClient;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.opentest4j.TestAbortedException;

/**
 * Device-resident models on a GPU (the CUDA plugin): jax.export artifacts for the GPU's platform, weights
 * bound on the GPU, outputs left there, a donated cache updated in place, and a segmented model whose
 * stages run on the GPU around a host callback. Tagged {@code gpu}: skipped, saying why, where there is no
 * CUDA plugin or no GPU. GPU matrix products may use TF32, so products are compared with a relative
 * tolerance of 1e-2 of the largest expected value; everything else exactly or at f32 rounding.
 */
@Tag("gpu")
class GpuModelTest {
  private static XlaClient gpu;
  private static XlaClient cpu;
  private static String noGpu; // why the tests are skipped; each test says so, not only the class

  @BeforeAll
  static void open() {
    try {
      gpu = GpuPlugin.clientOrSkip();
    } catch (TestAbortedException e) {
      noGpu = e.getMessage();
      return;
    }
    cpu = XlaClient.create();
  }

  @BeforeEach
  void needsAGpu() {
    Assumptions.assumeTrue(gpu != null, noGpu);
  }

  @AfterAll
  static void close() {
    if (gpu != null) {
      gpu.close();
      cpu.close();
    }
  }

  private static JaxExport export(String name) throws Exception {
    return JaxExport.read(Path.of(GpuModelTest.class.getResource("/fixtures/export/" + name + ".jaxexport").toURI()));
  }

  /** |expected - actual| <= rtol * max(1, max |expected|), element by element. */
  private static void assertCloseToScale(float[] expected, float[] actual, double rtol, String what) {
    assertEquals(expected.length, actual.length, what + ": element count");
    double scale = 1;
    for (float e : expected) {
      scale = Math.max(scale, Math.abs(e));
    }
    for (int i = 0; i < expected.length; i++) {
      assertTrue(Math.abs(expected[i] - actual[i]) <= rtol * scale,
          what + ": element " + i + " expected " + expected[i] + ", got " + actual[i] + " (scale " + scale + ")");
    }
  }

  @Test
  void exportsForCudaRunOnTheGpuAndCpuOnlyExportsAreRefusedNamingThePlatform() throws Exception {
    assertEquals("cuda", gpu.platformName());
    JaxExport multi = export("multi_platform"); // jnp.sin for [cpu, cuda]: the platform index is a bound constant
    assertEquals(1, multi.platformIndex(gpu));
    try (Executable exe = multi.compile(gpu)) {
      JaxFixture.load("export/multi_platform").check(multi.run(exe, JaxFixture.load("export/multi_platform").inputs()),
          1e-5, 1e-6, "multi_platform on the GPU");
    }
    JaxExport cudaOnly = export("bad_cuda_only"); // jnp.cos for [cuda]: refused on the CPU, runs here
    try (Executable exe = cudaOnly.compile(gpu)) {
      float[] x = {0.5f, -2f};
      float[] y = cudaOnly.run(exe, List.of(HostTensor.ofFloats(x))).get(0).toFloatArray();
      assertEquals(Math.cos(0.5), y[0], 1e-6);
      assertEquals(Math.cos(-2.0), y[1], 1e-6);
    }
    CompileException refused = assertThrows(CompileException.class, () -> export("mlp").compile(gpu));
    assertTrue(refused.getMessage().contains("[cpu]") && refused.getMessage().contains("'cuda'"), refused.getMessage());
  }

  @Test
  void aWeightBoundOnTheGpuIsUploadedOnceAndAnOutputLeftThereFeedsTheNextRun() {
    int k = 256;
    float[] w = SegmentedModelTest.random(k * k, 3);
    String program = """
        func.func @main(%w: tensor<256x256xf32>, %x: tensor<1x256xf32>) -> tensor<1x256xf32> {
          %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<1x256xf32>, tensor<256x256xf32>) -> tensor<1x256xf32>
          return %y : tensor<1x256xf32>
        }
        """;
    try (Executable onGpu = gpu.compile(program);
        Executable onCpu = cpu.compile(program);
        Model model = Model.load(onGpu, List.of("w", "x"), Map.of("w", HostTensor.ofFloats(w, k, k)), gpu.devices().get(0))) {
      HostTensor x = HostTensor.ofFloats(SegmentedModelTest.random(k, 4), 1, k);
      long uploads = gpu.uploadCount();
      List<DeviceBuffer> first = model.execute(List.of(Argument.of(x)), null);
      assertEquals(gpu.devices().get(0), first.get(0).device(), "the output stays on the GPU");
      List<DeviceBuffer> second = model.execute(List.of(Argument.of(first.get(0))), null);
      assertEquals(1, gpu.uploadCount() - uploads, "x went up once; w and the first output never moved");
      HostTensor wHost = HostTensor.ofFloats(w, k, k);
      HostTensor y1 = onCpu.run(wHost, x).get(0);
      HostTensor y2 = onCpu.run(wHost, y1).get(0);
      assertCloseToScale(y1.toFloatArray(), first.get(0).toHost().toFloatArray(), 1e-2, "x . w on the GPU");
      assertCloseToScale(y2.toFloatArray(), second.get(0).toHost().toFloatArray(), 1e-2, "(x . w) . w on the GPU");
      first.forEach(DeviceBuffer::close);
      second.forEach(DeviceBuffer::close);
    }
  }

  @Test
  void aDonatedCacheOnTheGpuIsUpdatedInPlace() {
    try (Executable update = gpu.compile(DonationTest.UPDATE)) {
      DonationTest.DonatedSteps done = DonationTest.donateSteps(gpu, update, 50);
      assertTrue(done.sameMemory() >= 49, "the output reused the donated GPU memory in " + done.sameMemory() + " of 50 steps");
      DonationTest.assertRowsWritten(done.cache(), 50);
      done.cache().close();
    }
  }

  @Test
  void aSegmentedModelRunsItsStagesOnTheGpuWithWeightsBoundThereAndItsCallbackOnTheHost() {
    Graph graph = SegmentedModelTest.twoLayers();
    int d = SegmentedModelTest.D;
    float[] w = SegmentedModelTest.random(d * d, 5);
    try (SegmentedProgram program = new SegmentedProgram(graph.segment(SegmentationOptions.defaults()), Placement.on(gpu))) {
      long uploads = gpu.uploadCount();
      try (SegmentedModel model = SegmentedModel.load(program, List.of("w", "x"), Map.of("w", HostTensor.ofFloats(w, d, d)),
          gpu.devices().get(0))) {
        assertEquals(1, gpu.uploadCount() - uploads, "w uploaded to the GPU once");
        for (int run = 0; run < 3; run++) {
          float[] x = SegmentedModelTest.random(d, 30 + run);
          List<HostTensor> expected = SegmentedModelTest.fused(cpu, graph, HostTensor.ofFloats(w, d, d), SegmentedModelTest.row(x));
          long bytes = gpu.uploadedBytes();
          DeviceResult result = model.execute(List.of(Argument.of(SegmentedModelTest.row(x))), HostCallInvoker.direct());
          assertEquals(2L * 4 * d, gpu.uploadedBytes() - bytes, "x and the callback's result went up, never w");
          assertEquals(gpu.devices().get(0), result.outputs().get(0).device());
          assertCloseToScale(expected.get(0).toFloatArray(), result.outputs().get(0).toHost().toFloatArray(), 1e-2, "z, run " + run);
          assertCloseToScale(expected.get(1).toFloatArray(), result.outputs().get(1).toHost().toFloatArray(), 1e-2, "h, run " + run);
          result.outputs().forEach(DeviceBuffer::close);
        }
      }
    }
  }

  @Test
  void aProgramCallingTheHostIsRefusedOnTheGpuNamingTheCallAndTheFix() {
    CompileException refused = assertThrows(CompileException.class, () -> gpu.compile(ModelTest.MATMUL_THEN_CALLBACK));
    assertTrue(refused.getMessage().contains("xla_actors.host_callback") && refused.getMessage().contains("'cuda'")
        && refused.getMessage().contains("SegmentedProgram"), refused.getMessage());
    CompileException fromGraph = assertThrows(CompileException.class, () -> SegmentedModelTest.twoLayers().compile(gpu));
    assertTrue(fromGraph.getMessage().contains("xla_actors.host_callback"), fromGraph.getMessage());
  }
}
