// The PJRT FFI extension structs, declared here because no package ships
// xla/pjrt/c/pjrt_c_api_ffi_extension.h. Written from the upstream field order as the pinned
// plugin (xla-cpu-pjrt 0.0.1, PJRT C API 0.81) reads it, confirmed by disassembling the plugin:
//  - PJRT_FFI_Type_Register checks struct_size >= 48 and dereferences type_info (offset 40);
//  - PJRT_FFI_UserData_Add checks struct_size >= 40: its user data is {type_id, data}, no deleter;
//  - PJRT_FFI_Register_Handler checks struct_size >= 52 and reads handler at offset 24, so its
//    args carry no `api_version` field (an upstream draft had one).
// The extension's own size is checked at run time before any field is used.
#ifndef XLA_ACTORS_PJRT_FFI_EXTENSION_H_
#define XLA_ACTORS_PJRT_FFI_EXTENSION_H_

#include <stddef.h>
#include <stdint.h>

#include "xla/pjrt/c/pjrt_c_api.h"

extern "C" {

struct XlaActors_FFI_Type_Info {
  void (*deleter)(void* object);  // may be null
};

struct XlaActors_FFI_Type_Register_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* type_name;
  size_t type_name_size;
  int64_t type_id;  // in-out: 0 asks the plugin to assign one
  const XlaActors_FFI_Type_Info* type_info;  // must not be null
};
typedef PJRT_Error* XlaActors_FFI_Type_Register(XlaActors_FFI_Type_Register_Args* args);

struct XlaActors_FFI_UserData {
  int64_t type_id;
  void* data;  // not owned by the context: this plugin's user data has no deleter
};

struct XlaActors_FFI_UserData_Add_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_ExecuteContext* context;
  XlaActors_FFI_UserData user_data;
};
typedef PJRT_Error* XlaActors_FFI_UserData_Add(XlaActors_FFI_UserData_Add_Args* args);

struct XlaActors_FFI_Register_Handler_Args {
  size_t struct_size;
  const char* target_name;
  size_t target_name_size;
  void* handler;  // XLA_FFI_Handler*
  const char* platform_name;
  size_t platform_name_size;
  uint32_t traits;
};
typedef PJRT_Error* XlaActors_FFI_Register_Handler(XlaActors_FFI_Register_Handler_Args* args);

struct XlaActors_FFI_Extension {
  PJRT_Extension_Base base;
  XlaActors_FFI_Type_Register* type_register;
  XlaActors_FFI_UserData_Add* user_data_add;
  XlaActors_FFI_Register_Handler* register_handler;  // only when base.struct_size covers it
};

}  // extern "C"

#define XLA_ACTORS_STRUCT_SIZE(type, last_field) (offsetof(type, last_field) + sizeof(((type*)0)->last_field))

static_assert(XLA_ACTORS_STRUCT_SIZE(XlaActors_FFI_Type_Register_Args, type_info) == 48,
              "type-register args must match the plugin's 48-byte layout");
static_assert(XLA_ACTORS_STRUCT_SIZE(XlaActors_FFI_UserData_Add_Args, user_data) == 40,
              "user-data-add args must match the plugin's 40-byte layout");
static_assert(XLA_ACTORS_STRUCT_SIZE(XlaActors_FFI_Register_Handler_Args, traits) == 52,
              "register-handler args must match the plugin's 52-byte layout");

#endif  // XLA_ACTORS_PJRT_FFI_EXTENSION_H_
