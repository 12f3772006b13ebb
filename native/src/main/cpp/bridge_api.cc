// The bridge's C API (xla_actors_bridge.h) other than the host-call answers: loading plugins,
// registering FFI handlers, run contexts. Every entry point catches everything: no C++ exception
// crosses into the generated JNI code or into the plugin.
#include <dlfcn.h>

#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <utility>

#include "bridge.h"

namespace xla_actors {
namespace {

std::mutex g_plugins_mutex;
std::map<const PJRT_Api*, Plugin*>& Plugins() {
  static auto* plugins = new std::map<const PJRT_Api*, Plugin*>();  // never freed: plugins are never unloaded
  return *plugins;
}

// The FFI extension in the plugin's extension chain, if it has every field the bridge uses.
XlaActors_FFI_Extension* FindFfiExtension(const PJRT_Api* api, std::string* problem) {
  for (PJRT_Extension_Base* ext = api->extension_start; ext != nullptr; ext = ext->next) {
    if (ext->type != PJRT_Extension_Type_FFI) continue;
    size_t needed = XLA_ACTORS_STRUCT_SIZE(XlaActors_FFI_Extension, register_handler);
    if (ext->struct_size < needed || reinterpret_cast<XlaActors_FFI_Extension*>(ext)->register_handler == nullptr) {
      *problem = "the plugin's FFI extension is " + std::to_string(ext->struct_size) + " bytes, without " +
                 "register_handler (needs " + std::to_string(needed) + " bytes; plugins built after Aug 2025 have it)";
      return nullptr;
    }
    return reinterpret_cast<XlaActors_FFI_Extension*>(ext);
  }
  *problem = "the plugin has no FFI extension";
  return nullptr;
}

void DestroyExecuteContext(const PJRT_Api* api, PJRT_ExecuteContext* context) {
  PJRT_ExecuteContext_Destroy_Args args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = PJRT_ExecuteContext_Destroy_Args_STRUCT_SIZE;
  args.context = context;
  PJRT_Error* error = api->PJRT_ExecuteContext_Destroy(&args);
  if (error != nullptr) ConsumeError(api, error, nullptr);
}

// The smallest PJRT_Api the bridge reads in C++: up to the execute-context functions.
constexpr size_t kMinimumApiSize = offsetof(PJRT_Api, PJRT_ExecuteContext_Destroy) + sizeof(void*);

}  // namespace

Plugin* FindPlugin(const PJRT_Api* api) {
  std::lock_guard<std::mutex> lock(g_plugins_mutex);
  auto it = Plugins().find(api);
  return it == Plugins().end() ? nullptr : it->second;
}

void WriteError(char* buffer, size_t size, const std::string& message) {
  if (buffer == nullptr || size == 0) return;
  size_t n = message.size() < size - 1 ? message.size() : size - 1;
  std::memcpy(buffer, message.data(), n);
  buffer[n] = '\0';
}

std::string ConsumeError(const PJRT_Api* api, PJRT_Error* error, int* code) {
  PJRT_Error_Message_Args message_args;
  std::memset(&message_args, 0, sizeof(message_args));
  message_args.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
  message_args.error = error;
  api->PJRT_Error_Message(&message_args);
  std::string message(message_args.message, message_args.message_size);
  if (code != nullptr) {
    PJRT_Error_GetCode_Args code_args;
    std::memset(&code_args, 0, sizeof(code_args));
    code_args.struct_size = PJRT_Error_GetCode_Args_STRUCT_SIZE;
    code_args.error = error;
    PJRT_Error* code_error = api->PJRT_Error_GetCode(&code_args);
    *code = code_error == nullptr ? static_cast<int>(code_args.code) : kCodeInternal;
  }
  PJRT_Error_Destroy_Args destroy_args;
  std::memset(&destroy_args, 0, sizeof(destroy_args));
  destroy_args.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
  destroy_args.error = error;
  api->PJRT_Error_Destroy(&destroy_args);
  return message;
}

}  // namespace xla_actors

using namespace xla_actors;

extern "C" {

const PJRT_Api* XlaActors_LoadPlugin(const char* path, char* error, size_t error_size) {
  try {
    if (path == nullptr || *path == '\0') {
      WriteError(error, error_size, "no plugin path given");
      return nullptr;
    }
    // RTLD_LOCAL keeps the plugin's many symbols out of the global namespace; never dlclose'd because
    // XLA's static registries (FFI handlers among them) live inside it.
    void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* reason = dlerror();
      WriteError(error, error_size,
                 std::string("cannot load PJRT plugin '") + path + "': " + (reason ? reason : "unknown dlopen error"));
      return nullptr;
    }
    using GetPjrtApiFn = const PJRT_Api* (*)();
    auto get_api = reinterpret_cast<GetPjrtApiFn>(dlsym(library, "GetPjrtApi"));
    if (get_api == nullptr) {
      WriteError(error, error_size, std::string("'") + path + "' is not a PJRT plugin: it does not export GetPjrtApi");
      return nullptr;
    }
    const PJRT_Api* api = get_api();
    if (api == nullptr) {
      WriteError(error, error_size, std::string("GetPjrtApi of '") + path + "' returned null");
      return nullptr;
    }
    if (FindPlugin(api) != nullptr) return api;  // loaded before (dlopen returned the same library)
    if (api->pjrt_api_version.major_version != PJRT_API_MAJOR) {
      WriteError(error, error_size,
                 std::string("PJRT plugin '") + path + "' implements PJRT C API " +
                     std::to_string(api->pjrt_api_version.major_version) + "." +
                     std::to_string(api->pjrt_api_version.minor_version) + ", expected major version " +
                     std::to_string(PJRT_API_MAJOR));
      return nullptr;
    }
    if (api->struct_size < kMinimumApiSize) {
      WriteError(error, error_size,
                 std::string("PJRT plugin '") + path + "' (PJRT C API 0." +
                     std::to_string(api->pjrt_api_version.minor_version) + ") has a " +
                     std::to_string(api->struct_size) + "-byte API table, without the execute-context functions "
                     "(needs at least " + std::to_string(kMinimumApiSize) + " bytes)");
      return nullptr;
    }
    // The functions C++ calls before Java has checked the table (errors, execute contexts): a null entry
    // would crash the JVM, so refuse the plugin naming the missing function.
    const std::pair<const char*, const void*> needed[] = {
        {"PJRT_Error_Destroy", reinterpret_cast<const void*>(api->PJRT_Error_Destroy)},
        {"PJRT_Error_Message", reinterpret_cast<const void*>(api->PJRT_Error_Message)},
        {"PJRT_Error_GetCode", reinterpret_cast<const void*>(api->PJRT_Error_GetCode)},
        {"PJRT_ExecuteContext_Create", reinterpret_cast<const void*>(api->PJRT_ExecuteContext_Create)},
        {"PJRT_ExecuteContext_Destroy", reinterpret_cast<const void*>(api->PJRT_ExecuteContext_Destroy)},
    };
    for (const auto& [name, function] : needed) {
      if (function == nullptr) {
        WriteError(error, error_size,
                   std::string("PJRT plugin '") + path + "' (PJRT C API 0." +
                       std::to_string(api->pjrt_api_version.minor_version) + ") has no " + name +
                       ", which xla-actors needs (its API table entry is null)");
        return nullptr;
      }
    }
    if (api->PJRT_Plugin_Initialize != nullptr) {
      PJRT_Plugin_Initialize_Args init_args;
      std::memset(&init_args, 0, sizeof(init_args));
      init_args.struct_size = PJRT_Plugin_Initialize_Args_STRUCT_SIZE;
      PJRT_Error* init_error = api->PJRT_Plugin_Initialize(&init_args);
      if (init_error != nullptr) {
        WriteError(error, error_size,
                   std::string("PJRT_Plugin_Initialize of '") + path + "' failed: " +
                       ConsumeError(api, init_error, nullptr));
        return nullptr;
      }
    }
    auto* plugin = new Plugin();
    plugin->api = api;
    plugin->ffi = FindFfiExtension(api, &plugin->ffi_problem);
    std::lock_guard<std::mutex> lock(g_plugins_mutex);
    Plugins().emplace(api, plugin);
    return api;
  } catch (const std::exception& e) {
    WriteError(error, error_size, std::string("loading the plugin failed: ") + e.what());
  } catch (...) {
    WriteError(error, error_size, "loading the plugin failed with an unknown C++ exception");
  }
  return nullptr;
}

int XlaActors_RegisterFfiHandlers(const PJRT_Api* api, char* error, size_t error_size) {
  try {
    Plugin* plugin = FindPlugin(api);
    if (plugin == nullptr) {
      WriteError(error, error_size, "the plugin was not loaded through XlaActors_LoadPlugin");
      return -1;
    }
    static std::mutex registration_mutex;
    std::lock_guard<std::mutex> lock(registration_mutex);
    if (plugin->handlers_registered) return 1;
    if (plugin->ffi == nullptr) {
      WriteError(error, error_size, plugin->ffi_problem);
      return 0;
    }
    std::string problem = RegisterFfiHandlers(plugin);
    if (!problem.empty()) {
      WriteError(error, error_size, problem);
      return -1;
    }
    plugin->handlers_registered = true;
    return 1;
  } catch (const std::exception& e) {
    WriteError(error, error_size, std::string("registering FFI handlers failed: ") + e.what());
  } catch (...) {
    WriteError(error, error_size, "registering FFI handlers failed with an unknown C++ exception");
  }
  return -1;
}

XlaActors_RunContext* XlaActors_RunContext_Create(const PJRT_Api* api, int64_t run_id, float scale_add_factor,
                                                  int64_t sink_id, char* error, size_t error_size) {
  try {
    Plugin* plugin = FindPlugin(api);
    if (plugin == nullptr || !plugin->handlers_registered) {
      WriteError(error, error_size, "the plugin has no registered FFI handlers, so per-run data cannot reach them");
      return nullptr;
    }
    PJRT_ExecuteContext_Create_Args create_args;
    std::memset(&create_args, 0, sizeof(create_args));
    create_args.struct_size = PJRT_ExecuteContext_Create_Args_STRUCT_SIZE;
    PJRT_Error* pjrt_error = api->PJRT_ExecuteContext_Create(&create_args);
    if (pjrt_error != nullptr) {
      WriteError(error, error_size, "PJRT_ExecuteContext_Create: " + ConsumeError(api, pjrt_error, nullptr));
      return nullptr;
    }
    auto* run = new XlaActors_RunContext();
    run->api = api;
    run->context = create_args.context;
    run->run_id = run_id;
    run->sink_id = sink_id;
    run->proof_scale = scale_add_factor;

    XlaActors_FFI_UserData_Add_Args add_args;
    std::memset(&add_args, 0, sizeof(add_args));
    add_args.struct_size = XLA_ACTORS_STRUCT_SIZE(XlaActors_FFI_UserData_Add_Args, user_data);
    add_args.context = create_args.context;
    add_args.user_data.type_id = RunContextTypeId();
    add_args.user_data.data = run;  // not owned by the context: freed by XlaActors_RunContext_Destroy
    pjrt_error = plugin->ffi->user_data_add(&add_args);
    if (pjrt_error != nullptr) {
      WriteError(error, error_size,
                 "adding per-run user data to the execute context: " + ConsumeError(api, pjrt_error, nullptr));
      DestroyExecuteContext(api, create_args.context);
      delete run;
      return nullptr;
    }
    return run;
  } catch (const std::exception& e) {
    WriteError(error, error_size, std::string("creating a run context failed: ") + e.what());
  } catch (...) {
    WriteError(error, error_size, "creating a run context failed with an unknown C++ exception");
  }
  return nullptr;
}

PJRT_ExecuteContext* XlaActors_RunContext_ExecuteContext(XlaActors_RunContext* run) {
  return run == nullptr ? nullptr : run->context;
}

void XlaActors_RunContext_Cancel(XlaActors_RunContext* run) {
  if (run != nullptr) run->cancelled.store(true);
}

void XlaActors_RunContext_Destroy(XlaActors_RunContext* run) {
  if (run == nullptr) return;
  try {
    DestroyExecuteContext(run->api, run->context);
  } catch (...) {
    // Nothing to report to: the context is gone either way.
  }
  delete run;
}

}  // extern "C"
