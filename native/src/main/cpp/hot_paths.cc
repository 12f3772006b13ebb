// The hot paths of xla_actors_bridge.h: a run, an upload and a download, each a fixed sequence of PJRT
// calls made in one JNI crossing. They allocate nothing on the heap, so no C++ exception can leave them.
#include <cstring>

#include "bridge.h"

namespace xla_actors {
namespace {

PJRT_Error* AwaitAndDestroy(const PJRT_Api* api, PJRT_Event* event) {
  if (event == nullptr) return nullptr;
  PJRT_Event_Await_Args await_args;
  std::memset(&await_args, 0, sizeof(await_args));
  await_args.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE;
  await_args.event = event;
  PJRT_Error* error = api->PJRT_Event_Await(&await_args);
  PJRT_Event_Destroy_Args destroy_args;
  std::memset(&destroy_args, 0, sizeof(destroy_args));
  destroy_args.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE;
  destroy_args.event = event;
  PJRT_Error* destroy_error = api->PJRT_Event_Destroy(&destroy_args);
  if (destroy_error != nullptr) ConsumeError(api, destroy_error, nullptr);
  return error;
}

void DestroyBuffer(const PJRT_Api* api, PJRT_Buffer* buffer) {
  PJRT_Buffer_Destroy_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE;
  args.buffer = buffer;
  PJRT_Error* error = api->PJRT_Buffer_Destroy(&args);
  if (error != nullptr) ConsumeError(api, error, nullptr);
}

// Whether a buffer's bytes can be read in place: in host memory with the default dense row-major layout.
// Called only when Java found every function it uses in the plugin's table (see XlaActors_BufferToHost).
bool HostReadable(const PJRT_Api* api, PJRT_Buffer* buffer) {
  PJRT_Buffer_IsOnCpu_Args cpu_args;
  std::memset(&cpu_args, 0, sizeof(cpu_args));
  cpu_args.struct_size = PJRT_Buffer_IsOnCpu_Args_STRUCT_SIZE;
  cpu_args.buffer = buffer;
  PJRT_Error* error = api->PJRT_Buffer_IsOnCpu(&cpu_args);
  if (error != nullptr) {
    ConsumeError(api, error, nullptr);
    return false;
  }
  if (!cpu_args.is_on_cpu) return false;
  PJRT_Buffer_GetMemoryLayout_Args layout_args;
  std::memset(&layout_args, 0, sizeof(layout_args));
  layout_args.struct_size = PJRT_Buffer_GetMemoryLayout_Args_STRUCT_SIZE;
  layout_args.buffer = buffer;
  error = api->PJRT_Buffer_GetMemoryLayout(&layout_args);
  if (error != nullptr) {
    ConsumeError(api, error, nullptr);
    return false;
  }
  if (layout_args.layout.type != PJRT_Buffer_MemoryLayout_Type_Tiled || layout_args.layout.tiled.num_tiles != 0) {
    return false;
  }
  const PJRT_Buffer_MemoryLayout_Tiled& tiled = layout_args.layout.tiled;
  for (size_t i = 0; i < tiled.minor_to_major_size; ++i) {  // row-major: [rank-1, ..., 1, 0]
    if (tiled.minor_to_major[i] != static_cast<int64_t>(tiled.minor_to_major_size - 1 - i)) return false;
  }
  return true;
}

// Copies a host-readable buffer into dst once it is ready; *copied is false when its size is not `size`.
PJRT_Error* CopyInPlace(const PJRT_Api* api, PJRT_Buffer* buffer, void* dst, int64_t size, bool* copied) {
  *copied = false;
  PJRT_Buffer_ReadyEvent_Args ready_args;
  std::memset(&ready_args, 0, sizeof(ready_args));
  ready_args.struct_size = PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE;
  ready_args.buffer = buffer;
  PJRT_Error* error = api->PJRT_Buffer_ReadyEvent(&ready_args);
  if (error == nullptr) error = AwaitAndDestroy(api, ready_args.event);  // at once when already computed
  if (error != nullptr) return error;
  PJRT_Buffer_OnDeviceSizeInBytes_Args size_args;
  std::memset(&size_args, 0, sizeof(size_args));
  size_args.struct_size = PJRT_Buffer_OnDeviceSizeInBytes_Args_STRUCT_SIZE;
  size_args.buffer = buffer;
  error = api->PJRT_Buffer_OnDeviceSizeInBytes(&size_args);
  if (error != nullptr) return error;
  if (static_cast<int64_t>(size_args.on_device_size_in_bytes) != size) return nullptr;  // padded: convert instead
  PJRT_Buffer_UnsafePointer_Args pointer_args;
  std::memset(&pointer_args, 0, sizeof(pointer_args));
  pointer_args.struct_size = PJRT_Buffer_UnsafePointer_Args_STRUCT_SIZE;
  pointer_args.buffer = buffer;
  error = api->PJRT_Buffer_UnsafePointer(&pointer_args);
  if (error != nullptr) return error;
  if (size > 0) std::memcpy(dst, reinterpret_cast<const void*>(pointer_args.buffer_pointer), static_cast<size_t>(size));
  *copied = true;
  return nullptr;
}

}  // namespace
}  // namespace xla_actors

using namespace xla_actors;

extern "C" {

PJRT_Error* XlaActors_ExecuteAndWait(const PJRT_Api* api, PJRT_LoadedExecutable* executable,
                                     const int64_t* argument_addresses, size_t num_arguments, PJRT_Device* device,
                                     PJRT_ExecuteContext* context, int64_t* output_addresses, size_t num_outputs,
                                     const int64_t* non_donatable, size_t num_non_donatable) {
  static_assert(sizeof(int64_t) == sizeof(PJRT_Buffer*), "buffer addresses cross as int64");
  PJRT_Buffer* const* arguments = reinterpret_cast<PJRT_Buffer* const*>(argument_addresses);
  PJRT_Buffer** outputs = reinterpret_cast<PJRT_Buffer**>(output_addresses);
  for (size_t i = 0; i < num_outputs; ++i) outputs[i] = nullptr;
  PJRT_ExecuteOptions options;
  std::memset(&options, 0, sizeof(options));
  options.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  options.context = context;
  options.non_donatable_input_indices = non_donatable;
  options.num_non_donatable_input_indices = num_non_donatable;
  PJRT_Event* complete_event = nullptr;
  PJRT_LoadedExecutable_Execute_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
  args.executable = executable;
  args.options = &options;
  args.argument_lists = &arguments;
  args.num_devices = 1;
  args.num_args = num_arguments;
  args.output_lists = &outputs;
  args.device_complete_events = &complete_event;
  args.execute_device = device;
  PJRT_Error* error = api->PJRT_LoadedExecutable_Execute(&args);
  if (error == nullptr) error = AwaitAndDestroy(api, complete_event);
  if (error != nullptr) {
    for (size_t i = 0; i < num_outputs; ++i) {
      if (outputs[i] != nullptr) DestroyBuffer(api, outputs[i]);
      outputs[i] = nullptr;
    }
  }
  return error;
}

PJRT_Error* XlaActors_BufferDestroy(const PJRT_Api* api, PJRT_Buffer* buffer) {
  PJRT_Buffer_Destroy_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE;
  args.buffer = buffer;
  return api->PJRT_Buffer_Destroy(&args);
}

PJRT_Error* XlaActors_BufferFromHost(const PJRT_Api* api, PJRT_Client* client, const void* data, int type,
                                     const int64_t* dims, size_t num_dims, PJRT_Device* device,
                                     PJRT_Buffer** buffer) {
  *buffer = nullptr;
  PJRT_Client_BufferFromHostBuffer_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
  args.client = client;
  args.data = data;
  args.type = static_cast<PJRT_Buffer_Type>(type);
  args.dims = dims;
  args.num_dims = num_dims;
  // Measured here: no slower than kImmutableOnlyDuringCall, and the plugin may copy off this thread.
  args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
  args.device = device;
  PJRT_Error* error = api->PJRT_Client_BufferFromHostBuffer(&args);
  if (error != nullptr) return error;
  error = AwaitAndDestroy(api, args.done_with_host_buffer);
  if (error != nullptr) {
    DestroyBuffer(api, args.buffer);
    return error;
  }
  *buffer = args.buffer;
  return nullptr;
}

PJRT_Error* XlaActors_BufferToHost(const PJRT_Api* api, PJRT_Buffer* buffer, void* dst, int64_t size,
                                   int* readable) {
  if (*readable < 0) *readable = HostReadable(api, buffer) ? 1 : 0;
  if (*readable == 1) {
    bool copied = false;
    PJRT_Error* error = CopyInPlace(api, buffer, dst, size, &copied);
    if (error != nullptr || copied) return error;
  }
  PJRT_Buffer_ToHostBuffer_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
  args.src = buffer;
  args.dst = dst;
  args.dst_size = static_cast<size_t>(size);
  PJRT_Error* error = api->PJRT_Buffer_ToHostBuffer(&args);
  if (error != nullptr) return error;
  return AwaitAndDestroy(api, args.event);
}

}  // extern "C"
