// JNI surface of the bridge over the PJRT C API: plugin, client, compile, buffers, execute.
// Every entry point catches its own failures and turns them into Java exceptions; nothing
// C++-side escapes into the JVM. Handles cross JNI as jlong pointers owned by Java wrappers
// (dev.xlaactors.runtime), which guarantee a parent outlives its children.
#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "bridge.h"

namespace xla_actors {
namespace {

JavaVM* g_vm = nullptr;

template <typename T>
T* FromHandle(jlong handle) {
  return reinterpret_cast<T*>(static_cast<intptr_t>(handle));
}

template <typename T>
jlong ToHandle(T* pointer) {
  return static_cast<jlong>(reinterpret_cast<intptr_t>(pointer));
}

std::string JavaString(JNIEnv* env, jstring value) {
  if (value == nullptr) return std::string();
  const char* chars = env->GetStringUTFChars(value, nullptr);
  std::string result(chars);
  env->ReleaseStringUTFChars(value, chars);
  return result;
}

// Creates the PJRT_Executable view of a loaded executable; the caller destroys it.
PJRT_Executable* ExecutableView(const PJRT_Api* api, PJRT_LoadedExecutable* loaded, PJRT_Error** error) {
  PJRT_LoadedExecutable_GetExecutable_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE;
  args.loaded_executable = loaded;
  *error = api->PJRT_LoadedExecutable_GetExecutable(&args);
  return *error == nullptr ? args.executable : nullptr;
}

void DestroyExecutableView(const PJRT_Api* api, PJRT_Executable* executable) {
  PJRT_Executable_Destroy_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE;
  args.executable = executable;
  PJRT_Error* error = api->PJRT_Executable_Destroy(&args);
  if (error != nullptr) {
    int code;
    ConsumeError(api, error, &code);
  }
}

void DestroyBuffer(const PJRT_Api* api, PJRT_Buffer* buffer) {
  PJRT_Buffer_Destroy_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE;
  args.buffer = buffer;
  PJRT_Error* error = api->PJRT_Buffer_Destroy(&args);
  if (error != nullptr) {
    int code;
    ConsumeError(api, error, &code);
  }
}

void DestroyExecuteContext(const PJRT_Api* api, PJRT_ExecuteContext* context) {
  PJRT_ExecuteContext_Destroy_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_ExecuteContext_Destroy_Args_STRUCT_SIZE;
  args.context = context;
  PJRT_Error* error = api->PJRT_ExecuteContext_Destroy(&args);
  if (error != nullptr) {
    int code;
    ConsumeError(api, error, &code);
  }
}

// Finds the FFI extension in the plugin's extension chain, checking that it is large enough
// for every field the bridge uses.
XlaActors_FFI_Extension* FindFfiExtension(const PJRT_Api* api) {
  for (PJRT_Extension_Base* ext = api->extension_start; ext != nullptr; ext = ext->next) {
    if (ext->type == PJRT_Extension_Type_FFI) {
      if (ext->struct_size < XLA_ACTORS_STRUCT_SIZE(XlaActors_FFI_Extension, register_handler)) return nullptr;
      return reinterpret_cast<XlaActors_FFI_Extension*>(ext);
    }
  }
  return nullptr;
}

}  // namespace

JavaVM* CachedJavaVm() { return g_vm; }

bool ThrowXla(JNIEnv* env, FailureKind kind, int code, const std::string& message) {
  if (env->ExceptionCheck()) return false;  // keep the first exception
  jclass cls = env->FindClass("dev/xlaactors/error/XlaException");
  if (cls == nullptr) return false;
  jmethodID factory =
      env->GetStaticMethodID(cls, "fromNative", "(IILjava/lang/String;)Ldev/xlaactors/error/XlaException;");
  if (factory == nullptr) return false;
  jstring text = env->NewStringUTF(message.c_str());
  jobject exception = env->CallStaticObjectMethod(cls, factory, static_cast<jint>(kind), code, text);
  if (exception != nullptr && !env->ExceptionCheck()) env->Throw(static_cast<jthrowable>(exception));
  return false;
}

std::string ConsumeError(const PJRT_Api* api, PJRT_Error* error, int* code) {
  PJRT_Error_Message_Args message_args;
  std::memset(&message_args, 0, sizeof(message_args));
  message_args.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
  message_args.error = error;
  api->PJRT_Error_Message(&message_args);
  std::string message(message_args.message, message_args.message_size);

  PJRT_Error_GetCode_Args code_args;
  std::memset(&code_args, 0, sizeof(code_args));
  code_args.struct_size = PJRT_Error_GetCode_Args_STRUCT_SIZE;
  code_args.error = error;
  PJRT_Error* code_error = api->PJRT_Error_GetCode(&code_args);
  *code = code_error == nullptr ? static_cast<int>(code_args.code) : kCodeInternal;

  PJRT_Error_Destroy_Args destroy_args;
  std::memset(&destroy_args, 0, sizeof(destroy_args));
  destroy_args.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
  destroy_args.error = error;
  api->PJRT_Error_Destroy(&destroy_args);
  return message;
}

bool ThrowIfError(JNIEnv* env, const PJRT_Api* api, PJRT_Error* error, FailureKind kind, const char* what) {
  if (error == nullptr) return false;
  int code;
  std::string message = ConsumeError(api, error, &code);
  ThrowXla(env, kind, code, std::string(what) + ": " + message);
  return true;
}

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
  if (destroy_error != nullptr) {
    int code;
    ConsumeError(api, destroy_error, &code);
  }
  return error;
}

}  // namespace xla_actors

using namespace xla_actors;

extern "C" {

JNIEXPORT jint JNI_OnLoad(JavaVM* vm, void*) {
  g_vm = vm;
  return JNI_VERSION_1_8;
}

// ---- plugin -------------------------------------------------------------------------------

JNIEXPORT jlong JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_pluginLoad(JNIEnv* env, jclass, jstring jpath) {
  std::string path = JavaString(env, jpath);
  // RTLD_LOCAL keeps the plugin's many symbols out of the global namespace; the library is
  // never dlclose'd because XLA's static registries (FFI handlers among them) live inside it.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    ThrowXla(env, FailureKind::kPlugin, kCodeFailedPrecondition,
             "cannot load PJRT plugin '" + path + "': " + (reason ? reason : "unknown dlopen error"));
    return 0;
  }
  using GetPjrtApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetPjrtApiFn>(dlsym(library, "GetPjrtApi"));
  if (get_api == nullptr) {
    ThrowXla(env, FailureKind::kPlugin, kCodeFailedPrecondition,
             "'" + path + "' is not a PJRT plugin: it does not export GetPjrtApi");
    return 0;
  }
  const PJRT_Api* api = get_api();
  if (api == nullptr) {
    ThrowXla(env, FailureKind::kPlugin, kCodeFailedPrecondition, "GetPjrtApi of '" + path + "' returned null");
    return 0;
  }
  if (api->pjrt_api_version.major_version != PJRT_API_MAJOR) {
    ThrowXla(env, FailureKind::kPlugin, kCodeFailedPrecondition,
             "PJRT plugin '" + path + "' has PJRT C API major version " +
                 std::to_string(api->pjrt_api_version.major_version) + ", expected " +
                 std::to_string(PJRT_API_MAJOR));
    return 0;
  }
  if (api->PJRT_Plugin_Initialize != nullptr) {
    PJRT_Plugin_Initialize_Args init_args;
    std::memset(&init_args, 0, sizeof(init_args));
    init_args.struct_size = PJRT_Plugin_Initialize_Args_STRUCT_SIZE;
    if (ThrowIfError(env, api, api->PJRT_Plugin_Initialize(&init_args), FailureKind::kPlugin,
                     "PJRT_Plugin_Initialize")) {
      return 0;
    }
  }
  auto* plugin = new Plugin();
  plugin->library = library;
  plugin->api = api;
  plugin->ffi = FindFfiExtension(api);
  if (plugin->ffi != nullptr) {
    std::string problem = RegisterFfiHandlers(plugin);
    if (!problem.empty()) {
      delete plugin;
      ThrowXla(env, FailureKind::kPlugin, kCodeInternal, problem);
      return 0;
    }
  }
  return ToHandle(plugin);
}

JNIEXPORT jintArray JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_pluginApiVersion(JNIEnv* env, jclass,
                                                                                      jlong handle) {
  Plugin* plugin = FromHandle<Plugin>(handle);
  jint values[2] = {plugin->api->pjrt_api_version.major_version, plugin->api->pjrt_api_version.minor_version};
  jintArray result = env->NewIntArray(2);
  if (result != nullptr) env->SetIntArrayRegion(result, 0, 2, values);
  return result;
}

JNIEXPORT jboolean JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_pluginHasFfiHandlers(JNIEnv*, jclass,
                                                                                          jlong handle) {
  return FromHandle<Plugin>(handle)->handlers_registered ? JNI_TRUE : JNI_FALSE;
}

// ---- client -------------------------------------------------------------------------------

JNIEXPORT jlong JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_clientCreate(JNIEnv* env, jclass, jlong handle,
                                                                              jboolean asynchronous) {
  Plugin* plugin = FromHandle<Plugin>(handle);
  const PJRT_Api* api = plugin->api;
  PJRT_NamedValue option;
  std::memset(&option, 0, sizeof(option));
  option.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  option.name = "asynchronous";
  option.name_size = std::strlen(option.name);
  option.type = PJRT_NamedValue_kBool;
  option.bool_value = asynchronous == JNI_TRUE;
  option.value_size = 1;

  PJRT_Client_Create_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  args.create_options = &option;
  args.num_options = 1;
  if (ThrowIfError(env, api, api->PJRT_Client_Create(&args), FailureKind::kPlugin, "PJRT_Client_Create")) return 0;

  auto* client = new Client{plugin, args.client, {}};
  PJRT_Client_AddressableDevices_Args devices_args;
  std::memset(&devices_args, 0, sizeof(devices_args));
  devices_args.struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE;
  devices_args.client = args.client;
  PJRT_Error* error = api->PJRT_Client_AddressableDevices(&devices_args);
  if (error == nullptr) {
    client->devices.assign(devices_args.addressable_devices,
                           devices_args.addressable_devices + devices_args.num_addressable_devices);
  }
  if (error != nullptr || client->devices.empty()) {
    PJRT_Client_Destroy_Args destroy_args;
    std::memset(&destroy_args, 0, sizeof(destroy_args));
    destroy_args.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE;
    destroy_args.client = args.client;
    PJRT_Error* destroy_error = api->PJRT_Client_Destroy(&destroy_args);
    if (destroy_error != nullptr) {
      int code;
      ConsumeError(api, destroy_error, &code);
    }
    delete client;
    if (error != nullptr) {
      ThrowIfError(env, api, error, FailureKind::kPlugin, "PJRT_Client_AddressableDevices");
    } else {
      ThrowXla(env, FailureKind::kPlugin, kCodeFailedPrecondition, "the PJRT client has no addressable devices");
    }
    return 0;
  }
  return ToHandle(client);
}

JNIEXPORT void JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_clientDestroy(JNIEnv* env, jclass, jlong handle) {
  Client* client = FromHandle<Client>(handle);
  const PJRT_Api* api = client->plugin->api;
  PJRT_Client_Destroy_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE;
  args.client = client->client;
  PJRT_Error* error = api->PJRT_Client_Destroy(&args);
  delete client;
  ThrowIfError(env, api, error, FailureKind::kGeneric, "PJRT_Client_Destroy");
}

JNIEXPORT jstring JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_clientPlatformName(JNIEnv* env, jclass,
                                                                                      jlong handle) {
  Client* client = FromHandle<Client>(handle);
  const PJRT_Api* api = client->plugin->api;
  PJRT_Client_PlatformName_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_Client_PlatformName_Args_STRUCT_SIZE;
  args.client = client->client;
  if (ThrowIfError(env, api, api->PJRT_Client_PlatformName(&args), FailureKind::kGeneric, "PJRT_Client_PlatformName")) {
    return nullptr;
  }
  return env->NewStringUTF(std::string(args.platform_name, args.platform_name_size).c_str());
}

JNIEXPORT jint JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_clientDeviceCount(JNIEnv*, jclass, jlong handle) {
  return static_cast<jint>(FromHandle<Client>(handle)->devices.size());
}

// Returns {id, kind} of the addressable device at `index` as a String[2].
JNIEXPORT jobjectArray JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_clientDeviceDescription(JNIEnv* env, jclass,
                                                                                                jlong handle,
                                                                                                jint index) {
  Client* client = FromHandle<Client>(handle);
  const PJRT_Api* api = client->plugin->api;
  PJRT_Device_GetDescription_Args description_args;
  std::memset(&description_args, 0, sizeof(description_args));
  description_args.struct_size = PJRT_Device_GetDescription_Args_STRUCT_SIZE;
  description_args.device = client->devices.at(index);
  if (ThrowIfError(env, api, api->PJRT_Device_GetDescription(&description_args), FailureKind::kGeneric,
                   "PJRT_Device_GetDescription")) {
    return nullptr;
  }
  PJRT_DeviceDescription_Id_Args id_args;
  std::memset(&id_args, 0, sizeof(id_args));
  id_args.struct_size = PJRT_DeviceDescription_Id_Args_STRUCT_SIZE;
  id_args.device_description = description_args.device_description;
  if (ThrowIfError(env, api, api->PJRT_DeviceDescription_Id(&id_args), FailureKind::kGeneric,
                   "PJRT_DeviceDescription_Id")) {
    return nullptr;
  }
  PJRT_DeviceDescription_Kind_Args kind_args;
  std::memset(&kind_args, 0, sizeof(kind_args));
  kind_args.struct_size = PJRT_DeviceDescription_Kind_Args_STRUCT_SIZE;
  kind_args.device_description = description_args.device_description;
  if (ThrowIfError(env, api, api->PJRT_DeviceDescription_Kind(&kind_args), FailureKind::kGeneric,
                   "PJRT_DeviceDescription_Kind")) {
    return nullptr;
  }
  jobjectArray result = env->NewObjectArray(2, env->FindClass("java/lang/String"), nullptr);
  if (result == nullptr) return nullptr;
  env->SetObjectArrayElement(result, 0, env->NewStringUTF(std::to_string(id_args.id).c_str()));
  env->SetObjectArrayElement(result, 1,
                             env->NewStringUTF(std::string(kind_args.device_kind, kind_args.device_kind_size).c_str()));
  return result;
}

// ---- compile ------------------------------------------------------------------------------

JNIEXPORT jlong JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_compile(JNIEnv* env, jclass, jlong handle,
                                                                         jbyteArray jcode, jstring jformat,
                                                                         jbyteArray joptions) {
  Client* client = FromHandle<Client>(handle);
  const PJRT_Api* api = client->plugin->api;
  std::vector<char> code(env->GetArrayLength(jcode));
  env->GetByteArrayRegion(jcode, 0, static_cast<jsize>(code.size()), reinterpret_cast<jbyte*>(code.data()));
  std::vector<char> options(env->GetArrayLength(joptions));
  env->GetByteArrayRegion(joptions, 0, static_cast<jsize>(options.size()), reinterpret_cast<jbyte*>(options.data()));
  if (options.empty()) {
    // An empty CompileOptionsProto trips a CHECK inside the plugin and aborts the process.
    ThrowXla(env, FailureKind::kInvalidArgument, kCodeInvalidArgument, "compile options must not be empty");
    return 0;
  }
  std::string format = JavaString(env, jformat);

  PJRT_Program program;
  std::memset(&program, 0, sizeof(program));
  program.struct_size = PJRT_Program_STRUCT_SIZE;
  program.code = code.data();
  program.code_size = code.size();
  program.format = format.c_str();
  program.format_size = format.size();

  PJRT_Client_Compile_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE;
  args.client = client->client;
  args.program = &program;
  args.compile_options = options.data();
  args.compile_options_size = options.size();
  if (ThrowIfError(env, api, api->PJRT_Client_Compile(&args), FailureKind::kCompile, "XLA compilation failed")) {
    return 0;
  }

  PJRT_Error* error = nullptr;
  PJRT_Executable* view = ExecutableView(api, args.executable, &error);
  size_t num_outputs = 0;
  if (error == nullptr) {
    PJRT_Executable_NumOutputs_Args outputs_args;
    std::memset(&outputs_args, 0, sizeof(outputs_args));
    outputs_args.struct_size = PJRT_Executable_NumOutputs_Args_STRUCT_SIZE;
    outputs_args.executable = view;
    error = api->PJRT_Executable_NumOutputs(&outputs_args);
    num_outputs = outputs_args.num_outputs;
    DestroyExecutableView(api, view);
  }
  if (error != nullptr) {
    PJRT_LoadedExecutable_Destroy_Args destroy_args;
    std::memset(&destroy_args, 0, sizeof(destroy_args));
    destroy_args.struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE;
    destroy_args.executable = args.executable;
    PJRT_Error* destroy_error = api->PJRT_LoadedExecutable_Destroy(&destroy_args);
    if (destroy_error != nullptr) {
      int code;
      ConsumeError(api, destroy_error, &code);
    }
    ThrowIfError(env, api, error, FailureKind::kCompile, "reading the compiled executable's outputs");
    return 0;
  }
  return ToHandle(new Executable{client, args.executable, num_outputs});
}

// Output element types (PJRT_Buffer_Type ordinals) of a compiled executable.
JNIEXPORT jintArray JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_executableOutputTypes(JNIEnv* env, jclass,
                                                                                           jlong handle) {
  Executable* executable = FromHandle<Executable>(handle);
  const PJRT_Api* api = executable->owner->plugin->api;
  PJRT_Error* error = nullptr;
  PJRT_Executable* view = ExecutableView(api, executable->loaded, &error);
  if (ThrowIfError(env, api, error, FailureKind::kGeneric, "PJRT_LoadedExecutable_GetExecutable")) return nullptr;
  PJRT_Executable_OutputElementTypes_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_Executable_OutputElementTypes_Args_STRUCT_SIZE;
  args.executable = view;
  error = api->PJRT_Executable_OutputElementTypes(&args);
  jintArray result = nullptr;
  if (error == nullptr) {
    std::vector<jint> types(args.output_types, args.output_types + args.num_output_types);
    result = env->NewIntArray(static_cast<jsize>(types.size()));
    if (result != nullptr) env->SetIntArrayRegion(result, 0, static_cast<jsize>(types.size()), types.data());
  }
  DestroyExecutableView(api, view);
  ThrowIfError(env, api, error, FailureKind::kGeneric, "PJRT_Executable_OutputElementTypes");
  return result;
}

// Output dimensions of a compiled executable, one long[] per output.
JNIEXPORT jobjectArray JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_executableOutputDims(JNIEnv* env, jclass,
                                                                                             jlong handle) {
  Executable* executable = FromHandle<Executable>(handle);
  const PJRT_Api* api = executable->owner->plugin->api;
  PJRT_Error* error = nullptr;
  PJRT_Executable* view = ExecutableView(api, executable->loaded, &error);
  if (ThrowIfError(env, api, error, FailureKind::kGeneric, "PJRT_LoadedExecutable_GetExecutable")) return nullptr;
  PJRT_Executable_OutputDimensions_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_Executable_OutputDimensions_Args_STRUCT_SIZE;
  args.executable = view;
  error = api->PJRT_Executable_OutputDimensions(&args);
  jobjectArray result = nullptr;
  if (error == nullptr) {
    result = env->NewObjectArray(static_cast<jsize>(args.num_outputs), env->FindClass("[J"), nullptr);
    size_t offset = 0;
    for (size_t i = 0; result != nullptr && i < args.num_outputs; ++i) {
      jlongArray dims = env->NewLongArray(static_cast<jsize>(args.dim_sizes[i]));
      if (dims == nullptr) break;
      std::vector<jlong> values(args.dims + offset, args.dims + offset + args.dim_sizes[i]);
      env->SetLongArrayRegion(dims, 0, static_cast<jsize>(values.size()), values.data());
      env->SetObjectArrayElement(result, static_cast<jsize>(i), dims);
      env->DeleteLocalRef(dims);
      offset += args.dim_sizes[i];
    }
  }
  DestroyExecutableView(api, view);
  ThrowIfError(env, api, error, FailureKind::kGeneric, "PJRT_Executable_OutputDimensions");
  return result;
}

JNIEXPORT void JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_executableDestroy(JNIEnv* env, jclass, jlong handle) {
  Executable* executable = FromHandle<Executable>(handle);
  const PJRT_Api* api = executable->owner->plugin->api;
  PJRT_LoadedExecutable_Destroy_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE;
  args.executable = executable->loaded;
  PJRT_Error* error = api->PJRT_LoadedExecutable_Destroy(&args);
  delete executable;
  ThrowIfError(env, api, error, FailureKind::kGeneric, "PJRT_LoadedExecutable_Destroy");
}

// ---- buffers ------------------------------------------------------------------------------

// Copies `byte_length` bytes of a direct ByteBuffer (from `byte_offset`) into a new device buffer.
// The host bytes may be reused as soon as this returns.
JNIEXPORT jlong JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_bufferFromHost(JNIEnv* env, jclass, jlong handle,
                                                                                jint device_index, jobject data,
                                                                                jlong byte_offset, jlong byte_length,
                                                                                jint type, jlongArray jdims) {
  Client* client = FromHandle<Client>(handle);
  const PJRT_Api* api = client->plugin->api;
  char* base = static_cast<char*>(env->GetDirectBufferAddress(data));
  jlong capacity = env->GetDirectBufferCapacity(data);
  if (base == nullptr || capacity < byte_offset + byte_length) {
    ThrowXla(env, FailureKind::kInvalidArgument, kCodeInvalidArgument,
             "host data must be a direct ByteBuffer holding at least " + std::to_string(byte_offset + byte_length) +
                 " bytes, got capacity " + std::to_string(capacity));
    return 0;
  }
  if (device_index < 0 || static_cast<size_t>(device_index) >= client->devices.size()) {
    ThrowXla(env, FailureKind::kInvalidArgument, kCodeInvalidArgument,
             "device index " + std::to_string(device_index) + " out of range [0, " +
                 std::to_string(client->devices.size()) + ")");
    return 0;
  }
  std::vector<int64_t> dims(env->GetArrayLength(jdims));
  env->GetLongArrayRegion(jdims, 0, static_cast<jsize>(dims.size()), reinterpret_cast<jlong*>(dims.data()));

  PJRT_Client_BufferFromHostBuffer_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
  args.client = client->client;
  args.data = base + byte_offset;
  args.type = static_cast<PJRT_Buffer_Type>(type);
  args.dims = dims.data();
  args.num_dims = dims.size();
  args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
  args.device = client->devices[device_index];
  if (ThrowIfError(env, api, api->PJRT_Client_BufferFromHostBuffer(&args), FailureKind::kGeneric,
                   "PJRT_Client_BufferFromHostBuffer")) {
    return 0;
  }
  // The host bytes belong to a Java buffer that may move on once we return: wait for the copy.
  PJRT_Error* error = AwaitAndDestroy(api, args.done_with_host_buffer);
  if (error != nullptr) {
    DestroyBuffer(api, args.buffer);
    ThrowIfError(env, api, error, FailureKind::kGeneric, "host-to-device transfer");
    return 0;
  }
  return ToHandle(new Buffer{client, args.buffer});
}

}  // extern "C"

namespace xla_actors {
namespace {

// Whether a buffer's bytes can be read in place: it lives in host memory (the CPU plugin) with the
// default dense row-major layout, so copying from its pointer gives exactly what ToHostBuffer would,
// without ToHostBuffer's hand-off to a worker thread (about 10 us here). Cached per buffer.
bool HostReadable(const PJRT_Api* api, Buffer* buffer) {
  int known = buffer->host_readable.load();
  if (known >= 0) return known == 1;
  bool readable = false;
  int code;
  if (api->PJRT_Buffer_IsOnCpu != nullptr && api->PJRT_Buffer_GetMemoryLayout != nullptr &&
      api->PJRT_Buffer_UnsafePointer != nullptr && api->PJRT_Buffer_ReadyEvent != nullptr &&
      api->PJRT_Buffer_OnDeviceSizeInBytes != nullptr) {
    PJRT_Buffer_IsOnCpu_Args cpu_args;
    std::memset(&cpu_args, 0, sizeof(cpu_args));
    cpu_args.struct_size = PJRT_Buffer_IsOnCpu_Args_STRUCT_SIZE;
    cpu_args.buffer = buffer->buffer;
    PJRT_Error* error = api->PJRT_Buffer_IsOnCpu(&cpu_args);
    if (error != nullptr) {
      ConsumeError(api, error, &code);
    } else if (cpu_args.is_on_cpu) {
      PJRT_Buffer_GetMemoryLayout_Args layout_args;
      std::memset(&layout_args, 0, sizeof(layout_args));
      layout_args.struct_size = PJRT_Buffer_GetMemoryLayout_Args_STRUCT_SIZE;
      layout_args.buffer = buffer->buffer;
      error = api->PJRT_Buffer_GetMemoryLayout(&layout_args);
      if (error != nullptr) {
        ConsumeError(api, error, &code);
      } else if (layout_args.layout.type == PJRT_Buffer_MemoryLayout_Type_Tiled &&
                 layout_args.layout.tiled.num_tiles == 0) {
        // Row-major means minor_to_major = [rank-1, ..., 1, 0].
        const PJRT_Buffer_MemoryLayout_Tiled& tiled = layout_args.layout.tiled;
        readable = true;
        for (size_t i = 0; i < tiled.minor_to_major_size; ++i) {
          if (tiled.minor_to_major[i] != static_cast<int64_t>(tiled.minor_to_major_size - 1 - i)) readable = false;
        }
      }
    }
  }
  buffer->host_readable.store(readable ? 1 : 0);
  return readable;
}

// Copies a host-readable buffer (see HostReadable) into `dst`, which has `room` bytes. Returns the
// PJRT error, if any; sets *copied to false (and copies nothing) if the buffer needs more room.
PJRT_Error* CopyInPlace(const PJRT_Api* api, Buffer* buffer, char* dst, jlong room, bool* copied, size_t* needed) {
  *copied = false;
  PJRT_Buffer_ReadyEvent_Args ready_args;
  std::memset(&ready_args, 0, sizeof(ready_args));
  ready_args.struct_size = PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE;
  ready_args.buffer = buffer->buffer;
  PJRT_Error* error = api->PJRT_Buffer_ReadyEvent(&ready_args);
  if (error == nullptr) error = AwaitAndDestroy(api, ready_args.event);  // at once when already computed
  if (error != nullptr) return error;

  PJRT_Buffer_OnDeviceSizeInBytes_Args size_args;
  std::memset(&size_args, 0, sizeof(size_args));
  size_args.struct_size = PJRT_Buffer_OnDeviceSizeInBytes_Args_STRUCT_SIZE;
  size_args.buffer = buffer->buffer;
  error = api->PJRT_Buffer_OnDeviceSizeInBytes(&size_args);
  if (error != nullptr) return error;
  *needed = size_args.on_device_size_in_bytes;
  if (room < static_cast<jlong>(*needed)) return nullptr;

  PJRT_Buffer_UnsafePointer_Args pointer_args;
  std::memset(&pointer_args, 0, sizeof(pointer_args));
  pointer_args.struct_size = PJRT_Buffer_UnsafePointer_Args_STRUCT_SIZE;
  pointer_args.buffer = buffer->buffer;
  error = api->PJRT_Buffer_UnsafePointer(&pointer_args);
  if (error != nullptr) return error;
  if (*needed > 0) std::memcpy(dst, reinterpret_cast<const void*>(pointer_args.buffer_pointer), *needed);
  *copied = true;
  return nullptr;
}

}  // namespace
}  // namespace xla_actors

extern "C" {

// Copies a device buffer into a direct ByteBuffer (from `byte_offset`) that has room for it.
JNIEXPORT void JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_bufferToHost(JNIEnv* env, jclass, jlong handle,
                                                                             jobject data, jlong byte_offset) {
  Buffer* buffer = FromHandle<Buffer>(handle);
  const PJRT_Api* api = buffer->owner->plugin->api;
  char* base = static_cast<char*>(env->GetDirectBufferAddress(data));
  jlong room = env->GetDirectBufferCapacity(data) - byte_offset;
  if (base == nullptr) {
    ThrowXla(env, FailureKind::kInvalidArgument, kCodeInvalidArgument, "destination must be a direct ByteBuffer");
    return;
  }
  if (HostReadable(api, buffer)) {
    bool copied = false;
    size_t needed = 0;
    if (ThrowIfError(env, api, CopyInPlace(api, buffer, base + byte_offset, room, &copied, &needed),
                     FailureKind::kGeneric, "reading a host buffer")) {
      return;
    }
    if (copied) return;
    // Sizes differ (padding, or too little room): ToHostBuffer below converts, or says what is wrong.
  }
  PJRT_Buffer_ToHostBuffer_Args size_args;
  std::memset(&size_args, 0, sizeof(size_args));
  size_args.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
  size_args.src = buffer->buffer;
  if (ThrowIfError(env, api, api->PJRT_Buffer_ToHostBuffer(&size_args), FailureKind::kGeneric,
                   "PJRT_Buffer_ToHostBuffer (size)")) {
    return;
  }
  if (room < static_cast<jlong>(size_args.dst_size)) {
    ThrowXla(env, FailureKind::kInvalidArgument, kCodeInvalidArgument,
             "destination must be a direct ByteBuffer with room for " + std::to_string(size_args.dst_size) +
                 " bytes, got " + std::to_string(room));
    return;
  }
  PJRT_Buffer_ToHostBuffer_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
  args.src = buffer->buffer;
  args.dst = base + byte_offset;
  args.dst_size = size_args.dst_size;
  if (ThrowIfError(env, api, api->PJRT_Buffer_ToHostBuffer(&args), FailureKind::kGeneric,
                   "PJRT_Buffer_ToHostBuffer")) {
    return;
  }
  ThrowIfError(env, api, AwaitAndDestroy(api, args.event), FailureKind::kGeneric, "device-to-host transfer");
}

JNIEXPORT void JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_bufferDestroy(JNIEnv*, jclass, jlong handle) {
  Buffer* buffer = FromHandle<Buffer>(handle);
  DestroyBuffer(buffer->owner->plugin->api, buffer->buffer);
  delete buffer;
}

// ---- execute ------------------------------------------------------------------------------

JNIEXPORT jlong JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_executeContextCreate(JNIEnv* env, jclass,
                                                                                      jlong plugin_handle,
                                                                                      jlong run_id,
                                                                                      jfloat proof_scale,
                                                                                      jobject host_call_sink) {
  Plugin* plugin = FromHandle<Plugin>(plugin_handle);
  const PJRT_Api* api = plugin->api;
  if (plugin->ffi == nullptr || api->PJRT_ExecuteContext_Create == nullptr) {
    ThrowXla(env, FailureKind::kPlugin, kCodeUnimplemented,
             "this PJRT plugin has no FFI extension, so per-run data cannot reach FFI handlers");
    return 0;
  }
  PJRT_ExecuteContext_Create_Args create_args;
  std::memset(&create_args, 0, sizeof(create_args));
  create_args.struct_size = PJRT_ExecuteContext_Create_Args_STRUCT_SIZE;
  if (ThrowIfError(env, api, api->PJRT_ExecuteContext_Create(&create_args), FailureKind::kGeneric,
                   "PJRT_ExecuteContext_Create")) {
    return 0;
  }
  auto* run = new RunContext();
  run->run_id = run_id;
  run->proof_scale = proof_scale;
  if (host_call_sink != nullptr) {
    // Resolved here, on a Java thread: XLA's threads cannot look classes up through the app loader.
    jclass sink_class = env->GetObjectClass(host_call_sink);
    run->on_host_call = env->GetMethodID(sink_class, "onHostCall",
                                         "(JJLjava/lang/String;[Ljava/nio/ByteBuffer;[I[[J[I[[J)J");
    if (run->on_host_call == nullptr) {
      delete run;
      DestroyExecuteContext(api, create_args.context);
      return 0;  // NoSuchMethodError is pending
    }
    run->host_call_sink = env->NewGlobalRef(host_call_sink);
  }

  XlaActors_FFI_UserData_Add_Args add_args;
  std::memset(&add_args, 0, sizeof(add_args));
  add_args.struct_size = XLA_ACTORS_STRUCT_SIZE(XlaActors_FFI_UserData_Add_Args, user_data);
  add_args.context = create_args.context;
  add_args.user_data.type_id = plugin->run_context_type_id;
  add_args.user_data.data = run;  // owned by our ExecuteContext, freed after the context
  PJRT_Error* error = plugin->ffi->user_data_add(&add_args);
  if (error != nullptr) {
    DestroyExecuteContext(api, create_args.context);
    if (run->host_call_sink != nullptr) env->DeleteGlobalRef(run->host_call_sink);
    delete run;
    ThrowIfError(env, api, error, FailureKind::kGeneric, "adding per-run user data to the execute context");
    return 0;
  }
  return ToHandle(new ExecuteContext{plugin, create_args.context, run});
}

JNIEXPORT void JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_executeContextDestroy(JNIEnv* env, jclass,
                                                                                      jlong handle) {
  ExecuteContext* context = FromHandle<ExecuteContext>(handle);
  const PJRT_Api* api = context->plugin->api;
  PJRT_ExecuteContext_Destroy_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_ExecuteContext_Destroy_Args_STRUCT_SIZE;
  args.context = context->context;
  PJRT_Error* error = api->PJRT_ExecuteContext_Destroy(&args);
  if (context->run->host_call_sink != nullptr) env->DeleteGlobalRef(context->run->host_call_sink);
  delete context->run;
  delete context;
  ThrowIfError(env, api, error, FailureKind::kGeneric, "PJRT_ExecuteContext_Destroy");
}

// Marks a run cancelled: its later host calls fail at once instead of reaching Java.
JNIEXPORT void JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_executeContextCancel(JNIEnv*, jclass, jlong handle) {
  FromHandle<ExecuteContext>(handle)->run->cancelled.store(true);
}

// Runs an executable on its first addressable device and waits for it to finish. Returns the
// output buffer handles; on failure none are leaked and an XlaException is thrown.
JNIEXPORT jlongArray JNICALL Java_dev_xlaactors_nativebridge_PjrtNative_execute(JNIEnv* env, jclass, jlong handle,
                                                                              jlongArray jarguments,
                                                                              jlong context_handle) {
  Executable* executable = FromHandle<Executable>(handle);
  Client* client = executable->owner;
  const PJRT_Api* api = client->plugin->api;

  jsize num_args = env->GetArrayLength(jarguments);
  std::vector<jlong> argument_handles(num_args);
  env->GetLongArrayRegion(jarguments, 0, num_args, argument_handles.data());
  std::vector<PJRT_Buffer*> arguments(num_args);
  for (jsize i = 0; i < num_args; ++i) arguments[i] = FromHandle<Buffer>(argument_handles[i])->buffer;
  PJRT_Buffer* const* argument_list = arguments.data();

  std::vector<PJRT_Buffer*> outputs(executable->num_outputs, nullptr);
  PJRT_Buffer** output_list = outputs.data();
  PJRT_Event* complete_event = nullptr;

  PJRT_ExecuteOptions options;
  std::memset(&options, 0, sizeof(options));
  options.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  // Every run carries an execute context: an FFI handler that asks a run without one for its user
  // data makes this plugin dereference a null pointer (a SIGSEGV in LookupUserData).
  PJRT_ExecuteContext* empty_context = nullptr;
  if (context_handle != 0) {
    options.context = FromHandle<ExecuteContext>(context_handle)->context;
  } else if (api->PJRT_ExecuteContext_Create != nullptr) {
    PJRT_ExecuteContext_Create_Args create_args;
    std::memset(&create_args, 0, sizeof(create_args));
    create_args.struct_size = PJRT_ExecuteContext_Create_Args_STRUCT_SIZE;
    if (ThrowIfError(env, api, api->PJRT_ExecuteContext_Create(&create_args), FailureKind::kGeneric,
                     "PJRT_ExecuteContext_Create")) {
      return nullptr;
    }
    empty_context = create_args.context;
    options.context = empty_context;
  }

  PJRT_LoadedExecutable_Execute_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
  args.executable = executable->loaded;
  args.options = &options;
  args.argument_lists = &argument_list;
  args.num_devices = 1;
  args.num_args = static_cast<size_t>(num_args);
  args.output_lists = &output_list;
  args.device_complete_events = &complete_event;

  PJRT_Error* error = api->PJRT_LoadedExecutable_Execute(&args);
  if (error == nullptr) error = AwaitAndDestroy(api, complete_event);
  if (empty_context != nullptr) DestroyExecuteContext(api, empty_context);
  if (error != nullptr) {
    for (PJRT_Buffer* output : outputs) {
      if (output != nullptr) DestroyBuffer(api, output);
    }
    ThrowIfError(env, api, error, FailureKind::kExecution, "execution failed");
    return nullptr;
  }
  std::vector<jlong> result_handles(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) result_handles[i] = ToHandle(new Buffer{client, outputs[i]});
  jlongArray result = env->NewLongArray(static_cast<jsize>(result_handles.size()));
  if (result == nullptr) {
    for (jlong h : result_handles) {
      Buffer* b = FromHandle<Buffer>(h);
      DestroyBuffer(api, b->buffer);
      delete b;
    }
    return nullptr;
  }
  env->SetLongArrayRegion(result, 0, static_cast<jsize>(result_handles.size()), result_handles.data());
  return result;
}

}  // extern "C"
