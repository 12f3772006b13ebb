// The host-callback FFI handler: a program's stablehlo.custom_call @xla_actors.host_callback with a
// string attribute `callback` calls Java in the middle of an execution.
//
// Flow: the handler registers a PendingCall under a fresh tag, describes the call (XLA's input
// pointers, types, dims) to the process-wide Java sink, which copies the inputs and only enqueues the
// call (into an actor mailbox), and waits on the tag with the deadline the sink returned. Java answers
// with XlaActors_CompleteHostCall (outputs are copied straight into XLA's result buffers, which stay
// valid because the handler is still waiting) or XlaActors_FailHostCall. A reply
// for a tag that is gone (timed out, run ended) finds nothing and is dropped: nothing is ever written
// into buffers XLA has freed.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <sched.h>
#include <string>
#include <unordered_map>
#include <vector>

#include "bridge.h"
#include "xla/ffi/api/c_api.h"

namespace xla_actors {
namespace {

constexpr const char kHostCallbackTarget[] = "xla_actors.host_callback";

struct PendingCall {
  std::atomic<bool> settled{false};  // state left kWaiting: read without the lock by the spinning waiter
  std::mutex mutex;
  std::condition_variable answered;
  enum class State { kWaiting, kCompleted, kFailed, kAbandoned } state = State::kWaiting;
  int error_code = 0;
  std::string error;
  XLA_FFI_Args* args = nullptr;  // XLA's input buffers; valid only while state == kWaiting
  XLA_FFI_Rets* rets = nullptr;  // XLA's result buffers; valid only while state == kWaiting
  int borrowers = 0;  // readers of XLA's input buffers on other threads; the handler waits for them to go
  bool answering = false;  // an answer waits to write over input buffers: no new reader may start
};

std::mutex g_calls_mutex;
std::unordered_map<int64_t, std::shared_ptr<PendingCall>> g_calls;

std::shared_ptr<PendingCall> FindCall(int64_t tag) {
  std::lock_guard<std::mutex> lock(g_calls_mutex);
  auto it = g_calls.find(tag);
  return it == g_calls.end() ? nullptr : it->second;
}

void EraseCall(int64_t tag) {
  std::lock_guard<std::mutex> lock(g_calls_mutex);
  g_calls.erase(tag);
}

// The PJRT buffer type of an XLA FFI dtype (the runtime's DType speaks PJRT's numbers): they agree up to
// f64 and differ after; -1 for a dtype host calls do not carry.
int PjrtTypeOf(XLA_FFI_DataType dtype) {
  switch (dtype) {
    case XLA_FFI_DataType_BF16: return PJRT_Buffer_Type_BF16;
    case XLA_FFI_DataType_C64: return PJRT_Buffer_Type_C64;
    case XLA_FFI_DataType_C128: return PJRT_Buffer_Type_C128;
    case XLA_FFI_DataType_F8E5M2: return PJRT_Buffer_Type_F8E5M2;
    case XLA_FFI_DataType_F8E4M3FN: return PJRT_Buffer_Type_F8E4M3FN;
    default:
      if (dtype >= XLA_FFI_DataType_PRED && dtype <= XLA_FFI_DataType_F64) return static_cast<int>(dtype);
      return -1;
  }
}

int64_t ByteSizeOf(int pjrt_type) {
  switch (pjrt_type) {
    case 1: case 2: case 6: case 16: case 17: return 1;  // pred, s8, u8, f8e5m2, f8e4m3fn
    case 3: case 7: case 10: case 13: return 2;          // s16, u16, f16, bf16
    case 4: case 8: case 11: return 4;                   // s32, u32, f32
    case 5: case 9: case 12: case 14: return 8;          // s64, u64, f64, c64
    case 15: return 16;                                  // c128
    default: return -1;
  }
}

int64_t BytesOf(const XLA_FFI_Buffer* buffer) { return BufferElementCount(buffer) * ByteSizeOf(PjrtTypeOf(buffer->dtype)); }

bool Overlaps(const void* a, int64_t a_size, const void* b, int64_t b_size) {
  auto x = reinterpret_cast<uintptr_t>(a);
  auto y = reinterpret_cast<uintptr_t>(b);
  return a_size > 0 && b_size > 0 && x < y + static_cast<uintptr_t>(b_size) && y < x + static_cast<uintptr_t>(a_size);
}

// Whether a result buffer is (part of) an input buffer: the program aliases them (output_operand_aliases,
// an in-place host call), so writing the answer changes the inputs.
bool ResultsOverlapInputs(const XLA_FFI_Args& args, const XLA_FFI_Rets& rets) {
  for (int64_t j = 0; j < rets.size; ++j) {
    auto* result = static_cast<XLA_FFI_Buffer*>(rets.rets[j]);
    for (int64_t i = 0; i < args.size; ++i) {
      auto* input = static_cast<XLA_FFI_Buffer*>(args.args[i]);
      if (Overlaps(result->data, BytesOf(result), input->data, BytesOf(input))) return true;
    }
  }
  return false;
}

// Copies each output into its result buffer. An output may be an input buffer that another output's
// result buffer aliases (say, an in-place call answering with its two inputs swapped): such a source is
// set aside first, as writing that other output would change it. An output already in place is skipped.
void WriteOutputs(const XLA_FFI_Rets& rets, void* const* outputs, const int64_t* sizes, int64_t count) {
  std::vector<std::vector<char>> aside;  // allocated only when some source must be set aside
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t j = 0; j < count; ++j) {
      auto* result = static_cast<XLA_FFI_Buffer*>(rets.rets[j]);
      if (j != i && Overlaps(outputs[i], sizes[i], result->data, sizes[j])) {
        const char* source = static_cast<const char*>(outputs[i]);
        aside.resize(static_cast<size_t>(count));
        aside[i].assign(source, source + sizes[i]);
        break;
      }
    }
  }
  for (int64_t i = 0; i < count; ++i) {
    void* target = static_cast<XLA_FFI_Buffer*>(rets.rets[i])->data;
    const void* source = aside.empty() || aside[i].empty() ? outputs[i] : aside[i].data();
    if (sizes[i] > 0 && source != target) std::memmove(target, source, static_cast<size_t>(sizes[i]));
  }
}

std::atomic<XlaActors_HostCallSink> g_sink{nullptr};
std::atomic<int64_t> g_spin_nanos{0};

// Spins up to the configured time until the call is settled; true if it was.
bool SpinUntilSettled(const PendingCall& call, int64_t max_nanos) {
  if (max_nanos <= 0) return call.settled.load(std::memory_order_acquire);
  auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(max_nanos);
  while (!call.settled.load(std::memory_order_acquire)) {
    for (int i = 0; i < 64; ++i) {
      if (call.settled.load(std::memory_order_acquire)) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    if (std::chrono::steady_clock::now() >= until) return false;
    // Give the core away for a moment: when the thread that will answer shares this core (a busy
    // machine), it runs now instead of after this spin's time slice, and an idle core makes this cheap.
    sched_yield();
  }
  return true;
}

// Tags are a bijective scramble of a counter with a per-process random key: unique, and not guessable
// from another run's tags, so no caller can answer a call it was not given.
uint64_t NextTag() {
  static const uint64_t key = [] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }();
  static std::atomic<uint64_t> counter{1};
  uint64_t z = (counter.fetch_add(1) ^ key) + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return z == 0 ? 1 : z;  // 0 never names a call
}

// The Java-facing description of a call's buffers, kept alive while the sink runs.
struct BufferList {
  std::vector<void*> data;
  std::vector<int32_t> types;
  std::vector<int64_t> ranks;
  std::vector<int64_t> dims;
};

// Describes `count` FFI buffers; returns false with `problem` set for a dtype host calls cannot carry.
bool DescribeBuffers(int64_t count, void** buffers, const std::string& name, const char* role, BufferList* out,
                     std::string* problem) {
  for (int64_t i = 0; i < count; ++i) {
    auto* buffer = static_cast<XLA_FFI_Buffer*>(buffers[i]);
    int type = PjrtTypeOf(buffer->dtype);
    if (type < 0) {
      *problem = "host callback '" + name + "': " + role + " " + std::to_string(i) + " has XLA FFI dtype " +
                 std::to_string(buffer->dtype) + ", which host callbacks do not support";
      return false;
    }
    out->data.push_back(buffer->data);
    out->types.push_back(type);
    out->ranks.push_back(buffer->rank);
    for (int64_t d = 0; d < buffer->rank; ++d) out->dims.push_back(buffer->dims[d]);
  }
  return true;
}

XLA_FFI_Error* HostCallbackHandlerImpl(XLA_FFI_CallFrame* frame) {
  if (AnswerMetadataProbe(frame)) return nullptr;
  const XLA_FFI_Api* api = frame->api;
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return nullptr;

  std::string name;
  for (int64_t i = 0; i < frame->attrs.size; ++i) {
    const XLA_FFI_ByteSpan* attr_name = frame->attrs.names[i];
    if (std::string(attr_name->ptr, attr_name->len) == "callback" && frame->attrs.types[i] == XLA_FFI_AttrType_STRING) {
      auto* text = static_cast<XLA_FFI_ByteSpan*>(frame->attrs.attrs[i]);
      name.assign(text->ptr, text->len);
    }
  }
  if (name.empty()) {
    return MakeFfiError(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                        std::string(kHostCallbackTarget) + " needs a string attribute 'callback' in backend_config");
  }
  XlaActors_RunContext* run = RunContextOf(frame);
  XlaActors_HostCallSink sink = g_sink.load();
  if (run == nullptr || run->sink_id == 0 || sink == nullptr) {
    return MakeFfiError(api, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                        "host callback '" + name + "' was called in a run that has no host-callback sink; run programs "
                        "with host callbacks through the actors module's CallbackRuntime");
  }
  if (run->cancelled.load()) {
    return MakeFfiError(api, XLA_FFI_Error_Code_CANCELLED, "host callback '" + name + "': the run was cancelled");
  }
  BufferList inputs;
  BufferList outputs;
  std::string problem;
  if (!DescribeBuffers(frame->args.size, frame->args.args, name, "input", &inputs, &problem) ||
      !DescribeBuffers(frame->rets.size, frame->rets.rets, name, "output", &outputs, &problem)) {
    return MakeFfiError(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, problem);
  }

  int64_t tag = static_cast<int64_t>(NextTag());
  auto call = std::make_shared<PendingCall>();
  call->args = &frame->args;
  call->rets = &frame->rets;
  {
    std::lock_guard<std::mutex> lock(g_calls_mutex);
    g_calls[tag] = call;
  }
  XlaActors_HostCall description;
  description.sink_id = run->sink_id;
  description.run_id = run->run_id;
  description.tag = tag;
  description.callback = name.data();
  description.callback_size = static_cast<int64_t>(name.size());
  description.num_inputs = frame->args.size;
  description.input_data = inputs.data.data();
  description.input_types = inputs.types.data();
  description.input_ranks = inputs.ranks.data();
  description.input_dims = inputs.dims.data();
  description.num_outputs = frame->rets.size;
  description.output_types = outputs.types.data();
  description.output_ranks = outputs.ranks.data();
  description.output_dims = outputs.dims.data();
  int64_t wait_millis = 0;
  try {
    wait_millis = sink(&description);
  } catch (...) {
    wait_millis = -1;  // a Java exception surfaced as a C++ one: the call was not dispatched
  }

  if (wait_millis > 0) SpinUntilSettled(*call, g_spin_nanos.load(std::memory_order_relaxed));
  std::unique_lock<std::mutex> lock(call->mutex);
  if (wait_millis > 0) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_millis);
    call->answered.wait_until(lock, deadline, [&] { return call->state != PendingCall::State::kWaiting; });
  }
  if (call->state == PendingCall::State::kWaiting) {
    call->state = PendingCall::State::kAbandoned;  // a late reply finds this and writes nothing
    call->settled.store(true, std::memory_order_release);  // no longer waiting: not counted as pending
    call->answered.notify_all();  // an answer waiting for readers to finish gives up
    if (wait_millis > 0) {
      call->error_code = XLA_FFI_Error_Code_DEADLINE_EXCEEDED;
      call->error = "host callback '" + name + "' got no reply within " + std::to_string(wait_millis) +
                    " ms (the native wait's backstop)";
    } else {
      call->error_code = XLA_FFI_Error_Code_INTERNAL;
      call->error = "host callback '" + name + "' could not be dispatched to Java";
    }
  }
  // The inputs are XLA's until this returns: let a borrowed read (a copy, never user code) finish first.
  // No new one starts, as the state is no longer kWaiting.
  call->answered.wait(lock, [&] { return call->borrowers == 0; });
  call->args = nullptr;
  call->rets = nullptr;
  PendingCall::State state = call->state;
  std::string error = call->error;
  int code = call->error_code;
  lock.unlock();
  EraseCall(tag);
  if (state == PendingCall::State::kCompleted) return nullptr;
  return MakeFfiError(api, static_cast<XLA_FFI_Error_Code>(code), error);
}

XLA_FFI_Error* HostCallbackHandlerGuarded(XLA_FFI_CallFrame* frame) {
  return GuardHandler(frame, kHostCallbackTarget, &HostCallbackHandlerImpl);
}

}  // namespace

XLA_FFI_Handler* HostCallbackHandler() { return &HostCallbackHandlerGuarded; }
const char* HostCallbackTarget() { return kHostCallbackTarget; }

}  // namespace xla_actors

using namespace xla_actors;

extern "C" {

void XlaActors_SetHostCallSink(XlaActors_HostCallSink sink) { g_sink.store(sink); }

int XlaActors_CompleteHostCall(int64_t tag, void* const* outputs, const int64_t* sizes, int64_t count,
                               int64_t own_borrows, char* error, size_t error_size) {
  try {
    std::shared_ptr<PendingCall> call = FindCall(tag);
    if (call == nullptr) return 0;
    std::unique_lock<std::mutex> lock(call->mutex);
    if (call->state != PendingCall::State::kWaiting || call->answering) return 0;
    XLA_FFI_Rets* rets = call->rets;
    std::string problem;
    if (count != rets->size || (count > 0 && (outputs == nullptr || sizes == nullptr))) {
      problem = "expected " + std::to_string(rets->size) + " outputs, got " + std::to_string(count);
    }
    // Check every output before writing any, so a failed answer leaves XLA's buffers untouched.
    for (int64_t i = 0; problem.empty() && i < count; ++i) {
      auto* buffer = static_cast<XLA_FFI_Buffer*>(rets->rets[i]);
      int64_t expected = BytesOf(buffer);
      if (sizes[i] != expected || (expected > 0 && outputs[i] == nullptr)) {
        problem = "output " + std::to_string(i) + " needs " + std::to_string(expected) + " bytes, got " +
                  (outputs[i] == nullptr ? std::string("none") : std::to_string(sizes[i]));
      }
    }
    if (problem.empty() && ResultsOverlapInputs(*call->args, *rets)) {
      // The answer writes over input buffers: let reads already in progress on other threads finish (a
      // bounded copy each), and start no new one, so no reader sees half an answer.
      call->answering = true;
      call->answered.wait(lock, [&] {
        return call->borrowers <= own_borrows || call->state != PendingCall::State::kWaiting;
      });
      call->answering = false;
      if (call->state != PendingCall::State::kWaiting) return 0;  // given up meanwhile: write nothing
    }
    if (problem.empty()) WriteOutputs(*rets, outputs, sizes, count);
    if (problem.empty()) {
      call->state = PendingCall::State::kCompleted;
    } else {
      call->state = PendingCall::State::kFailed;
      call->error_code = XLA_FFI_Error_Code_INVALID_ARGUMENT;
      call->error = problem;
      WriteError(error, error_size, problem);
    }
    call->settled.store(true, std::memory_order_release);
    call->answered.notify_all();
    return 1;
  } catch (const std::exception& e) {
    WriteError(error, error_size, std::string("answering the host call failed: ") + e.what());
  } catch (...) {
    WriteError(error, error_size, "answering the host call failed with an unknown C++ exception");
  }
  return 0;
}

int XlaActors_FailHostCall(int64_t tag, int code, const char* message, int64_t message_size) {
  try {
    std::shared_ptr<PendingCall> call = FindCall(tag);
    if (call == nullptr) return 0;
    std::string text = message == nullptr || message_size <= 0 ? std::string("the host callback failed (no message)")
                                                                : std::string(message, static_cast<size_t>(message_size));
    std::lock_guard<std::mutex> lock(call->mutex);
    if (call->state != PendingCall::State::kWaiting) return 0;
    call->state = PendingCall::State::kFailed;
    call->error_code = code > 0 && code <= 16 ? code : XLA_FFI_Error_Code_UNKNOWN;
    call->error = text;
    call->settled.store(true, std::memory_order_release);
    call->answered.notify_all();
    return 1;
  } catch (...) {
    return 0;
  }
}

int XlaActors_BorrowHostCallInputs(int64_t tag) {
  try {
    std::shared_ptr<PendingCall> call = FindCall(tag);
    if (call == nullptr) return 0;
    std::lock_guard<std::mutex> lock(call->mutex);
    if (call->state != PendingCall::State::kWaiting || call->answering) return 0;
    ++call->borrowers;
    return 1;
  } catch (...) {
    return 0;
  }
}

void XlaActors_ReturnHostCallInputs(int64_t tag) {
  try {
    std::shared_ptr<PendingCall> call = FindCall(tag);  // still there: the handler waits for every borrower
    if (call == nullptr) return;
    std::lock_guard<std::mutex> lock(call->mutex);
    if (call->borrowers > 0) {
      --call->borrowers;
      call->answered.notify_all();  // the handler waits for 0; an in-place answer for its own borrows
    }
  } catch (...) {
  }
}

void XlaActors_SetHostCallSpinNanos(int64_t nanos) { g_spin_nanos.store(nanos < 0 ? 0 : nanos); }

int64_t XlaActors_PendingHostCallCount(void) {
  // Only calls still waiting for their answer: a call answered, failed or given up leaves g_calls only
  // when its XLA thread wakes and returns, which can be after Java has failed the call and the run's
  // caller has learned of it. Counting those too made a failed run look as if it still held a call.
  // The flag, not the state, so a count never waits on a call's lock (held while an answer is copied).
  std::lock_guard<std::mutex> lock(g_calls_mutex);
  int64_t waiting = 0;
  for (const auto& entry : g_calls) {
    if (!entry.second->settled.load(std::memory_order_acquire)) ++waiting;
  }
  return waiting;
}

}  // extern "C"
