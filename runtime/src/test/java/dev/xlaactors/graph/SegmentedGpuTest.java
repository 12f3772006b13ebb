package dev.xlaactors.graph;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.xlaactors.graph.SegmentedProgram.HostCallInvoker;
import dev.xlaactors.graph.SegmentedProgram.Placement;
import dev.xlaactors.error.PluginException;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.Plugin;
import dev.xlaactors.runtime.RuntimeSettings;
import dev.xlaactors.runtime.XlaClient;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Stages on a GPU, callbacks on the host, compared with the same plan on the CPU plugin. Tagged {@code
 * gpu}; skipped, saying why, unless the CUDA plugin was fetched ({@code bash native/fetch-cuda-plugin.sh})
 * and finds a GPU.
 */
@Tag("gpu")
class SegmentedGpuTest {
  @Test
  void aLoopWithACallbackWithStagesOnTheGpuEqualsTheCpu() {
    Path plugin = RuntimeSettings.gpuPluginPath();
    Assumptions.assumeTrue(Files.isRegularFile(plugin), "GPU test skipped: no CUDA plugin at " + plugin + " (run '"
        + RuntimeSettings.FETCH_GPU_COMMAND + "' on a GPU machine, or set " + RuntimeSettings.GPU_PLUGIN_ENV + ")");
    XlaClient gpuClient;
    try {
      gpuClient = XlaClient.create(Plugin.load(plugin), Map.of(), 16);
    } catch (PluginException e) {
      Assumptions.assumeTrue(false, "GPU test skipped: the CUDA plugin found no GPU: " + e.getMessage());
      throw e;
    }
    SegmentedGraph g = SegmenterTest.loopWithCallback().segment(SegmentationOptions.defaults());
    List<HostTensor> in = List.of(HostTensor.ofFloats(new float[] {1, 2, 3, 4}), HostTensor.ofInts(new int[] {5}));
    try (XlaClient cpu = XlaClient.create();
        XlaClient gpu = gpuClient;
        SegmentedProgram onCpu = new SegmentedProgram(g, Placement.on(cpu));
        SegmentedProgram onGpu = new SegmentedProgram(g, Placement.on(gpu))) {
      SegmentedProgram.Result expected = onCpu.run(in, HostCallInvoker.direct());
      SegmentedProgram.Result actual = onGpu.run(in, HostCallInvoker.direct());
      assertArrayEquals(expected.outputs().get(0).toFloatArray(), actual.outputs().get(0).toFloatArray(), 1e-5f);
      assertEquals(expected.stats().hostCalls(), actual.stats().hostCalls());
    }
  }
}
