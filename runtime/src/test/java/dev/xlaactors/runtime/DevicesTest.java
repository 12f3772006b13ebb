package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Devices, their descriptions and memory, and running programs on a chosen device. */
class DevicesTest {
  /** These tests are about clients of several devices, whatever the configured count. */
  private static final RuntimeSettings SEVERAL_DEVICES = RuntimeSettings.load().withCpuDeviceCount(4);

  private static XlaClient client;

  @BeforeAll
  static void open() {
    client = XlaClient.create(SEVERAL_DEVICES);
  }

  @AfterAll
  static void close() {
    client.close();
  }

  @Test
  void theCpuClientDescribesItsDevicesAndPlatform() {
    List<Device> devices = client.devices();
    assertTrue(devices.size() >= 2, "the CPU plugin reports several devices, got " + devices);
    for (int i = 0; i < devices.size(); i++) {
      Device d = devices.get(i);
      assertEquals(i, d.index());
      assertEquals("cpu", d.kind());
      // Measured per build: xla-cpu-pjrt's TFRT client says TFRT_CPU_<id>, the newer builds' client cpu:<id>.
      String prefix = client.plugin().build().map(b -> b.name().equals("xla-cpu-pjrt")).orElse(true) ? "TFRT_CPU_" : "cpu:";
      assertEquals(prefix + d.id(), d.debugString());
      assertEquals(Integer.parseInt(d.id()), d.localHardwareId());
      assertEquals(Map.of(), d.attributes(), "the CPU plugin reports no device attributes");
    }
    assertEquals("cpu", client.platformVersion());
    assertEquals(0, client.processIndex());
  }

  @Test
  void eachDeviceHasItsOwnMemorySpacesAndDefaultMemory() {
    Device d1 = client.devices().get(1);
    List<MemorySpace> memories = d1.memories();
    assertEquals(List.of("device", "pinned_host", "unpinned_host"), memories.stream().map(MemorySpace::kind).toList());
    assertEquals(memories.get(0), d1.defaultMemory());
    assertTrue(client.memories().containsAll(memories), client.memories().toString());
    assertEquals(3 * client.devices().size(), client.memories().size());
    assertNotEquals(client.devices().get(0).defaultMemory(), d1.defaultMemory());
  }

  @Test
  void memoryStatisticsAreUnimplementedOnTheCpuPlugin() {
    XlaException e = assertThrows(XlaException.class, () -> client.devices().get(0).memoryStats());
    assertEquals(ErrorCode.UNIMPLEMENTED, e.code(), e.getMessage());
    assertTrue(e.getMessage().contains("PJRT_Device_MemoryStats"), e.getMessage());
  }

  @Test
  void aProgramRunsOnTheDeviceItIsGivenAndLeavesItsOutputsThere() {
    try (Executable add = client.compile(TestPrograms.ADD_F32_4)) {
      assertEquals(client.devices(), add.addressableDevices(), "a portable executable runs anywhere");
      for (Device device : client.devices()) {
        try (DeviceBuffer a = client.upload(HostTensor.ofFloats(new float[] {1, 2, 3, 4}), device);
            DeviceBuffer b = client.upload(HostTensor.ofFloats(new float[] {10, 20, 30, 40}), device)) {
          assertEquals(device, a.device());
          assertEquals(device.defaultMemory(), a.memory());
          assertEquals(16, a.onDeviceSizeInBytes());
          List<DeviceBuffer> out = add.execute(List.of(a, b), null, device);
          assertEquals(device, out.get(0).device(), "the output stays on the device that ran the program");
          assertArrayEquals(new float[] {11, 22, 33, 44}, out.get(0).toHost().toFloatArray());
          out.forEach(DeviceBuffer::close);
          // Without a device, the run goes where its arguments are.
          List<DeviceBuffer> again = add.execute(a, b);
          assertEquals(device, again.get(0).device());
          again.forEach(DeviceBuffer::close);
        }
      }
      List<HostTensor> viaRun =
          add.run(
              List.of(HostTensor.ofFloats(new float[] {1, 1, 1, 1}), HostTensor.ofFloats(new float[] {2, 2, 2, 2})),
              null,
              client.devices().get(3));
      assertArrayEquals(new float[] {3, 3, 3, 3}, viaRun.get(0).toFloatArray());
    }
  }

  @Test
  void argumentsOnAnotherDeviceAreRefusedWithTheFix() {
    try (Executable add = client.compile(TestPrograms.ADD_F32_4);
        DeviceBuffer on0 = client.upload(HostTensor.ofFloats(new float[4]), client.devices().get(0));
        DeviceBuffer on1 = client.upload(HostTensor.ofFloats(new float[4]), client.devices().get(1))) {
      InvalidArgumentException e =
          assertThrows(InvalidArgumentException.class, () -> add.execute(List.of(on0, on1), null, client.devices().get(0)));
      assertTrue(e.getMessage().contains("argument 1 lives on Device(1"), e.getMessage());
      assertTrue(e.getMessage().contains("copyToDevice"), e.getMessage());
    }
  }

  @Test
  void aNonPortableExecutableNamesTheDevicesItWasCompiledFor() {
    try (Executable add = client.compile(TestPrograms.ADD_F32_4, new CompileOptions(1, 1, false));
        DeviceBuffer on1 = client.upload(HostTensor.ofFloats(new float[4]), client.devices().get(1))) {
      assertEquals(List.of(client.devices().get(0)), add.addressableDevices());
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> add.execute(on1, on1));
      assertTrue(e.getMessage().contains("compiled for [Device(0"), e.getMessage());
      assertTrue(e.getMessage().contains("portable"), e.getMessage());
    }
  }

  @Test
  void aDeviceOfAnotherClientIsRefused() {
    try (XlaClient other = XlaClient.create(SEVERAL_DEVICES);
        Executable add = client.compile(TestPrograms.ADD_F32_4)) {
      Device foreign = other.devices().get(0);
      assertFalse(client.devices().contains(foreign));
      InvalidArgumentException e =
          assertThrows(InvalidArgumentException.class, () -> add.execute(List.of(), null, foreign));
      assertTrue(e.getMessage().contains("belongs to"), e.getMessage());
      assertThrows(InvalidArgumentException.class, () -> client.upload(HostTensor.ofFloats(new float[4]), foreign));
    }
  }
}
