// Shared declarations of the xla-actors native bridge: the native objects behind the Java
// handles, and the one place that turns a PJRT or bridge failure into a Java exception.
#ifndef XLA_ACTORS_BRIDGE_H_
#define XLA_ACTORS_BRIDGE_H_

#include <jni.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "pjrt_ffi_extension.h"
#include "xla/ffi/api/c_api.h"
#include "xla/pjrt/c/pjrt_c_api.h"

namespace xla_actors {

// Which Java exception class a failure becomes; mirrors XlaException.Kind (same order).
enum class FailureKind : int { kGeneric = 0, kPlugin = 1, kCompile = 2, kExecution = 3, kInvalidArgument = 4 };

// Java-visible status codes beyond PJRT's (which reuse the absl codes 0..16).
constexpr int kCodeInvalidArgument = 3;
constexpr int kCodeFailedPrecondition = 9;
constexpr int kCodeInternal = 13;
constexpr int kCodeUnimplemented = 12;

// A loaded plugin: never unloaded, because the FFI handler registry lives inside it.
struct Plugin {
  void* library = nullptr;
  const PJRT_Api* api = nullptr;
  XlaActors_FFI_Extension* ffi = nullptr;  // null when the plugin has no usable FFI extension
  int64_t run_context_type_id = 0;        // type id of RunContext in the plugin's FFI registry
  bool handlers_registered = false;
};

struct Client {
  Plugin* plugin;
  PJRT_Client* client;
  std::vector<PJRT_Device*> devices;  // addressable devices, owned by the client
};

struct Executable {
  Client* owner;
  PJRT_LoadedExecutable* loaded;
  size_t num_outputs;
};

struct Buffer {
  Client* owner;
  PJRT_Buffer* buffer;
  // Whether the bytes can be read in place (host memory, dense row-major): -1 not yet known, 0, 1.
  std::atomic<int> host_readable{-1};
};

// Per-run state handed to FFI handlers through a PJRT execute context.
struct RunContext {
  int64_t run_id = 0;
  float proof_scale = 1.0f;  // read by the FFI proof handler
  jobject host_call_sink = nullptr;   // global ref to a NativeHostCallSink; null without callbacks
  jmethodID on_host_call = nullptr;   // NativeHostCallSink.onHostCall, resolved when the sink is set
  std::atomic<bool> cancelled{false};
};

struct ExecuteContext {
  Plugin* plugin;
  PJRT_ExecuteContext* context;
  RunContext* run;  // owned by this object
};

// Throws an XlaException of the given kind and code into `env`. Always returns false so callers
// can write `return fail(...)`-style early exits.
bool ThrowXla(JNIEnv* env, FailureKind kind, int code, const std::string& message);

// If `error` is non-null: throws it as an XlaException (message prefixed by `what`), destroys the
// PJRT error and returns true. Returns false when `error` is null.
bool ThrowIfError(JNIEnv* env, const PJRT_Api* api, PJRT_Error* error, FailureKind kind, const char* what);

// Destroys a PJRT error, returning its message and code (for paths that cannot throw at once).
std::string ConsumeError(const PJRT_Api* api, PJRT_Error* error, int* code);

// Awaits and destroys an event; returns its error (or null).
PJRT_Error* AwaitAndDestroy(const PJRT_Api* api, PJRT_Event* event);

// Answers XLA's metadata probe when the call frame carries one (then the handler must return at
// once). Reports the FFI version the calling XLA speaks and no traits: our handlers may block, so they
// are never command-buffer compatible.
bool AnswerMetadataProbe(XLA_FFI_CallFrame* frame);

// An FFI error for a handler to return (XLA copies the message).
XLA_FFI_Error* MakeFfiError(const XLA_FFI_Api* api, XLA_FFI_Error_Code code, const std::string& message);

// Reads this run's RunContext from an FFI call frame's execute context; null when it has none.
RunContext* RunContextOf(XLA_FFI_CallFrame* frame);

// Registers the bridge's FFI handlers for platform "Host" on the plugin (once per plugin).
std::string RegisterFfiHandlers(Plugin* plugin);

// The cached JavaVM, for native threads that call into Java.
JavaVM* CachedJavaVm();

}  // namespace xla_actors

#endif  // XLA_ACTORS_BRIDGE_H_
