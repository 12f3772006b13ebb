package dev.xlaactors.runtime;

import static dev.xlaactors.nativebridge.pjrt.global.Pjrt.*;

import dev.xlaactors.error.CompileException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.ExecutionFailedException;
import dev.xlaactors.error.PluginException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.nativebridge.pjrt.*;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.FunctionPointer;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.Pointer;

/**
 * One plugin's PJRT API table, seen through the generated binding: the function pointers the runtime
 * calls, read once (a function-pointer object per call would cost a native allocation), each checked
 * against the table's {@code struct_size} so a plugin older than the header is never misread. Also the
 * one place that turns a {@code PJRT_Error} into an {@link XlaException} and frees it.
 *
 * <p>Thread-safe: the function objects are immutable; every call builds or reuses its own args struct.
 */
final class PjrtApi {
  static {
    NativeLibrary.load();
  }

  /** Which exception class a failed call becomes. */
  enum Failure {
    GENERIC,
    PLUGIN,
    COMPILE,
    EXECUTION
  }

  final PJRT_Api api;
  final String pluginName;
  final int minorVersion;

  final PJRT_Error_Message errorMessage;
  final PJRT_Error_GetCode errorGetCode;
  final PJRT_Error_Destroy errorDestroy;
  final PJRT_Plugin_Attributes pluginAttributes;
  final PJRT_Event_Destroy eventDestroy;
  final PJRT_Event_Await eventAwait;
  final PJRT_Event_OnReady eventOnReady;
  final PJRT_Client_Create clientCreate;
  final PJRT_Client_Destroy clientDestroy;
  final PJRT_Client_PlatformName clientPlatformName;
  final PJRT_Client_PlatformVersion clientPlatformVersion;
  final PJRT_Client_ProcessIndex clientProcessIndex;
  final PJRT_Client_AddressableDevices clientAddressableDevices;
  final PJRT_Client_AddressableMemories clientAddressableMemories;
  final PJRT_Client_Compile clientCompile;
  final PJRT_Client_BufferFromHostBuffer clientBufferFromHostBuffer;
  final PJRT_DeviceDescription_Id descriptionId;
  final PJRT_DeviceDescription_Attributes descriptionAttributes;
  final PJRT_DeviceDescription_Kind descriptionKind;
  final PJRT_DeviceDescription_DebugString descriptionDebugString;
  final PJRT_Device_GetDescription deviceGetDescription;
  final PJRT_Device_LocalHardwareId deviceLocalHardwareId;
  final PJRT_Device_AddressableMemories deviceAddressableMemories;
  final PJRT_Device_DefaultMemory deviceDefaultMemory;
  final PJRT_Device_MemoryStats deviceMemoryStats;
  final PJRT_Memory_Id memoryId;
  final PJRT_Memory_Kind memoryKind;
  final PJRT_Memory_DebugString memoryDebugString;
  final PJRT_Executable_Destroy executableDestroy;
  final PJRT_Executable_Name executableName;
  final PJRT_Executable_NumOutputs executableNumOutputs;
  final PJRT_Executable_SizeOfGeneratedCodeInBytes executableCodeSize;
  final PJRT_Executable_GetCostAnalysis executableCostAnalysis;
  final PJRT_Executable_GetCompiledMemoryStats executableMemoryStats;
  final PJRT_Executable_OutputElementTypes executableOutputElementTypes;
  final PJRT_Executable_OutputDimensions executableOutputDimensions;
  final PJRT_Executable_Serialize executableSerialize;
  final PJRT_Executable_Fingerprint executableFingerprint;
  final PJRT_Executable_OptimizedProgram executableOptimizedProgram;
  final PJRT_Executable_DeserializeAndLoad executableDeserializeAndLoad;
  final PJRT_LoadedExecutable_Destroy loadedDestroy;
  final PJRT_LoadedExecutable_GetExecutable loadedGetExecutable;
  final PJRT_LoadedExecutable_AddressableDevices loadedAddressableDevices;
  final PJRT_Buffer_OnDeviceSizeInBytes bufferOnDeviceSize;
  final PJRT_Buffer_Device bufferDevice;
  final PJRT_Buffer_Memory bufferMemory;
  final PJRT_Buffer_ReadyEvent bufferReadyEvent;
  final PJRT_Buffer_ToHostBuffer bufferToHostBuffer;
  final PJRT_Buffer_CopyToDevice bufferCopyToDevice;
  final PJRT_Buffer_UnsafePointer bufferUnsafePointer;
  /**
   * Whether the bridge's download may read host buffers in place: the plugin has every function that
   * needs (hot_paths.cc reads them only when Java says so, since they may lie past a short table).
   */
  final boolean inPlaceReadPossible;

  private final long tableSize;

  PjrtApi(PJRT_Api api, String pluginName) {
    this.api = api;
    this.pluginName = pluginName;
    this.minorVersion = api.pjrt_api_version().minor_version();
    this.tableSize = api.struct_size();
    errorMessage = required(api::PJRT_Error_Message, "PJRT_Error_Message");
    errorGetCode = required(api::PJRT_Error_GetCode, "PJRT_Error_GetCode");
    errorDestroy = required(api::PJRT_Error_Destroy, "PJRT_Error_Destroy");
    pluginAttributes = optional(api::PJRT_Plugin_Attributes, "PJRT_Plugin_Attributes");
    eventDestroy = required(api::PJRT_Event_Destroy, "PJRT_Event_Destroy");
    eventAwait = required(api::PJRT_Event_Await, "PJRT_Event_Await");
    eventOnReady = optional(api::PJRT_Event_OnReady, "PJRT_Event_OnReady");
    clientCreate = required(api::PJRT_Client_Create, "PJRT_Client_Create");
    clientDestroy = required(api::PJRT_Client_Destroy, "PJRT_Client_Destroy");
    clientPlatformName = required(api::PJRT_Client_PlatformName, "PJRT_Client_PlatformName");
    clientPlatformVersion = optional(api::PJRT_Client_PlatformVersion, "PJRT_Client_PlatformVersion");
    clientProcessIndex = optional(api::PJRT_Client_ProcessIndex, "PJRT_Client_ProcessIndex");
    clientAddressableDevices = required(api::PJRT_Client_AddressableDevices, "PJRT_Client_AddressableDevices");
    clientAddressableMemories = optional(api::PJRT_Client_AddressableMemories, "PJRT_Client_AddressableMemories");
    clientCompile = required(api::PJRT_Client_Compile, "PJRT_Client_Compile");
    clientBufferFromHostBuffer = required(api::PJRT_Client_BufferFromHostBuffer, "PJRT_Client_BufferFromHostBuffer");
    descriptionId = required(api::PJRT_DeviceDescription_Id, "PJRT_DeviceDescription_Id");
    descriptionAttributes = optional(api::PJRT_DeviceDescription_Attributes, "PJRT_DeviceDescription_Attributes");
    descriptionKind = required(api::PJRT_DeviceDescription_Kind, "PJRT_DeviceDescription_Kind");
    descriptionDebugString = optional(api::PJRT_DeviceDescription_DebugString, "PJRT_DeviceDescription_DebugString");
    deviceGetDescription = required(api::PJRT_Device_GetDescription, "PJRT_Device_GetDescription");
    deviceLocalHardwareId = optional(api::PJRT_Device_LocalHardwareId, "PJRT_Device_LocalHardwareId");
    deviceAddressableMemories = optional(api::PJRT_Device_AddressableMemories, "PJRT_Device_AddressableMemories");
    deviceDefaultMemory = optional(api::PJRT_Device_DefaultMemory, "PJRT_Device_DefaultMemory");
    deviceMemoryStats = optional(api::PJRT_Device_MemoryStats, "PJRT_Device_MemoryStats");
    memoryId = optional(api::PJRT_Memory_Id, "PJRT_Memory_Id");
    memoryKind = optional(api::PJRT_Memory_Kind, "PJRT_Memory_Kind");
    memoryDebugString = optional(api::PJRT_Memory_DebugString, "PJRT_Memory_DebugString");
    executableDestroy = required(api::PJRT_Executable_Destroy, "PJRT_Executable_Destroy");
    executableName = optional(api::PJRT_Executable_Name, "PJRT_Executable_Name");
    executableNumOutputs = required(api::PJRT_Executable_NumOutputs, "PJRT_Executable_NumOutputs");
    executableCodeSize =
        optional(api::PJRT_Executable_SizeOfGeneratedCodeInBytes, "PJRT_Executable_SizeOfGeneratedCodeInBytes");
    executableCostAnalysis = optional(api::PJRT_Executable_GetCostAnalysis, "PJRT_Executable_GetCostAnalysis");
    executableMemoryStats =
        optional(api::PJRT_Executable_GetCompiledMemoryStats, "PJRT_Executable_GetCompiledMemoryStats");
    executableOutputElementTypes =
        required(api::PJRT_Executable_OutputElementTypes, "PJRT_Executable_OutputElementTypes");
    executableOutputDimensions = required(api::PJRT_Executable_OutputDimensions, "PJRT_Executable_OutputDimensions");
    executableSerialize = optional(api::PJRT_Executable_Serialize, "PJRT_Executable_Serialize");
    executableFingerprint = optional(api::PJRT_Executable_Fingerprint, "PJRT_Executable_Fingerprint");
    executableOptimizedProgram = optional(api::PJRT_Executable_OptimizedProgram, "PJRT_Executable_OptimizedProgram");
    executableDeserializeAndLoad =
        optional(api::PJRT_Executable_DeserializeAndLoad, "PJRT_Executable_DeserializeAndLoad");
    loadedDestroy = required(api::PJRT_LoadedExecutable_Destroy, "PJRT_LoadedExecutable_Destroy");
    loadedGetExecutable = required(api::PJRT_LoadedExecutable_GetExecutable, "PJRT_LoadedExecutable_GetExecutable");
    loadedAddressableDevices =
        required(api::PJRT_LoadedExecutable_AddressableDevices, "PJRT_LoadedExecutable_AddressableDevices");
    // Called from the bridge's hot paths (hot_paths.cc), which trust these checks.
    required(api::PJRT_LoadedExecutable_Execute, "PJRT_LoadedExecutable_Execute");
    required(api::PJRT_Buffer_Destroy, "PJRT_Buffer_Destroy");
    // Called directly: the empty execute context of every run (Executable) and run contexts (bridge_api.cc).
    required(api::PJRT_ExecuteContext_Create, "PJRT_ExecuteContext_Create");
    required(api::PJRT_ExecuteContext_Destroy, "PJRT_ExecuteContext_Destroy");
    bufferOnDeviceSize = optional(api::PJRT_Buffer_OnDeviceSizeInBytes, "PJRT_Buffer_OnDeviceSizeInBytes");
    bufferDevice = optional(api::PJRT_Buffer_Device, "PJRT_Buffer_Device");
    bufferMemory = optional(api::PJRT_Buffer_Memory, "PJRT_Buffer_Memory");
    bufferReadyEvent = optional(api::PJRT_Buffer_ReadyEvent, "PJRT_Buffer_ReadyEvent");
    bufferToHostBuffer = required(api::PJRT_Buffer_ToHostBuffer, "PJRT_Buffer_ToHostBuffer");
    bufferCopyToDevice = optional(api::PJRT_Buffer_CopyToDevice, "PJRT_Buffer_CopyToDevice");
    bufferUnsafePointer = optional(api::PJRT_Buffer_UnsafePointer, "PJRT_Buffer_UnsafePointer");
    inPlaceReadPossible =
        optional(api::PJRT_Buffer_IsOnCpu, "PJRT_Buffer_IsOnCpu") != null
            && optional(api::PJRT_Buffer_GetMemoryLayout, "PJRT_Buffer_GetMemoryLayout") != null
            && optional(api::PJRT_Buffer_UnsafePointer, "PJRT_Buffer_UnsafePointer") != null
            && bufferReadyEvent != null
            && bufferOnDeviceSize != null;
  }

  /** The API version, e.g. {@code 0.81}. */
  String version() {
    return api.pjrt_api_version().major_version() + "." + minorVersion;
  }

  private <T extends FunctionPointer> T optional(Supplier<T> getter, String name) {
    long offset = Loader.offsetof(PJRT_Api.class, name);
    if (offset < 0 || offset + Pointer.sizeof(Pointer.class) > tableSize) {
      return null; // the plugin's table ends before this member: reading it would read past the table
    }
    T function = getter.get();
    return function == null || function.isNull() ? null : function;
  }

  private <T extends FunctionPointer> T required(Supplier<T> getter, String name) {
    T function = optional(getter, name);
    if (function == null) {
      throw new PluginException(ErrorCode.FAILED_PRECONDITION, missing(name) + ", which xla-actors needs");
    }
    return function;
  }

  private String missing(String function) {
    return "PJRT plugin " + pluginName + " (PJRT C API " + version() + ", " + tableSize + "-byte API table) has no "
        + function;
  }

  /** {@code function}, or an UNIMPLEMENTED error naming the plugin, its version and the function. */
  <T extends FunctionPointer> T need(T function, String name) {
    if (function == null) {
      throw new XlaException(ErrorCode.UNIMPLEMENTED, missing(name));
    }
    return function;
  }

  // ---- errors --------------------------------------------------------------------------------

  /** Throws {@code error} (if non-null) as an exception of {@code failure}'s kind, freeing it. */
  void check(PJRT_Error error, Failure failure, String what) {
    if (error != null) {
      throw toException(error, failure, what);
    }
  }

  /**
   * Calls a PJRT function and checks its error as {@link #check(PJRT_Error, Failure, String)} does. A C++
   * exception thrown inside the plugin (the plugin's {@code absl::BadStatusOrAccess}, "Bad StatusOr access:
   * ...", or any other) reaches Java as a bare {@link RuntimeException} from JavaCPP: it becomes an exception
   * of {@code failure}'s kind naming the call, so no public failure escapes as a raw RuntimeException.
   */
  void check(java.util.function.Supplier<PJRT_Error> call, Failure failure, String what) {
    PJRT_Error error;
    try {
      error = call.get();
    } catch (XlaException e) {
      throw e;
    } catch (RuntimeException e) {
      throw exception(failure, ErrorCode.INTERNAL, what + " threw inside the plugin (a C++ exception, not a PJRT error): "
          + e.getMessage() + "; the plugin does not handle this input: check the arguments, or report it with them");
    }
    check(error, failure, what);
  }

  private static XlaException exception(Failure failure, ErrorCode code, String text) {
    return switch (failure) {
      case PLUGIN -> new PluginException(code, text);
      case COMPILE -> new CompileException(code, text);
      case EXECUTION -> new ExecutionFailedException(code, text);
      case GENERIC -> new XlaException(code, text);
    };
  }

  /** Converts and frees a PJRT error; its message is prefixed by {@code what}. */
  XlaException toException(PJRT_Error error, Failure failure, String what) {
    String message;
    ErrorCode code;
    try (PJRT_Error_Message_Args m = new PJRT_Error_Message_Args();
        PJRT_Error_GetCode_Args c = new PJRT_Error_GetCode_Args()) {
      m.struct_size(PJRT_Error_Message_Args_STRUCT_SIZE).error(error);
      errorMessage.call(m);
      message = utf8(m.message(), m.message_size());
      c.struct_size(PJRT_Error_GetCode_Args_STRUCT_SIZE).error(error);
      PJRT_Error codeError = errorGetCode.call(c);
      code = codeError == null ? ErrorCode.fromStatusCode(c.code()) : ErrorCode.INTERNAL;
      if (codeError != null) {
        destroy(codeError);
      }
    } finally {
      destroy(error);
    }
    return exception(failure, code, what + ": " + message);
  }

  private void destroy(PJRT_Error error) {
    try (PJRT_Error_Destroy_Args d = new PJRT_Error_Destroy_Args()) {
      d.struct_size(PJRT_Error_Destroy_Args_STRUCT_SIZE).error(error);
      errorDestroy.call(d);
    }
  }

  /** {@code text} as NUL-terminated UTF-8 in native memory (JNI's own strings are modified UTF-8). */
  static BytePointer cString(String text) {
    byte[] utf8 = text.getBytes(StandardCharsets.UTF_8);
    BytePointer pointer = new BytePointer(utf8.length + 1L);
    pointer.put(utf8).put(utf8.length, (byte) 0);
    return pointer;
  }

  /** {@code bytes} copied into native memory (sized, not terminated). */
  static BytePointer bytes(byte[] bytes) {
    BytePointer pointer = new BytePointer(Math.max(1, bytes.length));
    pointer.put(bytes);
    return pointer.capacity(bytes.length);
  }

  /** Decodes {@code size} bytes at {@code pointer} as UTF-8 (PJRT strings are sized, not terminated). */
  static String utf8(BytePointer pointer, long size) {
    if (pointer == null || size <= 0) {
      return "";
    }
    byte[] bytes = new byte[Math.toIntExact(size)];
    pointer.position(0).capacity(size).get(bytes);
    return new String(bytes, StandardCharsets.UTF_8);
  }

  // ---- events --------------------------------------------------------------------------------

  /**
   * Per-thread args structs for the frequent calls made from Java (event await and destroy after async
   * transfers and device copies, on-device size): allocating one per call would cost a native
   * allocation and a deallocator registration each time. Each user sets struct_size and its inputs
   * before a call. (Execute, upload and download go through the bridge's hot paths instead.)
   */
  private static final class Scratch {
    final PJRT_Event_Await_Args await = new PJRT_Event_Await_Args();
    final PJRT_Event_Destroy_Args eventDestroy = new PJRT_Event_Destroy_Args();
    final PJRT_Buffer_OnDeviceSizeInBytes_Args onDeviceSize = new PJRT_Buffer_OnDeviceSizeInBytes_Args();
  }

  private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);

  private static Scratch scratch() {
    return SCRATCH.get();
  }

  /** Waits for {@code event} (null means already done) and destroys it; throws its error, if any. */
  void awaitAndDestroy(PJRT_Event event, Failure failure, String what) {
    if (event == null) {
      return;
    }
    PJRT_Event_Await_Args a = scratch().await;
    PJRT_Error error;
    try {
      a.struct_size(PJRT_Event_Await_Args_STRUCT_SIZE).event(event);
      error = eventAwait.call(a);
    } finally {
      destroyEvent(event);
    }
    check(error, failure, what);
  }

  void destroyEvent(PJRT_Event event) {
    PJRT_Event_Destroy_Args d = scratch().eventDestroy;
    d.struct_size(PJRT_Event_Destroy_Args_STRUCT_SIZE).event(event);
    PJRT_Error error = eventDestroy.call(d);
    if (error != null) {
      toException(error, Failure.GENERIC, "PJRT_Event_Destroy"); // freed; nothing else to do
    }
  }

  /** Destroys a buffer, throwing the plugin's error, if any. */
  void destroyBuffer(PJRT_Buffer buffer) {
    check(XlaActors_BufferDestroy(api, buffer), Failure.GENERIC, "PJRT_Buffer_Destroy");
  }

  /** The bytes {@code buffer} takes on its device. */
  long onDeviceSize(PJRT_Buffer buffer) {
    PJRT_Buffer_OnDeviceSizeInBytes_Args s = scratch().onDeviceSize;
    s.struct_size(PJRT_Buffer_OnDeviceSizeInBytes_Args_STRUCT_SIZE).buffer(buffer);
    check(() -> need(bufferOnDeviceSize, "PJRT_Buffer_OnDeviceSizeInBytes").call(s), Failure.GENERIC,
        "PJRT_Buffer_OnDeviceSizeInBytes");
    return s.on_device_size_in_bytes();
  }

  /**
   * A future completed when {@code event} is ready (exceptionally with its error), after which the event
   * is destroyed. Without {@code PJRT_Event_OnReady}, waits on a pool thread instead.
   */
  CompletableFuture<Void> onReady(PJRT_Event event, String what) {
    CompletableFuture<Void> future = new CompletableFuture<>();
    if (event == null) {
      future.complete(null);
      return future;
    }
    if (eventOnReady == null) {
      CompletableFuture.runAsync(
          () -> {
            try {
              awaitAndDestroy(event, Failure.GENERIC, what);
              future.complete(null);
            } catch (RuntimeException e) {
              future.completeExceptionally(e);
            }
          });
      return future;
    }
    long id = EventCallbacks.register(this, event, future, what);
    try (PJRT_Event_OnReady_Args args = new PJRT_Event_OnReady_Args()) {
      args.struct_size(PJRT_Event_OnReady_Args_STRUCT_SIZE)
          .event(event)
          .callback(EventCallbacks.CALLBACK)
          .user_arg(new Address(id));
      PJRT_Error error = eventOnReady.call(args);
      if (error != null) {
        EventCallbacks.forget(id);
        destroyEvent(event);
        future.completeExceptionally(toException(error, Failure.GENERIC, what));
      }
    }
    return future;
  }

  /** A raw address as a Pointer (a callback's id argument, a buffer address from a hot path); owns nothing. */
  static final class Address extends Pointer {
    Address(long address) {
      this.address = address;
    }
  }

  /**
   * The one {@code PJRT_Event_OnReadyCallback} of the process. Its user argument is an id into a map of
   * pending futures (never a pointer to a Java object), and the callback object is held by a static field,
   * so the plugin can call it from any thread for as long as the process lives.
   */
  private static final class EventCallbacks {
    private record Pending(PjrtApi api, PJRT_Event event, CompletableFuture<Void> future, String what) {}

    private static final Map<Long, Pending> PENDING = new ConcurrentHashMap<>();
    private static final AtomicLong NEXT_ID = new AtomicLong(1);

    static final PJRT_Event_OnReadyCallback CALLBACK =
        new PJRT_Event_OnReadyCallback() {
          @Override
          public void call(PJRT_Error error, Pointer userArg) {
            Pending pending = PENDING.remove(userArg == null ? 0L : userArg.address());
            if (pending == null) {
              return;
            }
            try {
              // The callback owns the error it is given; the event is destroyed after it is ready.
              XlaException failure =
                  error == null ? null : pending.api.toException(error, Failure.GENERIC, pending.what);
              pending.api.destroyEvent(pending.event);
              if (failure == null) {
                pending.future.complete(null);
              } else {
                pending.future.completeExceptionally(failure);
              }
            } catch (Throwable t) {
              pending.future.completeExceptionally(t); // never let an exception unwind into the plugin
            }
          }
        };

    static long register(PjrtApi api, PJRT_Event event, CompletableFuture<Void> future, String what) {
      long id = NEXT_ID.getAndIncrement();
      PENDING.put(id, new Pending(api, event, future, what));
      return id;
    }

    static void forget(long id) {
      PENDING.remove(id);
    }
  }

  // ---- named values --------------------------------------------------------------------------

  /** Decodes a PJRT named-value array (attributes) into a map of String, Long, long[], Float or Boolean. */
  static Map<String, Object> namedValues(PJRT_NamedValue values, long count) {
    Map<String, Object> result = new LinkedHashMap<>();
    for (long i = 0; i < count; i++) {
      PJRT_NamedValue v = values.getPointer(i);
      String name = utf8(v.name(), v.name_size());
      Object value =
          switch (v.type()) {
            case PJRT_NamedValue_kString -> utf8(v.string_value(), v.value_size());
            case PJRT_NamedValue_kInt64 -> v.int64_value();
            case PJRT_NamedValue_kInt64List -> {
              long[] list = new long[Math.toIntExact(v.value_size())];
              LongPointer p = v.int64_array_value();
              if (list.length > 0) {
                p.position(0).capacity(list.length).get(list);
              }
              yield List.of(boxed(list));
            }
            case PJRT_NamedValue_kFloat -> v.float_value();
            case PJRT_NamedValue_kBool -> v.bool_value();
            default -> "(unknown named-value type " + v.type() + ")";
          };
      result.put(name, value);
    }
    return result;
  }

  /**
   * Fills {@code target} with one named value; native strings and arrays it points to are added to
   * {@code keepAlive}, which the caller closes after the call. Refuses value types PJRT has no kind for.
   */
  static void namedValue(PJRT_NamedValue target, String name, Object value, List<Pointer> keepAlive) {
    BytePointer nativeName = bytes(name.getBytes(StandardCharsets.UTF_8));
    keepAlive.add(nativeName);
    target.struct_size(PJRT_NamedValue_STRUCT_SIZE).name(nativeName).name_size(nativeName.capacity());
    if (value instanceof String s) {
      BytePointer text = bytes(s.getBytes(StandardCharsets.UTF_8));
      keepAlive.add(text);
      target.type(PJRT_NamedValue_kString).string_value(text).value_size(text.capacity());
    } else if (value instanceof Long || value instanceof Integer) {
      target.type(PJRT_NamedValue_kInt64).int64_value(((Number) value).longValue()).value_size(1);
    } else if (value instanceof Boolean b) {
      target.type(PJRT_NamedValue_kBool).bool_value(b).value_size(1);
    } else if (value instanceof Float f) {
      target.type(PJRT_NamedValue_kFloat).float_value(f).value_size(1);
    } else if (value instanceof long[] list) {
      LongPointer array = new LongPointer(Math.max(1, list.length));
      if (list.length > 0) {
        array.put(list);
      }
      keepAlive.add(array);
      target.type(PJRT_NamedValue_kInt64List).int64_array_value(array).value_size(list.length);
    } else {
      throw new dev.xlaactors.error.InvalidArgumentException(
          "client option '" + name + "' must be a String, Long, Integer, Boolean, Float or long[], got "
              + (value == null ? "null" : value.getClass().getSimpleName()));
    }
  }

  private static Long[] boxed(long[] values) {
    Long[] result = new Long[values.length];
    for (int i = 0; i < values.length; i++) {
      result[i] = values[i];
    }
    return result;
  }
}
