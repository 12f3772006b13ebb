package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.xlaactors.error.PluginException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Several plugins in one JVM, each serving its own clients; the CUDA plugin where it was fetched. */
class PluginsTest {
  private static final HostTensor X = HostTensor.ofFloats(new float[] {1, 2, 3, 4, 5, 6}, 2, 3);

  @Test
  void aSecondPluginServesItsOwnClientsAndFfiHandlersBesideTheFirst(@TempDir Path dir) throws IOException {
    try (XlaClient first = XlaClient.create()) {
      // A copy of the plugin file is a second, independent XLA runtime in this process (its own API
      // table and FFI registry): the situation of a CPU plugin next to a GPU plugin.
      Path copy = Files.copy(first.plugin().path(), dir.resolve("second_xla_cpu_pjrt.so"));
      Plugin second = Plugin.load(copy);
      assertNotSame(first.plugin(), second);
      assertTrue(second.hasFfiHandlers(), second.ffiUnavailableReason());
      try (XlaClient client = XlaClient.create(second, Map.of("asynchronous", true), 4);
          RunContext secondRun = RunContext.create(second, 1, 2f);
          RunContext firstRun = RunContext.create(first.plugin(), 2, 3f)) {
        assertEquals(second, client.plugin());
        float[] viaSecond =
            client.compile(TestPrograms.scaleAdd("1.0", null)).run(List.of(X), secondRun).get(0).toFloatArray();
        float[] viaFirst =
            first.compile(TestPrograms.scaleAdd("1.0", null)).run(List.of(X), firstRun).get(0).toFloatArray();
        assertArrayEquals(new float[] {3, 5, 7, 9, 11, 13}, viaSecond);
        assertArrayEquals(new float[] {4, 7, 10, 13, 16, 19}, viaFirst);
        // A context of one plugin is not a context of the other's runs.
        try (DeviceBuffer a = client.upload(HostTensor.ofFloats(new float[4]))) {
          assertThrows(
              dev.xlaactors.error.InvalidArgumentException.class,
              () -> first.compile(TestPrograms.ADD_F32_4).execute(a, a));
        }
      }
    }
  }

  @Test
  void clientOptionsOfEveryKindReachThePluginAndOtherValueTypesAreRefused() {
    Plugin plugin = Plugin.load(RuntimeSettings.load());
    // xla-cpu-pjrt and fastatomstruct-xla-cpu ignore option names they do not know; lammps-jax-pjrt-cpu (and the
    // CUDA plugin) refuse them, naming the option (measured).
    Map<String, Object> allKinds =
        Map.of("asynchronous", false, "cpu_device_count", 2L, "a_string", "x", "a_float", 1.5f, "a_list", new long[] {1, 2});
    Map<String, Object> options = allKinds;
    if (plugin.build().map(b -> b.name().equals("lammps-jax-pjrt-cpu")).orElse(false)) {
      var unknown = assertThrows(dev.xlaactors.error.PluginException.class, () -> XlaClient.create(plugin, allKinds, 0));
      assertTrue(unknown.getMessage().contains("Unexpected option name passed to PJRT_Client_Create: a_"), unknown.getMessage());
      options = Map.of("asynchronous", false, "cpu_device_count", 2L);
    }
    try (XlaClient client = XlaClient.create(plugin, options, 0)) {
      assertEquals(2, client.devices().size(), "cpu_device_count reached the plugin");
    }
    var bad =
        assertThrows(
            dev.xlaactors.error.InvalidArgumentException.class,
            () -> XlaClient.create(plugin, Map.of("asynchronous", new Object()), 0));
    assertTrue(bad.getMessage().contains("'asynchronous' must be a String, Long"), bad.getMessage());
  }

  @Test
  void withoutAGpuTheCudaPluginLoadsButRefusesAClientAndTheCpuCarriesOn() {
    Path cuda = RuntimeSettings.gpuPluginPath();
    assumeTrue(Files.isRegularFile(cuda), "no CUDA plugin at " + cuda + " (fetch it with " + RuntimeSettings.FETCH_GPU_COMMAND + ")");
    Plugin plugin = Plugin.load(cuda);
    assertTrue(plugin.apiMinorVersion() > 81, "the CUDA plugin speaks a newer PJRT C API: " + plugin.apiVersion());
    assertEquals(13000L, plugin.attributes().get("cuda_version"), plugin.attributes().toString());
    try (XlaClient gpu = XlaClient.create(plugin, Map.of(), 0)) {
      assumeTrue(false, "this machine has a GPU (" + gpu + "): the no-GPU path is not tested here");
    } catch (PluginException e) {
      assertTrue(e.getMessage().contains("No visible GPU devices"), e.getMessage());
    }
    try (XlaClient cpu = XlaClient.create()) {
      assertArrayEquals(
          new float[] {2, 4, 6, 8},
          cpu.compile(TestPrograms.ADD_F32_4)
              .run(HostTensor.ofFloats(new float[] {1, 2, 3, 4}), HostTensor.ofFloats(new float[] {1, 2, 3, 4}))
              .get(0)
              .toFloatArray());
    }
  }

  @Test
  @Tag("gpu")
  void aProgramRunsOnTheGpuAndMatchesTheCpu() {
    try (XlaClient gpu = GpuPlugin.clientOrSkip();
        XlaClient cpu = XlaClient.create()) {
      assertEquals("cuda", gpu.platformName());
      HostTensor a = HostTensor.ofFloats(new float[] {1, 2, 3, 4});
      HostTensor b = HostTensor.ofFloats(new float[] {10, 20, 30, 40});
      float[] onGpu = gpu.compile(TestPrograms.ADD_F32_4).run(a, b).get(0).toFloatArray();
      float[] onCpu = cpu.compile(TestPrograms.ADD_F32_4).run(a, b).get(0).toFloatArray();
      assertArrayEquals(onCpu, onGpu);
      try (DeviceBuffer onDevice = gpu.upload(a);
          DeviceBuffer back = onDevice.copyToDevice(cpu.devices().get(0))) {
        assertArrayEquals(new float[] {1, 2, 3, 4}, back.toHost().toFloatArray());
      }
    }
  }

  @Test
  @Tag("gpu")
  void theCudaPluginsClientOptionsSetHowMuchGpuMemoryItsClientMayTake() {
    try (XlaClient byDefault = GpuPlugin.clientOrSkip();
        XlaClient quarter = XlaClient.create(byDefault.plugin(), Map.of("memory_fraction", 0.25f, "preallocate", false), 4)) {
      long defaultLimit = byDefault.devices().get(0).memoryStats().bytesLimit();
      long quarterLimit = quarter.devices().get(0).memoryStats().bytesLimit();
      double ratio = (double) quarterLimit / defaultLimit;
      assertTrue(ratio > 0.30 && ratio < 0.37, "memory_fraction 0.25 against the default 0.75: limits " + quarterLimit
          + " and " + defaultLimit + " bytes, ratio " + ratio);
      HostTensor a = HostTensor.ofFloats(new float[] {1, 2, 3, 4});
      assertArrayEquals(new float[] {2, 4, 6, 8}, quarter.compile(TestPrograms.ADD_F32_4).run(a, a).get(0).toFloatArray());
    }
  }
}
