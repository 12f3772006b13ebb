package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.xlaactors.error.PluginException;
import java.nio.file.Files;
import java.util.Map;

/** Opens a client of the CUDA plugin for tests tagged {@code gpu}, or skips the test saying why it cannot. */
public final class GpuPlugin {
  private GpuPlugin() {}

  /** A client of the CUDA plugin on a GPU; skips the calling test when there is no plugin or no GPU. */
  public static XlaClient clientOrSkip() {
    assumeTrue(
        Files.isRegularFile(RuntimeSettings.gpuPluginPath()),
        "GPU test skipped: no CUDA plugin at " + RuntimeSettings.gpuPluginPath() + " (run '"
            + RuntimeSettings.FETCH_GPU_COMMAND + "' on a GPU machine, or set " + RuntimeSettings.GPU_PLUGIN_ENV + ")");
    Plugin plugin = Plugin.load(RuntimeSettings.gpuPluginPath());
    try {
      return XlaClient.create(plugin, Map.of(), 16);
    } catch (PluginException e) {
      assumeTrue(false, "GPU test skipped: the CUDA plugin found no GPU: " + e.getMessage());
      throw e;
    }
  }
}
