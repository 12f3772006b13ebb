// XLA typed-FFI handlers (custom call api_version 4) that the bridge registers with the plugin
// for platform "Host", and the helpers they share for reading a call frame.
#include <cmath>
#include <cstring>
#include <exception>
#include <string>

#include "bridge.h"
#include "xla/ffi/api/c_api.h"

namespace xla_actors {
namespace {

// Names under which the handlers are registered; programs name them in stablehlo.custom_call.
constexpr const char kProofTarget[] = "xla_actors.scale_add";
constexpr const char kPlatform[] = "Host";
constexpr const char kRunContextTypeName[] = "xla_actors.RunContext";

}  // namespace

XLA_FFI_Error* MakeFfiError(const XLA_FFI_Api* api, XLA_FFI_Error_Code code, const std::string& message) {
  XLA_FFI_Error_Create_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
  args.message = message.c_str();  // copied by XLA
  args.errc = code;
  return api->XLA_FFI_Error_Create(&args);
}

void DestroyFfiError(const XLA_FFI_Api* api, XLA_FFI_Error* error) {
  XLA_FFI_Error_Destroy_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = XLA_FFI_Error_Destroy_Args_STRUCT_SIZE;
  args.error = error;
  api->XLA_FFI_Error_Destroy(&args);
}

XLA_FFI_Error* GuardHandler(XLA_FFI_CallFrame* frame, const char* target, XLA_FFI_Handler* handler) {
  // A call frame from an older XLA may end before the fields the handlers read.
  if (frame->struct_size < XLA_ACTORS_STRUCT_SIZE(XLA_FFI_CallFrame, attrs)) {
    return MakeFfiError(frame->api, XLA_FFI_Error_Code_FAILED_PRECONDITION,
                        std::string(target) + ": the plugin's XLA FFI call frame is " +
                            std::to_string(frame->struct_size) + " bytes, expected at least " +
                            std::to_string(XLA_ACTORS_STRUCT_SIZE(XLA_FFI_CallFrame, attrs)));
  }
  try {
    return handler(frame);
  } catch (const std::exception& e) {
    return MakeFfiError(frame->api, XLA_FFI_Error_Code_INTERNAL, std::string(target) + " failed: " + e.what());
  } catch (...) {
    return MakeFfiError(frame->api, XLA_FFI_Error_Code_INTERNAL,
                        std::string(target) + " failed with an unknown C++ exception");
  }
}

bool AnswerMetadataProbe(XLA_FFI_CallFrame* frame) {
  for (XLA_FFI_Extension_Base* ext = frame->extension_start; ext != nullptr; ext = ext->next) {
    if (ext->type != XLA_FFI_Extension_Metadata) continue;
    XLA_FFI_Metadata* metadata = reinterpret_cast<XLA_FFI_Metadata_Extension*>(ext)->metadata;
    metadata->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
    metadata->api_version.extension_start = nullptr;
    metadata->api_version.major_version = frame->api->api_version.major_version;
    metadata->api_version.minor_version = frame->api->api_version.minor_version;
    metadata->traits = 0;  // never command-buffer compatible: handlers may block
    return true;
  }
  return false;
}

int64_t FindAttribute(const XLA_FFI_CallFrame* frame, const char* name) {
  size_t length = std::strlen(name);
  for (int64_t i = 0; i < frame->attrs.size; ++i) {
    const XLA_FFI_ByteSpan* attr_name = frame->attrs.names[i];
    if (attr_name->len == length && std::memcmp(attr_name->ptr, name, length) == 0) return i;
  }
  return -1;
}

int64_t BufferElementCount(const XLA_FFI_Buffer* buffer) {
  int64_t count = 1;
  for (int64_t d = 0; d < buffer->rank; ++d) count *= buffer->dims[d];
  return count;
}

namespace {

int64_t g_run_context_type_id = 0;

}  // namespace

int64_t RunContextTypeId() { return g_run_context_type_id; }

XlaActors_RunContext* RunContextOf(XLA_FFI_CallFrame* frame) {
  if (frame->ctx == nullptr || g_run_context_type_id == 0) return nullptr;
  XLA_FFI_TypeId id{g_run_context_type_id};
  XLA_FFI_ExecutionContext_Get_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = XLA_FFI_ExecutionContext_Get_Args_STRUCT_SIZE;
  args.ctx = frame->ctx;
  args.type_id = &id;
  XLA_FFI_Error* error = frame->api->XLA_FFI_ExecutionContext_Get(&args);
  if (error != nullptr) {
    DestroyFfiError(frame->api, error);
    return nullptr;
  }
  return static_cast<XlaActors_RunContext*>(args.data);
}

namespace {

// The FFI proof handler: out[i] = in[i] * scale + addend, where `addend` is an f32 attribute of
// the custom call and `scale` comes from the run's RunContext (1 when the run has none). A
// non-empty string attribute `fail_with` makes it return that message as an error instead.
XLA_FFI_Error* ScaleAddHandlerImpl(XLA_FFI_CallFrame* frame) {
  if (AnswerMetadataProbe(frame)) return nullptr;
  const XLA_FFI_Api* api = frame->api;
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return nullptr;

  int64_t fail_index = FindAttribute(frame, "fail_with");
  if (fail_index >= 0 && frame->attrs.types[fail_index] == XLA_FFI_AttrType_STRING) {
    auto* text = static_cast<XLA_FFI_ByteSpan*>(frame->attrs.attrs[fail_index]);
    if (text->len > 0) return MakeFfiError(api, XLA_FFI_Error_Code_FAILED_PRECONDITION, std::string(text->ptr, text->len));
  }
  int64_t addend_index = FindAttribute(frame, "addend");
  if (addend_index < 0 || frame->attrs.types[addend_index] != XLA_FFI_AttrType_SCALAR ||
      static_cast<XLA_FFI_Scalar*>(frame->attrs.attrs[addend_index])->dtype != XLA_FFI_DataType_F32) {
    return MakeFfiError(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                     std::string(kProofTarget) + " expects an f32 attribute 'addend' in backend_config");
  }
  float addend = *static_cast<float*>(static_cast<XLA_FFI_Scalar*>(frame->attrs.attrs[addend_index])->value);
  if (frame->args.size != 1 || frame->rets.size != 1 || frame->args.types[0] != XLA_FFI_ArgType_BUFFER ||
      frame->rets.types[0] != XLA_FFI_RetType_BUFFER) {
    return MakeFfiError(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                     std::string(kProofTarget) + " expects one buffer argument and one buffer result, got " +
                         std::to_string(frame->args.size) + " and " + std::to_string(frame->rets.size));
  }
  auto* in = static_cast<XLA_FFI_Buffer*>(frame->args.args[0]);
  auto* out = static_cast<XLA_FFI_Buffer*>(frame->rets.rets[0]);
  if (in->dtype != XLA_FFI_DataType_F32 || out->dtype != XLA_FFI_DataType_F32) {
    return MakeFfiError(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, std::string(kProofTarget) + " works on f32 only");
  }
  const int64_t count = BufferElementCount(in);
  const int64_t out_count = BufferElementCount(out);
  if (count != out_count) {
    return MakeFfiError(api, XLA_FFI_Error_Code_INVALID_ARGUMENT,
                     std::string(kProofTarget) + " needs a result with as many elements as its argument: expected " +
                         std::to_string(count) + ", got " + std::to_string(out_count));
  }
  XlaActors_RunContext* run = RunContextOf(frame);
  float scale = run != nullptr ? run->proof_scale : 1.0f;
  const float* src = static_cast<const float*>(in->data);
  float* dst = static_cast<float*>(out->data);
  for (int64_t i = 0; i < count; ++i) dst[i] = src[i] * scale + addend;
  return nullptr;
}

XLA_FFI_Error* ScaleAddHandler(XLA_FFI_CallFrame* frame) {
  return GuardHandler(frame, kProofTarget, &ScaleAddHandlerImpl);
}

}  // namespace

std::string RegisterFfiHandler(Plugin* plugin, const char* target, XLA_FFI_Handler* handler) {
  XlaActors_FFI_Register_Handler_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = XLA_ACTORS_STRUCT_SIZE(XlaActors_FFI_Register_Handler_Args, traits);
  args.target_name = target;
  args.target_name_size = std::strlen(target);
  args.handler = reinterpret_cast<void*>(handler);
  args.platform_name = kPlatform;
  args.platform_name_size = std::strlen(kPlatform);
  args.traits = 0;
  PJRT_Error* error = plugin->ffi->register_handler(&args);
  if (error != nullptr) {
    int code;
    return "registering FFI handler '" + std::string(target) + "': " + ConsumeError(plugin->api, error, &code);
  }
  return std::string();
}

std::string RegisterFfiHandlers(Plugin* plugin) {
  static const XlaActors_FFI_Type_Info kRunContextTypeInfo = {nullptr};  // owned by XlaActors_RunContext_Destroy
  XlaActors_FFI_Type_Register_Args type_args;
  std::memset(&type_args, 0, sizeof(type_args));
  type_args.struct_size = XLA_ACTORS_STRUCT_SIZE(XlaActors_FFI_Type_Register_Args, type_info);
  type_args.type_info = &kRunContextTypeInfo;
  type_args.type_name = kRunContextTypeName;
  type_args.type_name_size = std::strlen(kRunContextTypeName);
  type_args.type_id = g_run_context_type_id;  // 0 on first load; the same id if registered before
  PJRT_Error* error = plugin->ffi->type_register(&type_args);
  if (error != nullptr) {
    int code;
    return "registering FFI type '" + std::string(kRunContextTypeName) + "': " +
           ConsumeError(plugin->api, error, &code);
  }
  g_run_context_type_id = type_args.type_id;

  std::string problem = RegisterFfiHandler(plugin, kProofTarget, &ScaleAddHandler);
  if (problem.empty()) problem = RegisterFfiHandler(plugin, HostCallbackTarget(), HostCallbackHandler());
  if (problem.empty()) problem = RegisterLapackHandlers(plugin);
  if (problem.empty()) problem = RegisterMatmulHandlers(plugin);
  return problem;
}

}  // namespace xla_actors
