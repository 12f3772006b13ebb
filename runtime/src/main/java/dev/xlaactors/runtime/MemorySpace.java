package dev.xlaactors.runtime;

import static dev.xlaactors.nativebridge.pjrt.global.Pjrt.*;

import dev.xlaactors.nativebridge.pjrt.PJRT_Memory;
import dev.xlaactors.nativebridge.pjrt.PJRT_Memory_DebugString_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Memory_Id_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Memory_Kind_Args;

/**
 * A memory space a device can address (for the CPU plugin: {@code device} and pinned/unpinned host
 * memory), as PJRT describes it.
 *
 * @param id the memory's id
 * @param kind the memory kind, e.g. {@code device} or {@code pinned_host}
 * @param debugString the plugin's description of it
 */
public record MemorySpace(int id, String kind, String debugString) {
  static MemorySpace describe(PjrtApi api, PJRT_Memory memory) {
    int id = -1;
    String kind = "";
    String debug = "";
    if (api.memoryId != null) {
      try (PJRT_Memory_Id_Args args = new PJRT_Memory_Id_Args()) {
        args.struct_size(PJRT_Memory_Id_Args_STRUCT_SIZE).memory(memory);
        api.check(() -> api.memoryId.call(args), PjrtApi.Failure.GENERIC, "PJRT_Memory_Id");
        id = args.id();
      }
    }
    if (api.memoryKind != null) {
      try (PJRT_Memory_Kind_Args args = new PJRT_Memory_Kind_Args()) {
        args.struct_size(PJRT_Memory_Kind_Args_STRUCT_SIZE).memory(memory);
        api.check(() -> api.memoryKind.call(args), PjrtApi.Failure.GENERIC, "PJRT_Memory_Kind");
        kind = PjrtApi.utf8(args.kind(), args.kind_size());
      }
    }
    if (api.memoryDebugString != null) {
      try (PJRT_Memory_DebugString_Args args = new PJRT_Memory_DebugString_Args()) {
        args.struct_size(PJRT_Memory_DebugString_Args_STRUCT_SIZE).memory(memory);
        api.check(() -> api.memoryDebugString.call(args), PjrtApi.Failure.GENERIC, "PJRT_Memory_DebugString");
        debug = PjrtApi.utf8(args.debug_string(), args.debug_string_size());
      }
    }
    return new MemorySpace(id, kind, debug);
  }
}
