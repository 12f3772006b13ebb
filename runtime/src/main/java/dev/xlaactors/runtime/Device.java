package dev.xlaactors.runtime;

import static dev.xlaactors.nativebridge.pjrt.global.Pjrt.*;

import dev.xlaactors.nativebridge.pjrt.PJRT_Device;
import dev.xlaactors.nativebridge.pjrt.PJRT_DeviceDescription;
import dev.xlaactors.nativebridge.pjrt.PJRT_DeviceDescription_Attributes_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_DeviceDescription_DebugString_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Device_AddressableMemories_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Device_DefaultMemory_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Device_LocalHardwareId_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Device_MemoryStats_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Memory;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * One addressable device of a client: where buffers live and programs run. A view owned by its client;
 * its queries need the client open. Thread-safe and immutable.
 */
public final class Device {
  private final XlaClient client;
  private final PJRT_Device device;
  private final PJRT_DeviceDescription description;
  private final int index;
  private final String id;
  private final String kind;

  Device(XlaClient client, PJRT_Device device, PJRT_DeviceDescription description, int index, String id, String kind) {
    this.client = client;
    this.device = device;
    this.description = description;
    this.index = index;
    this.id = id;
    this.kind = kind;
  }

  /** Position in {@link XlaClient#devices()}. */
  public int index() {
    return index;
  }

  /** The device id PJRT reports. */
  public String id() {
    return id;
  }

  /** The device kind PJRT reports, e.g. {@code cpu}. */
  public String kind() {
    return kind;
  }

  /** The client this device belongs to. */
  public XlaClient client() {
    return client;
  }

  PJRT_Device pointer() {
    return device;
  }

  /** The device's attributes ({@code PJRT_DeviceDescription_Attributes}); empty when the plugin has none. */
  public Map<String, Object> attributes() {
    PjrtApi api = client.api();
    if (api.descriptionAttributes == null) {
      return Map.of();
    }
    return client.withClient(
        () -> {
          try (PJRT_DeviceDescription_Attributes_Args args = new PJRT_DeviceDescription_Attributes_Args()) {
            args.struct_size(PJRT_DeviceDescription_Attributes_Args_STRUCT_SIZE).device_description(description);
            api.check(() -> api.descriptionAttributes.call(args), PjrtApi.Failure.GENERIC, "PJRT_DeviceDescription_Attributes");
            return Map.copyOf(PjrtApi.namedValues(args.attributes(), args.num_attributes()));
          }
        });
  }

  /** The plugin's description of the device, e.g. {@code TFRT_CPU_0}. */
  public String debugString() {
    PjrtApi api = client.api();
    api.need(api.descriptionDebugString, "PJRT_DeviceDescription_DebugString");
    return client.withClient(
        () -> {
          try (PJRT_DeviceDescription_DebugString_Args args = new PJRT_DeviceDescription_DebugString_Args()) {
            args.struct_size(PJRT_DeviceDescription_DebugString_Args_STRUCT_SIZE).device_description(description);
            api.check(() -> api.descriptionDebugString.call(args), PjrtApi.Failure.GENERIC, "PJRT_DeviceDescription_DebugString");
            return PjrtApi.utf8(args.debug_string(), args.debug_string_size());
          }
        });
  }

  /** The hardware id local to this host ({@code PJRT_Device_LocalHardwareId}). */
  public int localHardwareId() {
    PjrtApi api = client.api();
    api.need(api.deviceLocalHardwareId, "PJRT_Device_LocalHardwareId");
    return client.withClient(
        () -> {
          try (PJRT_Device_LocalHardwareId_Args args = new PJRT_Device_LocalHardwareId_Args()) {
            args.struct_size(PJRT_Device_LocalHardwareId_Args_STRUCT_SIZE).device(device);
            api.check(() -> api.deviceLocalHardwareId.call(args), PjrtApi.Failure.GENERIC, "PJRT_Device_LocalHardwareId");
            return args.local_hardware_id();
          }
        });
  }

  /** The memory spaces this device can address; empty when the plugin cannot say. */
  public List<MemorySpace> memories() {
    PjrtApi api = client.api();
    if (api.deviceAddressableMemories == null) {
      return List.of();
    }
    return client.withClient(
        () -> {
          try (PJRT_Device_AddressableMemories_Args args = new PJRT_Device_AddressableMemories_Args()) {
            args.struct_size(PJRT_Device_AddressableMemories_Args_STRUCT_SIZE).device(device);
            api.check(() -> api.deviceAddressableMemories.call(args), PjrtApi.Failure.GENERIC, "PJRT_Device_AddressableMemories");
            List<MemorySpace> result = new ArrayList<>();
            for (long i = 0; i < args.num_memories(); i++) {
              result.add(MemorySpace.describe(api, args.memories((int) i)));
            }
            return List.copyOf(result);
          }
        });
  }

  /** The memory space buffers go to by default. */
  public MemorySpace defaultMemory() {
    PjrtApi api = client.api();
    api.need(api.deviceDefaultMemory, "PJRT_Device_DefaultMemory");
    return client.withClient(
        () -> {
          try (PJRT_Device_DefaultMemory_Args args = new PJRT_Device_DefaultMemory_Args()) {
            args.struct_size(PJRT_Device_DefaultMemory_Args_STRUCT_SIZE).device(device);
            api.check(() -> api.deviceDefaultMemory.call(args), PjrtApi.Failure.GENERIC, "PJRT_Device_DefaultMemory");
            return MemorySpace.describe(api, args.memory());
          }
        });
  }

  /**
   * The device's memory statistics. Plugins that do not track memory (the CPU plugin) answer with an
   * {@link dev.xlaactors.error.XlaException} whose code is {@code UNIMPLEMENTED}.
   */
  public MemoryStats memoryStats() {
    PjrtApi api = client.api();
    api.need(api.deviceMemoryStats, "PJRT_Device_MemoryStats");
    return client.withClient(
        () -> {
          try (PJRT_Device_MemoryStats_Args a = new PJRT_Device_MemoryStats_Args()) {
            a.struct_size(PJRT_Device_MemoryStats_Args_STRUCT_SIZE).device(device);
            api.check(() -> api.deviceMemoryStats.call(a), PjrtApi.Failure.GENERIC, "PJRT_Device_MemoryStats of " + this);
            return new MemoryStats(
                a.bytes_in_use(),
                a.peak_bytes_in_use_is_set() ? a.peak_bytes_in_use() : -1,
                a.num_allocs_is_set() ? a.num_allocs() : -1,
                a.largest_alloc_size_is_set() ? a.largest_alloc_size() : -1,
                a.bytes_limit_is_set() ? a.bytes_limit() : -1);
          }
        });
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Device d && d.client == client && d.index == index;
  }

  @Override
  public int hashCode() {
    return Objects.hash(System.identityHashCode(client), index);
  }

  @Override
  public String toString() {
    return "Device(" + index + ", id " + id + ", " + kind + ")";
  }
}
