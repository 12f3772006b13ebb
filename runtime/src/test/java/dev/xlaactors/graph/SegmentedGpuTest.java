package dev.xlaactors.graph;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.xlaactors.graph.SegmentedProgram.HostCallInvoker;
import dev.xlaactors.graph.SegmentedProgram.Placement;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.RuntimeSettings;
import dev.xlaactors.runtime.XlaClient;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Stages on a GPU, callbacks on the host, compared with the same plan on the CPU plugin. Tagged {@code
 * gpu} (excluded by default; run with {@code -Dgroups=gpu}); skipped, saying why, unless a CUDA PJRT
 * plugin is named by {@code XLA_ACTORS_CUDA_PLUGIN} and an NVIDIA device is present.
 */
@Tag("gpu")
class SegmentedGpuTest {
  @Test
  void aLoopWithACallbackWithStagesOnTheGpuEqualsTheCpu() {
    String plugin = System.getenv("XLA_ACTORS_CUDA_PLUGIN");
    Assumptions.assumeTrue(plugin != null && Files.isRegularFile(Path.of(plugin)),
        "no CUDA PJRT plugin: set XLA_ACTORS_CUDA_PLUGIN to the fetched xla_cuda_plugin.so");
    Assumptions.assumeTrue(Files.exists(Path.of("/dev/nvidia0")), "no NVIDIA GPU on this machine (/dev/nvidia0 absent)");
    SegmentedGraph g = SegmenterTest.loopWithCallback().segment(SegmentationOptions.defaults());
    List<HostTensor> in = List.of(HostTensor.ofFloats(new float[] {1, 2, 3, 4}), HostTensor.ofInts(new int[] {5}));
    try (XlaClient cpu = XlaClient.create();
        XlaClient gpu = XlaClient.create(RuntimeSettings.load().withPluginPath(Path.of(plugin)));
        SegmentedProgram onCpu = new SegmentedProgram(g, Placement.on(cpu));
        SegmentedProgram onGpu = new SegmentedProgram(g, Placement.on(gpu))) {
      SegmentedProgram.Result expected = onCpu.run(in, HostCallInvoker.direct());
      SegmentedProgram.Result actual = onGpu.run(in, HostCallInvoker.direct());
      assertArrayEquals(expected.outputs().get(0).toFloatArray(), actual.outputs().get(0).toFloatArray(), 1e-5f);
      assertEquals(expected.stats().hostCalls(), actual.stats().hostCalls());
    }
  }
}
