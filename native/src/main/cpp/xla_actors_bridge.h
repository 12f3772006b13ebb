// The bridge's own C API, next to the PJRT C API: what Java cannot do through the generated PJRT
// binding alone. JavaCPP parses this header into dev.xlaactors.nativebridge.pjrt.global.Pjrt.
//  - loading a plugin file (dlopen, never dlclose) and finding its GetPjrtApi;
//  - registering the bridge's XLA FFI handlers with a plugin's FFI extension, after checking its size;
//  - per-run contexts that carry the run's id and host-call sink to the handlers;
//  - answering the host calls that an XLA thread is blocked on.
// Every function here catches its own failures: none throws a C++ exception, none aborts.
#ifndef XLA_ACTORS_BRIDGE_API_H_
#define XLA_ACTORS_BRIDGE_API_H_

#include <stddef.h>
#include <stdint.h>

#include "xla/pjrt/c/pjrt_c_api.h"

#ifdef __cplusplus
extern "C" {
#endif

// Loads the PJRT plugin at `path` (UTF-8) and returns its API table, or null with the reason written
// into `error` (NUL-terminated, at most `error_size` bytes). Never unloaded: XLA keeps process-wide
// registries inside it. Checks the API's major version and struct size before returning it, and calls
// PJRT_Plugin_Initialize once.
const PJRT_Api* XlaActors_LoadPlugin(const char* path, char* error, size_t error_size);

// Registers the bridge's FFI handlers (xla_actors.host_callback, xla_actors.scale_add, the lapack_*_ffi
// targets, xla_actors.matmul_f32 and xla_actors.matmul_q8) for platform
// "Host". Returns 1 when registered, 0 when the plugin has no usable FFI extension (the reason in
// `error`), -1 on failure (the reason in `error`). Idempotent per plugin.
int XlaActors_RegisterFfiHandlers(const PJRT_Api* api, char* error, size_t error_size);

// Loads the LAPACK library at `path` (UTF-8; bytedeco's OpenBLAS, which Java unpacks) for the
// lapack_*_ffi handlers that jnp.linalg's CPU lowerings call. Returns 1 when loaded (now or before),
// with a description of the library (OpenBLAS's configuration and the path) in `message`, or 0 with
// the reason in `message`, which the handlers then also report. Never unloaded.
int XlaActors_LoadLapack(const char* path, char* message, size_t message_size);

// Records why LAPACK could not be loaded (say, OpenBLAS is not on the class path), for the handlers'
// errors. Ignored once LAPACK is loaded.
void XlaActors_SetLapackUnavailable(const char* reason);

// The instruction set the native matmul kernels (xla_actors.matmul_f32, xla_actors.matmul_q8) run with:
// "avx512", "avx2" or "portable": the widest this CPU has, capped by XLA_ACTORS_KERNEL_ISA or by XLA_FLAGS'
// --xla_cpu_max_isa. Decided on first use, then fixed for the process.
const char* XlaActors_MatmulKernelIsa(void);

// The most threads (the calling XLA thread included) that split one native matmul's output columns:
// XLA_ACTORS_KERNEL_THREADS, else the CPUs this process may run on, at most 16. They are XLA's intra-op pool's
// threads where the plugin lends its pool to FFI handlers (as the pinned one does), else a pool of our own.
int XlaActors_MatmulKernelThreads(void);

// The sum of e^(x[i] - shift) over i in [0, n), in double; each term in f32 to a few units in the last place
// (a polynomial, by vectors of the matmul kernels' instruction set), a term whose x[i] - shift is below -87.3
// (-inf among them) exactly 0. When `terms` is not null, terms[i] gets each term. x and terms hold at least n
// values (the caller checks; nothing here does). The sampler's pass over a row of logits.
double XlaActors_ExpSum(const float* x, int64_t n, float shift, double* terms);

// One host call, as the sink sees it. Valid only during the sink's call; copy what you keep.
typedef struct XlaActors_HostCall {
  int64_t sink_id;          // the id given to XlaActors_RunContext_Create
  int64_t run_id;
  int64_t tag;              // answers name the call by this tag
  const char* callback;     // UTF-8, not NUL-terminated
  int64_t callback_size;
  int64_t num_inputs;
  void* const* input_data;  // XLA's input buffers, row-major little-endian
  const int32_t* input_types;   // PJRT_Buffer_Type of each input
  const int64_t* input_ranks;
  const int64_t* input_dims;    // all inputs' dims, concatenated
  int64_t num_outputs;
  const int32_t* output_types;  // PJRT_Buffer_Type of each expected output
  const int64_t* output_ranks;
  const int64_t* output_dims;   // all outputs' dims, concatenated
} XlaActors_HostCall;

// Receives every host call, on the XLA thread that made it, which then waits for the answer. Returns
// how long to wait, in milliseconds, before failing the call natively (the backstop); a value <= 0
// fails the call at once (the sink has already answered it, or could not dispatch it).
typedef int64_t (*XlaActors_HostCallSink)(const XlaActors_HostCall* call);

// Sets the process-wide sink (set once by Java; null turns host calls into errors).
void XlaActors_SetHostCallSink(XlaActors_HostCallSink sink);

// Per-run state handed to the FFI handlers through a PJRT execute context.
typedef struct XlaActors_RunContext XlaActors_RunContext;

// Creates a run context (and its PJRT execute context) on a plugin whose handlers are registered.
// `sink_id` != 0 routes the run's host calls to the sink with that id; 0 makes them fail. Null with the
// reason in `error` on failure.
XlaActors_RunContext* XlaActors_RunContext_Create(const PJRT_Api* api, int64_t run_id, float scale_add_factor,
                                                  int64_t sink_id, char* error, size_t error_size);

// The PJRT execute context to put into PJRT_ExecuteOptions.context.
PJRT_ExecuteContext* XlaActors_RunContext_ExecuteContext(XlaActors_RunContext* run);

// Makes the run's later host calls fail at once with CANCELLED.
void XlaActors_RunContext_Cancel(XlaActors_RunContext* run);

// Destroys the run context and its execute context. Null is ignored.
void XlaActors_RunContext_Destroy(XlaActors_RunContext* run);

// Copies `count` outputs into the waiting call's result buffers and wakes it. Each output's byte size
// must equal what XLA expects. An output may be one of the call's own input buffers, and a result buffer
// may be an input buffer (the program aliases them, output_operand_aliases): the copies then keep every
// output's source intact until it is copied, and first wait for other readers of the inputs to finish.
// `own_borrows` is how many XlaActors_BorrowHostCallInputs of this call the caller itself holds while it
// answers (they are not waited for). Returns 1 when the call was waiting (answered, or failed with a size
// mismatch described in `error`), 0 when it was no longer waiting (nothing written).
int XlaActors_CompleteHostCall(int64_t tag, void* const* outputs, const int64_t* sizes, int64_t count,
                               int64_t own_borrows, char* error, size_t error_size);

// Fails the waiting call with an absl status code and UTF-8 message (null or empty gives a generic
// message). Returns 1 when the call was waiting, 0 otherwise.
int XlaActors_FailHostCall(int64_t tag, int code, const char* message, int64_t message_size);

// Lends the waiting call's input buffers to a reader on another thread: returns 1, and the call's
// handler will not return to XLA (whose buffers they are) until XlaActors_ReturnHostCallInputs, when the
// call was still waiting; 0 once it was answered, failed or given up, or while an answer is being
// written over them (read nothing then). Every 1 must be
// matched by one return, soon: the XLA thread waits for it.
int XlaActors_BorrowHostCallInputs(int64_t tag);

// Ends one XlaActors_BorrowHostCallInputs that returned 1.
void XlaActors_ReturnHostCallInputs(int64_t tag);

// Host calls currently waiting for an answer, across all runs: not yet answered, failed or given up
// (a settled call is not counted, even while its XLA thread has yet to return from the handler).
int64_t XlaActors_PendingHostCallCount(void);

// How long an XLA thread that made a host call spins, checking for the answer, before it sleeps on a
// condition variable (0: sleeps at once). A short spin saves the wake-up when the answer is imminent.
// Process-wide; negative values count as 0.
void XlaActors_SetHostCallSpinNanos(int64_t nanos);

// ---- Hot paths: one JNI crossing instead of one per args field (hot_paths.cc) ----
// Each is a fixed sequence of PJRT calls that Java could make one by one through the binding; they
// exist because a run, an upload and a download are made millions of times and each field set from
// Java is a JNI call. Each returns the PJRT error (the caller destroys it) or null.

// Runs `executable` on `device` with one argument list and waits until the run is complete.
// `outputs` receives `num_outputs` new buffers (all 0 on failure; nothing leaks). Buffers cross as
// their addresses (PJRT_Buffer* as int64), so each list is one array copy, not a JNI call per element.
// `non_donatable` lists the argument indices PJRT must not donate even where the program aliases the
// parameter to an output (PJRT copies instead); the Java side lists every argument not passed as donated.
PJRT_Error* XlaActors_ExecuteAndWait(const PJRT_Api* api, PJRT_LoadedExecutable* executable,
                                     const int64_t* arguments, size_t num_arguments, PJRT_Device* device,
                                     PJRT_ExecuteContext* context, int64_t* outputs, size_t num_outputs,
                                     const int64_t* non_donatable, size_t num_non_donatable);

// Destroys a buffer (one JNI crossing for the most frequent destroy).
PJRT_Error* XlaActors_BufferDestroy(const PJRT_Api* api, PJRT_Buffer* buffer);

// Copies dense row-major host data into a new buffer on `device`, waiting until the plugin is done
// reading `data`.
PJRT_Error* XlaActors_BufferFromHost(const PJRT_Api* api, PJRT_Client* client, const void* data, int type,
                                     const int64_t* dims, size_t num_dims, PJRT_Device* device,
                                     PJRT_Buffer** buffer);

// Copies `buffer` into `dst` (`size` bytes, dense row-major), waiting for the buffer to be ready. A
// buffer in host memory with the default layout is read in place (a memcpy), which skips
// ToHostBuffer's hand-off to a worker thread; `*readable` caches whether that holds (-1 unknown, 0, 1).
// The caller passes 0 for a plugin that lacks any function the in-place read uses.
PJRT_Error* XlaActors_BufferToHost(const PJRT_Api* api, PJRT_Buffer* buffer, void* dst, int64_t size,
                                   int* readable);

#ifdef __cplusplus
}
#endif

#endif  // XLA_ACTORS_BRIDGE_API_H_
