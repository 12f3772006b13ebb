// The host-callback FFI handler: a program's stablehlo.custom_call @xla_actors.host_callback with a
// string attribute `callback` calls Java in the middle of an execution.
//
// Flow: the handler copies the inputs into Java direct ByteBuffers, registers a PendingCall under a
// fresh tag, hands the call to the run's Java sink (which only enqueues it into an actor mailbox), and
// waits on the tag with a deadline. Java answers with CompleteHostCall (outputs are copied straight into
// XLA's result buffers, which stay valid because the handler is still waiting) or FailHostCall. A reply
// for a tag that is gone (timed out, run ended) finds nothing and is dropped: nothing is ever written
// into buffers XLA has freed.
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "bridge.h"
#include "xla/ffi/api/c_api.h"

namespace xla_actors {
namespace {

constexpr const char kHostCallbackTarget[] = "xla_actors.host_callback";

struct PendingCall {
  std::mutex mutex;
  std::condition_variable answered;
  enum class State { kWaiting, kCompleted, kFailed, kAbandoned } state = State::kWaiting;
  int error_code = 0;
  std::string error;
  XLA_FFI_Rets* rets = nullptr;  // XLA's result buffers; valid only while state == kWaiting
};

std::mutex g_calls_mutex;
std::unordered_map<jlong, std::shared_ptr<PendingCall>> g_calls;
std::atomic<jlong> g_next_tag{1};

std::shared_ptr<PendingCall> FindCall(jlong tag) {
  std::lock_guard<std::mutex> lock(g_calls_mutex);
  auto it = g_calls.find(tag);
  return it == g_calls.end() ? nullptr : it->second;
}

void EraseCall(jlong tag) {
  std::lock_guard<std::mutex> lock(g_calls_mutex);
  g_calls.erase(tag);
}

// XLA FFI dtypes and PJRT buffer types share numbers except bf16 (16 vs 13); -1 for unsupported.
int PjrtTypeOf(XLA_FFI_DataType dtype) {
  if (dtype == XLA_FFI_DataType_BF16) return 13;
  if (dtype >= XLA_FFI_DataType_PRED && dtype <= XLA_FFI_DataType_F64) return static_cast<int>(dtype);
  return -1;
}

int64_t ByteSizeOf(int pjrt_type) {
  switch (pjrt_type) {
    case 1: case 2: case 6: return 1;           // pred, s8, u8
    case 3: case 7: case 10: case 13: return 2;  // s16, u16, f16, bf16
    case 4: case 8: case 11: return 4;           // s32, u32, f32
    case 5: case 9: case 12: return 8;           // s64, u64, f64
    default: return -1;
  }
}

int64_t ElementCount(const XLA_FFI_Buffer* buffer) {
  int64_t n = 1;
  for (int64_t d = 0; d < buffer->rank; ++d) n *= buffer->dims[d];
  return n;
}

JNIEnv* AttachedEnv() {
  JavaVM* vm = CachedJavaVm();
  JNIEnv* env = nullptr;
  if (vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_1_8) == JNI_OK) return env;
  // XLA's threads live as long as the client; attaching them as daemons once is cheap and keeps
  // them from holding the JVM open at exit.
  JavaVMAttachArgs args{JNI_VERSION_1_8, const_cast<char*>("xla-host-callback"), nullptr};
  if (vm->AttachCurrentThreadAsDaemon(reinterpret_cast<void**>(&env), &args) != JNI_OK) return nullptr;
  return env;
}

std::string DescribeAndClear(JNIEnv* env) {
  jthrowable thrown = env->ExceptionOccurred();
  env->ExceptionClear();
  if (thrown == nullptr) return "unknown Java exception";
  jclass object_class = env->FindClass("java/lang/Object");
  jmethodID to_string = env->GetMethodID(object_class, "toString", "()Ljava/lang/String;");
  auto text = static_cast<jstring>(env->CallObjectMethod(thrown, to_string));
  if (env->ExceptionCheck() || text == nullptr) {
    env->ExceptionClear();
    return "Java exception (toString failed)";
  }
  const char* chars = env->GetStringUTFChars(text, nullptr);
  std::string result(chars);
  env->ReleaseStringUTFChars(text, chars);
  return result;
}

jclass g_byte_buffer_class = nullptr;
jmethodID g_allocate_direct = nullptr;
jclass g_long_array_class = nullptr;

bool CacheJavaClasses(JNIEnv* env) {
  if (g_allocate_direct != nullptr) return true;
  jclass byte_buffer = env->FindClass("java/nio/ByteBuffer");
  jclass long_array = env->FindClass("[J");
  if (byte_buffer == nullptr || long_array == nullptr) return false;
  g_byte_buffer_class = static_cast<jclass>(env->NewGlobalRef(byte_buffer));
  g_long_array_class = static_cast<jclass>(env->NewGlobalRef(long_array));
  g_allocate_direct = env->GetStaticMethodID(g_byte_buffer_class, "allocateDirect", "(I)Ljava/nio/ByteBuffer;");
  return g_allocate_direct != nullptr;
}

// Builds the Java-side description of the buffers (types, dims); copies data when `copy_data`.
bool DescribeBuffers(JNIEnv* env, int64_t count, void** buffers, bool copy_data, const std::string& name,
                     const char* role, jobjectArray* data_out, jintArray* types_out, jobjectArray* dims_out,
                     std::string* problem) {
  *types_out = env->NewIntArray(static_cast<jsize>(count));
  *dims_out = env->NewObjectArray(static_cast<jsize>(count), g_long_array_class, nullptr);
  *data_out = copy_data ? env->NewObjectArray(static_cast<jsize>(count), g_byte_buffer_class, nullptr) : nullptr;
  if (*types_out == nullptr || *dims_out == nullptr || (copy_data && *data_out == nullptr)) {
    *problem = "out of Java memory describing the call";
    return false;
  }
  for (int64_t i = 0; i < count; ++i) {
    auto* buffer = static_cast<XLA_FFI_Buffer*>(buffers[i]);
    int type = PjrtTypeOf(buffer->dtype);
    if (type < 0) {
      *problem = "host callback '" + name + "': " + role + " " + std::to_string(i) + " has XLA FFI dtype " +
                 std::to_string(buffer->dtype) + ", which host callbacks do not support";
      return false;
    }
    jint jtype = type;
    env->SetIntArrayRegion(*types_out, static_cast<jsize>(i), 1, &jtype);
    jlongArray dims = env->NewLongArray(static_cast<jsize>(buffer->rank));
    if (dims == nullptr) {
      *problem = "out of Java memory describing the call";
      return false;
    }
    if (buffer->rank > 0) {
      env->SetLongArrayRegion(dims, 0, static_cast<jsize>(buffer->rank), reinterpret_cast<const jlong*>(buffer->dims));
    }
    env->SetObjectArrayElement(*dims_out, static_cast<jsize>(i), dims);
    env->DeleteLocalRef(dims);
    if (copy_data) {
      int64_t bytes = ElementCount(buffer) * ByteSizeOf(type);
      jobject data = env->CallStaticObjectMethod(g_byte_buffer_class, g_allocate_direct, static_cast<jint>(bytes));
      if (env->ExceptionCheck() || data == nullptr) {
        *problem = "cannot allocate " + std::to_string(bytes) + " bytes for input " + std::to_string(i) + ": " +
                   DescribeAndClear(env);
        return false;
      }
      if (bytes > 0) std::memcpy(env->GetDirectBufferAddress(data), buffer->data, static_cast<size_t>(bytes));
      env->SetObjectArrayElement(*data_out, static_cast<jsize>(i), data);
      env->DeleteLocalRef(data);
    }
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
  RunContext* run = RunContextOf(frame);
  if (run == nullptr || run->host_call_sink == nullptr) {
    return MakeFfiError(api, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                     "host callback '" + name + "' was called in a run that has no host-callback sink; run programs "
                     "with host callbacks through the actors module's CallbackRuntime");
  }
  if (run->cancelled.load()) {
    return MakeFfiError(api, XLA_FFI_Error_Code_CANCELLED, "host callback '" + name + "': the run was cancelled");
  }
  JNIEnv* env = AttachedEnv();
  if (env == nullptr || !CacheJavaClasses(env)) {
    return MakeFfiError(api, XLA_FFI_Error_Code_INTERNAL, "host callback '" + name + "': cannot attach to the JVM");
  }
  env->PushLocalFrame(16);
  jobjectArray inputs = nullptr;
  jintArray input_types = nullptr;
  jobjectArray input_dims = nullptr;
  jobjectArray unused = nullptr;
  jintArray output_types = nullptr;
  jobjectArray output_dims = nullptr;
  std::string problem;
  if (!DescribeBuffers(env, frame->args.size, frame->args.args, true, name, "input", &inputs, &input_types,
                       &input_dims, &problem) ||
      !DescribeBuffers(env, frame->rets.size, frame->rets.rets, false, name, "output", &unused, &output_types,
                       &output_dims, &problem)) {
    env->PopLocalFrame(nullptr);
    return MakeFfiError(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, problem);
  }

  jlong tag = g_next_tag.fetch_add(1);
  auto call = std::make_shared<PendingCall>();
  call->rets = &frame->rets;
  {
    std::lock_guard<std::mutex> lock(g_calls_mutex);
    g_calls[tag] = call;
  }
  jstring jname = env->NewStringUTF(name.c_str());
  jlong wait_millis = env->CallLongMethod(run->host_call_sink, run->on_host_call, run->run_id, tag, jname, inputs,
                                          input_types, input_dims, output_types, output_dims);
  if (env->ExceptionCheck()) {
    std::string thrown = DescribeAndClear(env);
    env->PopLocalFrame(nullptr);
    EraseCall(tag);
    return MakeFfiError(api, XLA_FFI_Error_Code_INTERNAL,
                     "host callback '" + name + "' could not be dispatched: " + thrown);
  }
  env->PopLocalFrame(nullptr);

  std::unique_lock<std::mutex> lock(call->mutex);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_millis);
  call->answered.wait_until(lock, deadline, [&] { return call->state != PendingCall::State::kWaiting; });
  if (call->state == PendingCall::State::kWaiting) {
    call->state = PendingCall::State::kAbandoned;  // a late reply finds this and writes nothing
    call->error_code = XLA_FFI_Error_Code_DEADLINE_EXCEEDED;
    call->error = "host callback '" + name + "' got no reply within " + std::to_string(wait_millis) +
                  " ms (the native wait's backstop)";
  }
  call->rets = nullptr;
  PendingCall::State state = call->state;
  std::string error = call->error;
  int code = call->error_code;
  lock.unlock();
  EraseCall(tag);
  if (state == PendingCall::State::kCompleted) return nullptr;
  return MakeFfiError(api, static_cast<XLA_FFI_Error_Code>(code), error);
}

}  // namespace

XLA_FFI_Handler* HostCallbackHandler() { return &HostCallbackHandlerImpl; }
const char* HostCallbackTarget() { return kHostCallbackTarget; }

}  // namespace xla_actors

using namespace xla_actors;

extern "C" {

// Copies the outputs (direct ByteBuffers, in order) into the waiting call's result buffers and wakes
// it. Returns false when the call is no longer waiting (timed out, failed, run ended): then nothing is
// written. Sizes are checked against XLA's buffers; a mismatch fails the call with a message.
JNIEXPORT jboolean JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_completeHostCall(JNIEnv* env, jclass, jlong tag,
                                                                                     jobjectArray outputs) {
  std::shared_ptr<PendingCall> call = FindCall(tag);
  if (call == nullptr) return JNI_FALSE;
  std::lock_guard<std::mutex> lock(call->mutex);
  if (call->state != PendingCall::State::kWaiting) return JNI_FALSE;
  XLA_FFI_Rets* rets = call->rets;
  jsize count = env->GetArrayLength(outputs);
  std::string problem;
  if (count != rets->size) {
    problem = "expected " + std::to_string(rets->size) + " output buffers, got " + std::to_string(count);
  }
  for (jsize i = 0; problem.empty() && i < count; ++i) {
    auto* buffer = static_cast<XLA_FFI_Buffer*>(rets->rets[i]);
    int64_t expected = ElementCount(buffer) * ByteSizeOf(PjrtTypeOf(buffer->dtype));
    jobject data = env->GetObjectArrayElement(outputs, i);
    void* address = data == nullptr ? nullptr : env->GetDirectBufferAddress(data);
    jlong capacity = data == nullptr ? -1 : env->GetDirectBufferCapacity(data);
    if ((address == nullptr && expected > 0) || capacity != expected) {
      problem = "output " + std::to_string(i) + " needs a direct buffer of " + std::to_string(expected) +
                " bytes, got " + std::to_string(capacity);
    } else if (expected > 0) {
      std::memcpy(buffer->data, address, static_cast<size_t>(expected));
    }
    if (data != nullptr) env->DeleteLocalRef(data);
  }
  if (problem.empty()) {
    call->state = PendingCall::State::kCompleted;
  } else {
    call->state = PendingCall::State::kFailed;
    call->error_code = XLA_FFI_Error_Code_INTERNAL;
    call->error = problem;
  }
  call->answered.notify_all();
  return JNI_TRUE;
}

// Fails the waiting call with `message` (an absl status code in `code`). Returns false when the call
// is no longer waiting.
JNIEXPORT jboolean JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_failHostCall(JNIEnv* env, jclass, jlong tag,
                                                                                 jint code, jstring message) {
  std::shared_ptr<PendingCall> call = FindCall(tag);
  if (call == nullptr) return JNI_FALSE;
  const char* chars = env->GetStringUTFChars(message, nullptr);
  std::string text(chars);
  env->ReleaseStringUTFChars(message, chars);
  std::lock_guard<std::mutex> lock(call->mutex);
  if (call->state != PendingCall::State::kWaiting) return JNI_FALSE;
  call->state = PendingCall::State::kFailed;
  call->error_code = code;
  call->error = text;
  call->answered.notify_all();
  return JNI_TRUE;
}

// Number of host calls currently waiting for a reply, across all runs (for tests and metrics).
JNIEXPORT jint JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_pendingHostCallCount(JNIEnv*, jclass) {
  std::lock_guard<std::mutex> lock(g_calls_mutex);
  return static_cast<jint>(g_calls.size());
}

}  // extern "C"
