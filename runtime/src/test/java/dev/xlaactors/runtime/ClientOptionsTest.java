package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The CPU client's {@code cpu_device_count} option is checked before the plugin sees it. Found while
 * probing error paths: 0 and -1 failed with a bare NullPointerException (the failed constructor closed a
 * cache it had not made yet), a string or a boolean with a C++ exception surfacing as {@code
 * RuntimeException: Unexpected index}, and 100000 did not return within 45 s.
 */
class ClientOptionsTest {
  @Test
  void aBadCpuDeviceCountIsRefusedNamingTheOption() {
    Plugin plugin = Plugin.load(RuntimeSettings.load());
    for (Object bad : List.of(0L, -1L, 100_000L, "abc", true, 1.5f)) {
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
          () -> XlaClient.create(plugin, Map.of("cpu_device_count", bad), 4).close(), "cpu_device_count = " + bad);
      assertTrue(e.getMessage().startsWith("client option cpu_device_count = " + bad)
          && e.getMessage().contains("from 1 to 1024"), e.getMessage());
    }
  }

  @Test
  void aGoodCpuDeviceCountGivesThatManyDevices() {
    try (XlaClient client = XlaClient.create(Plugin.load(RuntimeSettings.load()), Map.of("cpu_device_count", 6), 4)) {
      assertEquals(6, client.devices().size());
      try (Executable twice = client.compile(TestPrograms.ADD_F32_4)) {
        assertEquals(4, twice.run(HostTensor.ofFloats(new float[] {1, 2, 3, 4}), HostTensor.ofFloats(new float[4])).get(0)
            .toFloatArray().length);
      }
    }
  }

  @Test
  void theCpuDeviceCountSettingReachesTheClientAndABadOneNamesTheKey() {
    var two = com.typesafe.config.ConfigFactory.parseMap(Map.of("xla-actors.runtime.cpu-device-count", 2))
        .withFallback(com.typesafe.config.ConfigFactory.load());
    try (XlaClient client = XlaClient.create(RuntimeSettings.fromConfig(two))) {
      assertEquals(2, client.devices().size());
    }
    var bad = com.typesafe.config.ConfigFactory.parseMap(Map.of("xla-actors.runtime.cpu-device-count", 2000))
        .withFallback(com.typesafe.config.ConfigFactory.load());
    var e = assertThrows(dev.xlaactors.error.XlaException.class, () -> RuntimeSettings.fromConfig(bad));
    assertTrue(e.getMessage().contains("xla-actors.runtime.cpu-device-count"), e.getMessage());
    assertTrue(e.getMessage().contains("2000"), e.getMessage());
  }
}
