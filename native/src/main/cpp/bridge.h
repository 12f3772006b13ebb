// Internal declarations shared by the bridge's C++ files (bridge_api.cc, ffi_handlers.cc,
// host_callbacks.cc). Java sees only xla_actors_bridge.h; nothing here crosses the JNI boundary.
#ifndef XLA_ACTORS_BRIDGE_H_
#define XLA_ACTORS_BRIDGE_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "pjrt_ffi_extension.h"
#include "xla/ffi/api/c_api.h"
#include "xla/pjrt/c/pjrt_c_api.h"
#include "xla_actors_bridge.h"

namespace xla_actors {

// A loaded plugin: never unloaded, because the FFI handler registry lives inside it.
struct Plugin {
  const PJRT_Api* api = nullptr;
  XlaActors_FFI_Extension* ffi = nullptr;  // null when the plugin has no usable FFI extension
  std::string ffi_problem;                 // why ffi is null
  bool handlers_registered = false;
};

// The plugin whose API table is `api`, or null if it was not loaded through XlaActors_LoadPlugin.
Plugin* FindPlugin(const PJRT_Api* api);

}  // namespace xla_actors

// Per-run state handed to FFI handlers through a PJRT execute context (the C API's opaque type).
struct XlaActors_RunContext {
  const PJRT_Api* api = nullptr;
  PJRT_ExecuteContext* context = nullptr;
  int64_t run_id = 0;
  int64_t sink_id = 0;       // 0: the run has no host-call sink
  float proof_scale = 1.0f;  // read by the FFI proof handler
  std::atomic<bool> cancelled{false};
};

namespace xla_actors {

// Status codes (absl numbering, shared with PJRT and XLA FFI).
constexpr int kCodeInternal = 13;

// Destroys a PJRT error, returning its message (and its code in *code when non-null).
std::string ConsumeError(const PJRT_Api* api, PJRT_Error* error, int* code);

// Copies `message` into a caller's NUL-terminated buffer of `size` bytes (truncating), if any.
void WriteError(char* buffer, size_t size, const std::string& message);

// Answers XLA's metadata probe when the call frame carries one (then the handler must return at
// once). Reports the FFI version the calling XLA speaks and no traits: our handlers may block, so they
// are never command-buffer compatible.
bool AnswerMetadataProbe(XLA_FFI_CallFrame* frame);

// Runs `handler` on a call frame after checking the frame is large enough, turning any C++ exception
// into an FFI error: nothing may unwind into XLA.
XLA_FFI_Error* GuardHandler(XLA_FFI_CallFrame* frame, const char* target, XLA_FFI_Handler* handler);

// An FFI error for a handler to return (XLA copies the message).
XLA_FFI_Error* MakeFfiError(const XLA_FFI_Api* api, XLA_FFI_Error_Code code, const std::string& message);

// Frees an FFI error that a call into XLA's FFI API returned and the caller does not pass on.
void DestroyFfiError(const XLA_FFI_Api* api, XLA_FFI_Error* error);

// The number of elements of an FFI buffer: the product of its dimensions (1 for a scalar).
int64_t BufferElementCount(const XLA_FFI_Buffer* buffer);

// Finds a call frame's attribute by name; returns its index or -1.
int64_t FindAttribute(const XLA_FFI_CallFrame* frame, const char* name);

// Registers one handler for platform "Host". Returns an empty string on success, else the reason.
std::string RegisterFfiHandler(Plugin* plugin, const char* target, XLA_FFI_Handler* handler);

// Registers the LAPACK handlers under jaxlib's target names (lapack_handlers.cc). They answer with an
// error until XlaActors_LoadLapack has succeeded.
std::string RegisterLapackHandlers(Plugin* plugin);

// Registers the native kernels' handlers (matmul_kernels.cc): the products xla_actors.matmul_f32, _q8, _bf16 and
// _f16, the attention of xla_actors.decode_attention and chunk_attention, xla_actors.decoder_layer, and the KV
// cache's maker xla_actors.zeros.
std::string RegisterMatmulHandlers(Plugin* plugin);

// Reads this run's context from an FFI call frame's execute context; null when it has none.
XlaActors_RunContext* RunContextOf(XLA_FFI_CallFrame* frame);

// Registers the run-context type and the bridge's FFI handlers for platform "Host" (once per plugin).
// Returns an empty string on success, else the reason.
std::string RegisterFfiHandlers(Plugin* plugin);

// The type id of XlaActors_RunContext in the plugins' FFI registries (0 before registration).
int64_t RunContextTypeId();

// The host-callback handler and its custom-call target name (host_callbacks.cc).
XLA_FFI_Handler* HostCallbackHandler();
const char* HostCallbackTarget();

}  // namespace xla_actors

#endif  // XLA_ACTORS_BRIDGE_H_
