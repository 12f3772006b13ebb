package dev.xlaactors.runtime;

import static dev.xlaactors.nativebridge.pjrt.global.Pjrt.*;

import dev.xlaactors.error.CompileException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.PluginException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.nativebridge.pjrt.PJRT_Buffer;
import dev.xlaactors.nativebridge.pjrt.PJRT_Client;
import dev.xlaactors.nativebridge.pjrt.PJRT_Client_AddressableDevices_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Client_AddressableMemories_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Client_BufferFromHostBuffer_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Client_Compile_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Client_Create_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Client_Destroy_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Client_PlatformName_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Client_PlatformVersion_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Client_ProcessIndex_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Device;
import dev.xlaactors.nativebridge.pjrt.PJRT_Error;
import dev.xlaactors.nativebridge.pjrt.PJRT_DeviceDescription_Id_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_DeviceDescription_Kind_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Device_GetDescription_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Executable_DeserializeAndLoad_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Memory;
import dev.xlaactors.nativebridge.pjrt.PJRT_NamedValue;
import dev.xlaactors.nativebridge.pjrt.PJRT_Program;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.Pointer;

/**
 * A PJRT client: the devices of one plugin, and the entry point for compiling programs and moving
 * tensors to devices. Several clients, of one plugin or of different plugins, can live side by side.
 *
 * <p>Lifetime: executables and buffers keep their client alive; closing the client releases the owner's
 * reference, and the native client is destroyed once its last executable and buffer are closed.
 * Executables held by the compile cache are closed with the client. Thread-safe.
 */
public final class XlaClient extends NativeHandle {
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(XlaClient.class);

  static {
    NativeLibrary.load();
  }

  private final Plugin plugin;
  private final PjrtApi api;
  private final PJRT_Client client;
  private final List<Device> devices;
  private final String platformName;
  private final CompileCache cache;
  private final CompiledProgramStore store; // null: nothing kept on disk
  private final InFlightExecutions inFlight;

  private XlaClient(Plugin plugin, PJRT_Client client, int compileCacheSize, RuntimeSettings settings) {
    super(null, destroyer(plugin.api(), client));
    this.plugin = plugin;
    this.api = plugin.api();
    this.client = client;
    try {
      this.devices = readDevices();
      this.platformName = readPlatformName();
    } catch (RuntimeException e) {
      close();
      throw e;
    }
    this.cache = new CompileCache(compileCacheSize);
    this.store = settings == null ? null : CompiledProgramStore.open(settings, plugin, platformName).orElse(null);
    this.inFlight = new InFlightExecutions(devices.size(), platformName);
  }

  /** Executions in flight on each device, and the limit a nested run meets (see {@link InFlightExecutions}). */
  public InFlightExecutions inFlight() {
    return inFlight;
  }

  private static Destroyer destroyer(PjrtApi api, PJRT_Client client) {
    return () -> {
      try (PJRT_Client_Destroy_Args args = new PJRT_Client_Destroy_Args()) {
        args.struct_size(PJRT_Client_Destroy_Args_STRUCT_SIZE).client(client);
        api.check(() -> api.clientDestroy.call(args), PjrtApi.Failure.GENERIC, "PJRT_Client_Destroy");
      }
    };
  }

  /** A client of the plugin named by the application's config. */
  public static XlaClient create() {
    return create(RuntimeSettings.load());
  }

  /**
   * A client of the plugin {@code settings} name, with their client options and compile cache; also sets
   * the process-wide {@link HostMemoryPool}'s bound to theirs.
   */
  public static XlaClient create(RuntimeSettings settings) {
    HostMemoryPool.configureShared(settings.hostMemoryPoolBytes());
    Map<String, Object> options = new java.util.HashMap<>();
    options.put("asynchronous", settings.clientAsynchronous());
    if (settings.cpuDeviceCount() > 0) {
      options.put("cpu_device_count", (long) settings.cpuDeviceCount());
    }
    return create(Plugin.load(settings), options, settings.compileCacheSize(), settings);
  }

  /**
   * A client of {@code plugin}: any loaded plugin, so a second one (say a GPU plugin) serves its own
   * clients. {@code options} are the plugin's client options ({@code PJRT_Client_Create}'s named values:
   * String, Long or Integer, Boolean, Float or long[] values; the CPU plugin knows {@code asynchronous},
   * other plugins refuse names they do not know). {@code compileCacheSize} executables are kept for reuse
   * (0 disables the cache). An {@code XLA_FLAGS} environment variable the plugin would end the process on
   * (an unknown flag, a bad value, a value measured to crash it) is refused first with a {@link
   * PluginException} (see {@code XlaFlags}).
   */
  public static XlaClient create(Plugin plugin, Map<String, ?> options, int compileCacheSize) {
    return create(plugin, options, compileCacheSize, null);
  }

  /** As above; {@code settings}, when given, also name where compiled programs are kept ({@link CompiledProgramStore}). */
  private static XlaClient create(Plugin plugin, Map<String, ?> options, int compileCacheSize, RuntimeSettings settings) {
    Objects.requireNonNull(plugin, "plugin");
    Objects.requireNonNull(options, "options");
    checkCpuDeviceCount(options.get("cpu_device_count"));
    XlaFlags.checkEnvironment(plugin); // the plugin parses XLA_FLAGS at client creation and ends the process on a bad one
    if (compileCacheSize < 0) {
      throw new InvalidArgumentException("compileCacheSize must be >= 0, got " + compileCacheSize);
    }
    PjrtApi api = plugin.api();
    List<Pointer> keepAlive = new ArrayList<>();
    int n = options.size();
    try (PJRT_NamedValue values = new PJRT_NamedValue(Math.max(1, n));
        PJRT_Client_Create_Args args = new PJRT_Client_Create_Args()) {
      int i = 0;
      for (Map.Entry<String, ?> option : options.entrySet()) {
        PjrtApi.namedValue(values.getPointer(i++), option.getKey(), option.getValue(), keepAlive);
      }
      args.struct_size(PJRT_Client_Create_Args_STRUCT_SIZE).create_options(values).num_options(n);
      PJRT_Error error;
      try {
        error = api.clientCreate.call(args);
      } catch (XlaException e) {
        throw e;
      } catch (RuntimeException e) { // a C++ exception from inside the plugin, which JavaCPP turned into this
        throw new PluginException(ErrorCode.INVALID_ARGUMENT,
            "PJRT_Client_Create of " + plugin + " failed inside the plugin (" + e.getMessage() + ") with options "
                + options + ": check each option's name and type (cpu_device_count is a long, asynchronous a boolean)");
      }
      api.check(error, PjrtApi.Failure.PLUGIN, "PJRT_Client_Create of " + plugin);
      return new XlaClient(plugin, args.client(), compileCacheSize, settings);
    } finally {
      keepAlive.forEach(Pointer::close);
    }
  }

  /** The most devices a CPU client may be asked for: 100000 made the plugin work for minutes, 1000 took 0.7 s. */
  public static final int MAX_CPU_DEVICE_COUNT = 1024;

  /**
   * The CPU plugin's {@code cpu_device_count} option must be a Long or Integer from 1 to {@link
   * #MAX_CPU_DEVICE_COUNT}: 0 or less failed client creation with a bare NullPointerException, a string a
   * C++ exception ("Unexpected index"), and 100000 did not return.
   */
  private static void checkCpuDeviceCount(Object value) {
    if (value == null) {
      return;
    }
    if (!(value instanceof Long || value instanceof Integer)
        || ((Number) value).longValue() < 1 || ((Number) value).longValue() > MAX_CPU_DEVICE_COUNT) {
      throw new InvalidArgumentException("client option cpu_device_count = " + value + " ("
          + value.getClass().getSimpleName() + ") must be a Long or Integer from 1 to " + MAX_CPU_DEVICE_COUNT
          + " (devices of the CPU client)");
    }
  }

  private List<Device> readDevices() {
    try (PJRT_Client_AddressableDevices_Args args = new PJRT_Client_AddressableDevices_Args()) {
      args.struct_size(PJRT_Client_AddressableDevices_Args_STRUCT_SIZE).client(client);
      api.check(() -> api.clientAddressableDevices.call(args), PjrtApi.Failure.PLUGIN, "PJRT_Client_AddressableDevices");
      long count = args.num_addressable_devices();
      if (count == 0) {
        throw new PluginException(ErrorCode.FAILED_PRECONDITION, "the PJRT client of " + plugin + " has no addressable devices");
      }
      List<Device> list = new ArrayList<>();
      for (int i = 0; i < count; i++) {
        list.add(describe(args.addressable_devices(i), i));
      }
      return Collections.unmodifiableList(list);
    }
  }

  private Device describe(PJRT_Device device, int index) {
    try (PJRT_Device_GetDescription_Args d = new PJRT_Device_GetDescription_Args();
        PJRT_DeviceDescription_Id_Args id = new PJRT_DeviceDescription_Id_Args();
        PJRT_DeviceDescription_Kind_Args kind = new PJRT_DeviceDescription_Kind_Args()) {
      d.struct_size(PJRT_Device_GetDescription_Args_STRUCT_SIZE).device(device);
      api.check(() -> api.deviceGetDescription.call(d), PjrtApi.Failure.GENERIC, "PJRT_Device_GetDescription");
      id.struct_size(PJRT_DeviceDescription_Id_Args_STRUCT_SIZE).device_description(d.device_description());
      api.check(() -> api.descriptionId.call(id), PjrtApi.Failure.GENERIC, "PJRT_DeviceDescription_Id");
      kind.struct_size(PJRT_DeviceDescription_Kind_Args_STRUCT_SIZE).device_description(d.device_description());
      api.check(() -> api.descriptionKind.call(kind), PjrtApi.Failure.GENERIC, "PJRT_DeviceDescription_Kind");
      return new Device(
          this,
          device,
          d.device_description(),
          index,
          Integer.toString(id.id()),
          PjrtApi.utf8(kind.device_kind(), kind.device_kind_size()));
    }
  }

  private String readPlatformName() {
    try (PJRT_Client_PlatformName_Args args = new PJRT_Client_PlatformName_Args()) {
      args.struct_size(PJRT_Client_PlatformName_Args_STRUCT_SIZE).client(client);
      api.check(() -> api.clientPlatformName.call(args), PjrtApi.Failure.GENERIC, "PJRT_Client_PlatformName");
      return PjrtApi.utf8(args.platform_name(), args.platform_name_size());
    }
  }

  public Plugin plugin() {
    return plugin;
  }

  PjrtApi api() {
    return api;
  }

  PJRT_Client pointer() {
    return client;
  }

  /** Runs {@code query} while holding a reference to the client, so it cannot be destroyed meanwhile. */
  <T> T withClient(Supplier<T> query) {
    try (Lease lease = lease()) {
      return query.get();
    }
  }

  /** The platform PJRT reports, e.g. {@code cpu}. */
  public String platformName() {
    return platformName;
  }

  /** The platform's version string, e.g. the XLA CPU client's {@code cpu}. */
  public String platformVersion() {
    api.need(api.clientPlatformVersion, "PJRT_Client_PlatformVersion");
    return withClient(
        () -> {
          try (PJRT_Client_PlatformVersion_Args args = new PJRT_Client_PlatformVersion_Args()) {
            args.struct_size(PJRT_Client_PlatformVersion_Args_STRUCT_SIZE).client(client);
            api.check(() -> api.clientPlatformVersion.call(args), PjrtApi.Failure.GENERIC, "PJRT_Client_PlatformVersion");
            return PjrtApi.utf8(args.platform_version(), args.platform_version_size());
          }
        });
  }

  /** This process's index among the processes of a multi-process client (0 for a single process). */
  public int processIndex() {
    api.need(api.clientProcessIndex, "PJRT_Client_ProcessIndex");
    return withClient(
        () -> {
          try (PJRT_Client_ProcessIndex_Args args = new PJRT_Client_ProcessIndex_Args()) {
            args.struct_size(PJRT_Client_ProcessIndex_Args_STRUCT_SIZE).client(client);
            api.check(() -> api.clientProcessIndex.call(args), PjrtApi.Failure.GENERIC, "PJRT_Client_ProcessIndex");
            return args.process_index();
          }
        });
  }

  /** The memory spaces the client can address; empty when the plugin cannot say. */
  public List<MemorySpace> memories() {
    if (api.clientAddressableMemories == null) {
      return List.of();
    }
    return withClient(
        () -> {
          try (PJRT_Client_AddressableMemories_Args args = new PJRT_Client_AddressableMemories_Args()) {
            args.struct_size(PJRT_Client_AddressableMemories_Args_STRUCT_SIZE).client(client);
            api.check(
                () -> api.clientAddressableMemories.call(args), PjrtApi.Failure.GENERIC, "PJRT_Client_AddressableMemories");
            List<MemorySpace> result = new ArrayList<>();
            for (long i = 0; i < args.num_addressable_memories(); i++) {
              result.add(MemorySpace.describe(api, args.addressable_memories((int) i)));
            }
            return List.copyOf(result);
          }
        });
  }

  /** The addressable devices. */
  public List<Device> devices() {
    return devices;
  }

  /** The device of this client with PJRT pointer {@code device}; null when it is none of ours. */
  Device deviceOf(PJRT_Device device) {
    for (Device d : devices) {
      if (d.pointer().address() == device.address()) {
        return d;
      }
    }
    return null;
  }

  /** Throws unless {@code device} is one of this client's devices. */
  void checkDevice(Device device, String role) {
    Objects.requireNonNull(device, role);
    if (device.client() != this) {
      throw new InvalidArgumentException(role + " " + device + " belongs to " + device.client() + ", not to " + this);
    }
  }

  /** Compiles StableHLO text with default options, reusing a cached executable when there is one. */
  public Executable compile(String stablehlo) {
    return compile(stablehlo, CompileOptions.defaults());
  }

  /**
   * Compiles StableHLO (or MLIR) text. The returned executable is shared with the compile cache: close
   * it when done, and the cache's reference keeps it usable for the next caller.
   */
  public Executable compile(String stablehlo, CompileOptions options) {
    Objects.requireNonNull(stablehlo, "stablehlo");
    Objects.requireNonNull(options, "options");
    checkOpen();
    try {
      return cache.getOrCompile(stablehlo, options, () -> compileUncached(stablehlo, options));
    } catch (CompileException e) {
      throw asInvalidProgram(e);
    }
  }

  // MLIR's diagnostics: "-:2:8: error: ..." (line:column in the text) or StableHLO's "Failed to parse".
  private static final java.util.regex.Pattern TEXT_DIAGNOSTIC =
      java.util.regex.Pattern.compile("(?m)^-:\\d+:\\d+: error:|Failed to parse");

  /**
   * The plugin reports text that does not parse or verify with code UNKNOWN; it is the caller's bad
   * argument, so it becomes INVALID_ARGUMENT (with the same message). Other compile failures keep their code.
   */
  private static CompileException asInvalidProgram(CompileException e) {
    if (e.code() != ErrorCode.UNKNOWN || e.getMessage() == null || !TEXT_DIAGNOSTIC.matcher(e.getMessage()).find()) {
      return e;
    }
    CompileException invalid = new CompileException(ErrorCode.INVALID_ARGUMENT, e.getMessage());
    invalid.initCause(e);
    return invalid;
  }

  /** The prefix of the custom-call targets the bridge registers with a plugin, for its "Host" platform only. */
  public static final String BRIDGE_TARGET_PREFIX = "xla_actors.";

  /**
   * The bridge's handlers (host callbacks among them) are registered for the CPU platform: a GPU compiles
   * device code, which cannot call them. Refused here, saying what to do instead, rather than left to the
   * GPU plugin's compiler.
   */
  private void refuseHostCallsOffTheCpu(String program, String what) {
    int at = "cpu".equals(platformName) ? -1 : program.indexOf(BRIDGE_TARGET_PREFIX);
    if (at < 0) {
      return;
    }
    int end = at;
    while (end < program.length() && (Character.isLetterOrDigit(program.charAt(end)) || program.charAt(end) == '.'
        || program.charAt(end) == '_')) {
      end++;
    }
    throw new CompileException(ErrorCode.FAILED_PRECONDITION, what + " calls custom call " + program.substring(at, end)
        + ", which runs on the host, but this client's platform is '" + platformName + "': only programs compiled for "
        + "the CPU plugin can call the host. Segment the program (SegmentedProgram: its stages run on this device, its "
        + "host calls between them; docs/segmentation.md), or compile it with a CPU client");
  }

  private LoadedProgram compileUncached(String original, CompileOptions options) {
    ProgramSignature signature = ProgramSignature.parse(original); // refuses what cannot run, before XLA
    refuseHostCallsOffTheCpu(original, "the program");
    LapackLibrary.loadIfCalledBy(original);
    String stablehlo = TokenPassThrough.rewrite(original);
    return compileBytes(stablehlo.getBytes(StandardCharsets.UTF_8), signature, optionsProto(options), false);
  }

  /**
   * {@code options} as the plugin is sent them: checked first, so that a value that would crash the plugin never
   * reaches it, and each XLA option typed as the plugin parses it.
   */
  private byte[] optionsProto(CompileOptions options) {
    CompileOptions parsed = options.withXlaOptions(XlaFlags.checkOptions(options.xlaOptions(), plugin.build()));
    return parsed.toProto(name -> XlaFlags.kind(plugin.build(), name));
  }

  /**
   * Compiles {@code module} with the compile options {@code optionsProto} ({@link #optionsProto}); {@code
   * fromBytes}: the runtime did not read the module's text (see {@link LoadedProgram#donors()}).
   */
  private LoadedProgram compileBytes(byte[] module, ProgramSignature signature, byte[] optionsProto, boolean fromBytes) {
    try (Lease lease = lease();
        BytePointer code = PjrtApi.bytes(module);
        BytePointer format = PjrtApi.bytes("mlir".getBytes(StandardCharsets.UTF_8));
        BytePointer proto = PjrtApi.bytes(optionsProto);
        PJRT_Program program = new PJRT_Program();
        PJRT_Client_Compile_Args args = new PJRT_Client_Compile_Args()) {
      if (proto.capacity() == 0) {
        // An empty CompileOptionsProto trips a CHECK inside the plugin and aborts the process.
        throw new InvalidArgumentException("compile options must not be empty");
      }
      program.struct_size(PJRT_Program_STRUCT_SIZE)
          .code(code)
          .code_size(code.capacity())
          .format(format)
          .format_size(format.capacity());
      args.struct_size(PJRT_Client_Compile_Args_STRUCT_SIZE)
          .client(client)
          .program(program)
          .compile_options(proto)
          .compile_options_size(proto.capacity());
      api.check(() -> api.clientCompile.call(args), PjrtApi.Failure.COMPILE, "XLA compilation failed");
      // Wrapped while the lease still holds the client: a close() that raced with the compile cannot
      // have destroyed it, and the new program keeps it alive until the program is closed.
      return new LoadedProgram(this, args.executable(), signature, fromBytes);
    }
  }

  /**
   * Compiles a module given as bytes: MLIR bytecode or a StableHLO portable artifact (VHLO bytecode, what
   * {@code jax.export} keeps in {@code mlir_module_serialized}), which the plugin's "mlir" format reads as
   * it reads text. Bytecode cannot be read here, so the caller gives {@code @main}'s parameter types (runs
   * are checked against them); nothing is rewritten, so {@code @main} must take only static tensors. The
   * parameters a run may donate are those the compiled module aliases to outputs (JAX's {@code
   * donate_argnums}), read from the plugin's optimized program.
   * Cached like text, keyed by the bytes' SHA-256.
   *
   * @param name where the module came from, used in messages
   */
  public Executable compileModule(
      String name, byte[] module, List<TensorType> parameterTypes, CompileOptions options) {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(module, "module");
    Objects.requireNonNull(options, "options");
    ProgramSignature signature = new ProgramSignature(parameterTypes);
    if (module.length == 0) {
      throw new CompileException(ErrorCode.INVALID_ARGUMENT, "module " + name + " is empty");
    }
    checkOpen();
    // Custom-call targets are plain strings inside bytecode too.
    String strings = new String(module, StandardCharsets.ISO_8859_1);
    refuseHostCallsOffTheCpu(strings, "module " + name);
    LapackLibrary.loadIfCalledBy(strings);
    String key = "bytecode sha-256 " + sha256(module) + " " + signature.parameters();
    try {
      return cache.getOrCompile(key, options, () -> compileOrLoad(key, module, signature, options));
    } catch (CompileException e) {
      CompileException named = new CompileException(e.code(), "module " + name + " does not compile: " + e.getMessage());
      named.initCause(e);
      throw named;
    }
  }

  /**
   * Compiles a module's bytes, or loads what an earlier process compiled from them with the same options on
   * this machine ({@link CompiledProgramStore}); keeps what it compiles there for the next one. A kept file the
   * plugin does not load is removed and the module compiled again; a program the plugin cannot serialize (one
   * with XNNPACK fusions), or whose compilation is asked to dump what XLA made, is only compiled.
   */
  private LoadedProgram compileOrLoad(String key, byte[] module, ProgramSignature signature, CompileOptions options) {
    byte[] optionsProto = optionsProto(options);
    if (store == null || CompiledProgramStore.asksForCompilerOutput(options.xlaOptions())) {
      return compileBytes(module, signature, optionsProto, true);
    }
    String file = store.key(key, optionsProto);
    java.util.Optional<byte[]> kept = store.read(file);
    if (kept.isPresent()) {
      try {
        LoadedProgram loaded = deserializeProgram(kept.get(), signature, true);
        cache.countLoaded();
        return loaded;
      } catch (XlaException e) {
        LOG.warn("compiled program {} in {} does not load ({}): removed, compiling the module again", file,
            store.directory(), e.getMessage());
        store.remove(file);
      }
    }
    LoadedProgram compiled = compileBytes(module, signature, optionsProto, true);
    byte[] serialized;
    try {
      serialized = compiled.serialize();
    } catch (XlaException e) {
      LOG.debug("compiled program {} is not kept: {}", file, e.getMessage());
      return compiled;
    }
    if (store.write(file, serialized)) {
      cache.countKept();
    }
    return compiled;
  }

  private static String sha256(byte[] bytes) {
    try {
      return java.util.HexFormat.of().formatHex(java.security.MessageDigest.getInstance("SHA-256").digest(bytes));
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException(e); // every JVM has SHA-256
    }
  }

  /**
   * Loads an executable serialized by {@link Executable#serialize()} (by this plugin's version), with
   * {@code stablehlo} giving its parameter types. A plugin that cannot deserialize answers UNIMPLEMENTED.
   */
  public Executable deserialize(byte[] serialized, String stablehlo) {
    Objects.requireNonNull(serialized, "serialized");
    ProgramSignature signature = ProgramSignature.parse(stablehlo);
    LapackLibrary.loadIfCalledBy(stablehlo);
    LoadedProgram program = deserializeProgram(serialized, signature, false);
    try {
      return new Executable(program);
    } finally {
      program.close(); // the view holds the only reference
    }
  }

  /** {@code serialized} loaded by the plugin, with {@code signature}; {@code fromBytes} as {@link LoadedProgram} takes it. */
  private LoadedProgram deserializeProgram(byte[] serialized, ProgramSignature signature, boolean fromBytes) {
    api.need(api.executableDeserializeAndLoad, "PJRT_Executable_DeserializeAndLoad");
    try (Lease lease = lease();
        BytePointer bytes = PjrtApi.bytes(serialized);
        PJRT_Executable_DeserializeAndLoad_Args args = new PJRT_Executable_DeserializeAndLoad_Args()) {
      args.struct_size(PJRT_Executable_DeserializeAndLoad_Args_STRUCT_SIZE)
          .client(client)
          .serialized_executable(bytes)
          .serialized_executable_size(bytes.capacity());
      api.check(
          () -> api.executableDeserializeAndLoad.call(args), PjrtApi.Failure.COMPILE, "PJRT_Executable_DeserializeAndLoad");
      return new LoadedProgram(this, args.loaded_executable(), signature, fromBytes);
    }
  }

  /** Copies a host tensor to the first device. */
  public DeviceBuffer upload(HostTensor tensor) {
    return upload(tensor, devices.get(0));
  }

  /**
   * Copies a host tensor to {@code device}; the host tensor can be closed at once. On the CPU plugin a
   * tensor of {@value HostMemoryPool#MIN_POOLED_BYTES} bytes or more is not copied: the buffer uses its
   * memory in place (PJRT's {@code kImmutableZeroCopy}; a tensor's bytes never change), and that memory
   * stays the tensor's until the buffer is closed, even if the tensor is closed first.
   */
  public DeviceBuffer upload(HostTensor tensor, Device device) {
    Objects.requireNonNull(tensor, "tensor");
    checkDevice(device, "device");
    try (Lease lease = lease()) {
      // The CPU plugin's buffers are host memory, so an upload can use the host tensor's memory in place.
      if (platformName.equals("cpu") && tensor.type().byteSize() >= HostMemoryPool.MIN_POOLED_BYTES
          && !tensor.isBorrowed()) {
        DeviceBuffer inPlace = uploadInPlace(tensor, device);
        if (inPlace != null) {
          return inPlace;
        }
      }
      return new DeviceBuffer(this, uploadUnowned(tensor, device), tensor.type(), device);
    }
  }

  /**
   * A buffer over the tensor's own memory, or null when that memory is not aligned as the plugin needs
   * (memory of the pool always is). The caller holds a lease.
   */
  private DeviceBuffer uploadInPlace(HostTensor tensor, Device device) {
    HostTensor.Hold hold = tensor.hold("upload"); // released when the plugin is done with the memory
    try (LongPointer dims = new LongPointer(Math.max(1, tensor.shape().rank()));
        PJRT_Client_BufferFromHostBuffer_Args args = new PJRT_Client_BufferFromHostBuffer_Args()) {
      Pointer data = new Pointer(hold.data());
      if (data.address() % HostMemoryPool.ALIGNMENT != 0) {
        hold.close();
        return null;
      }
      bufferFromHostBuffer(args, dims, tensor, data, PJRT_HostBufferSemantics_kImmutableZeroCopy, device);
      return new DeviceBuffer(this, args.buffer(), tensor.type(), device, args.done_with_host_buffer(), hold);
    } catch (RuntimeException | Error e) {
      hold.close();
      throw e;
    }
  }

  /** Calls PJRT_Client_BufferFromHostBuffer for {@code tensor}'s bytes at {@code data}; the results are in {@code args}. */
  private void bufferFromHostBuffer(PJRT_Client_BufferFromHostBuffer_Args args, LongPointer dims, HostTensor tensor,
      Pointer data, int semantics, Device device) {
    countUpload(tensor);
    long[] shape = tensor.shape().dims();
    if (shape.length > 0) {
      dims.put(shape);
    }
    args.struct_size(PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE)
        .client(client)
        .data(data)
        .type(tensor.dtype().pjrtType())
        .dims(dims)
        .num_dims(shape.length)
        .host_buffer_semantics(semantics)
        .device(device.pointer());
    api.check(() -> api.clientBufferFromHostBuffer.call(args), PjrtApi.Failure.GENERIC, "PJRT_Client_BufferFromHostBuffer");
  }

  // Host-to-device transfers started by this client (every upload path), and their bytes.
  private final java.util.concurrent.atomic.AtomicLong uploads = new java.util.concurrent.atomic.AtomicLong();
  private final java.util.concurrent.atomic.AtomicLong uploadedBytes = new java.util.concurrent.atomic.AtomicLong();

  /**
   * How many host-to-device uploads this client has made (explicit ones and those of {@link
   * Executable#run}), e.g. to check that a bound weight is uploaded once, not per run.
   */
  public long uploadCount() {
    return uploads.get();
  }

  /** The bytes of every upload counted by {@link #uploadCount()}. */
  public long uploadedBytes() {
    return uploadedBytes.get();
  }

  private void countUpload(HostTensor tensor) {
    uploads.incrementAndGet();
    uploadedBytes.addAndGet(tensor.type().byteSize());
  }

  /** Uploads to a new native buffer that the caller, holding a lease on this client, must destroy. */
  PJRT_Buffer uploadUnowned(HostTensor tensor, Device device) {
    countUpload(tensor);
    PJRT_Buffer buffer = new PJRT_Buffer();
    long[] dims = tensor.shape().dims();
    // The hold keeps the tensor's memory its own until the plugin is done reading it (the bridge waits).
    try (HostTensor.Hold hold = tensor.hold("upload")) {
      api.check(
          XlaActors_BufferFromHost(
              api.api, client, new Pointer(hold.data()), tensor.dtype().pjrtType(), dims, dims.length,
              device.pointer(), buffer),
          PjrtApi.Failure.GENERIC,
          "host-to-device transfer");
    }
    return buffer;
  }

  /** A lease on the client, for callers that use unowned buffers ({@link #uploadUnowned}). */
  Lease leaseClient() {
    return lease();
  }

  /**
   * Starts copying a host tensor to {@code device} and returns at once. The future completes with the
   * buffer when its data is on the device (exceptionally if the transfer fails); {@code tensor} is kept
   * alive until the plugin is done reading it, and closing it meanwhile gives its memory back only then.
   */
  public CompletableFuture<DeviceBuffer> uploadAsync(HostTensor tensor, Device device) {
    Objects.requireNonNull(tensor, "tensor");
    checkDevice(device, "device");
    DeviceBuffer buffer;
    CompletableFuture<Void> hostDone;
    HostTensor.Hold hold = tensor.hold("upload"); // until the plugin is done reading the tensor
    try (Lease lease = lease();
        LongPointer dims = new LongPointer(Math.max(1, tensor.shape().rank()));
        PJRT_Client_BufferFromHostBuffer_Args args = new PJRT_Client_BufferFromHostBuffer_Args()) {
      bufferFromHostBuffer(args, dims, tensor, new Pointer(hold.data()),
          PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes, device);
      buffer = new DeviceBuffer(this, args.buffer(), tensor.type());
      hostDone = api.onReady(args.done_with_host_buffer(), "host-to-device transfer");
    } catch (RuntimeException e) {
      hold.close();
      throw e;
    }
    return hostDone
        .whenComplete((ignored, error) -> hold.close()) // the tensor may be closed and its memory reused now
        .thenCompose(ignored -> buffer.ready())
        .handle(
            (ignored, error) -> {
              if (error != null) {
                buffer.close();
                throw error instanceof RuntimeException r ? r : new RuntimeException(error);
              }
              return buffer;
            });
  }

  @Override
  protected void onClose() {
    if (cache != null) { // null when the constructor failed before making it
      cache.close();
    }
  }

  @Override
  public String toString() {
    return "XlaClient(" + platformName + ", " + devices.size() + " device(s), " + plugin + ")";
  }

  /** Drops the compile cache's references; executables still held by callers stay usable. */
  public void clearCompileCache() {
    cache.clear();
  }

  /** Number of executables in the compile cache and how many compiles it saved. */
  public CompileCache.Stats compileCacheStats() {
    return cache.stats();
  }

  /**
   * A bounded LRU map from (program text, options) to compiled programs. The cache holds one reference
   * to each program; every caller gets its own {@link Executable} view, closed independently.
   */
  public static final class CompileCache {
    /**
     * Cache counters: entries held, lookups that found or missed an entry, and of the misses, the programs
     * loaded from the compiled programs kept on disk instead of compiled, and those compiled and kept there.
     */
    public record Stats(int size, long hits, long misses, long loadedFromDisk, long keptOnDisk) {}

    private record Key(String program, CompileOptions options) {}

    interface Compiler {
      LoadedProgram compile();
    }

    private final int capacity;
    private final Map<Key, LoadedProgram> entries = new LinkedHashMap<>(16, 0.75f, true);
    private boolean closed; // the client was closed: nothing more is cached (it would keep the client alive)
    private long hits;
    private long misses;
    private long loadedFromDisk;
    private long keptOnDisk;

    CompileCache(int capacity) {
      this.capacity = capacity;
    }

    Executable getOrCompile(String program, CompileOptions options, Compiler compiler) {
      if (capacity == 0) {
        LoadedProgram compiled = compiler.compile();
        try {
          return new Executable(compiled);
        } finally {
          compiled.close(); // the view now holds the only reference
        }
      }
      Key key = new Key(program, options);
      synchronized (this) {
        LoadedProgram cached = entries.get(key);
        if (cached != null) {
          hits++;
          return new Executable(cached);
        }
        misses++;
      }
      // Compile outside the lock: compiling takes milliseconds to seconds.
      LoadedProgram compiled = compiler.compile();
      synchronized (this) {
        LoadedProgram raced = entries.get(key);
        if (raced != null || closed) {
          try {
            return new Executable(raced != null ? raced : compiled);
          } finally {
            compiled.close();
          }
        }
        entries.put(key, compiled);
        Executable view = new Executable(compiled);
        if (entries.size() > capacity) {
          var eldest = entries.entrySet().iterator();
          LoadedProgram evicted = eldest.next().getValue();
          eldest.remove();
          evicted.close();
        }
        return view;
      }
    }

    synchronized void clear() {
      entries.values().forEach(LoadedProgram::close);
      entries.clear();
    }

    /** Clears the cache for good: the client is closing. */
    synchronized void close() {
      closed = true;
      clear();
    }

    synchronized Stats stats() {
      return new Stats(entries.size(), hits, misses, loadedFromDisk, keptOnDisk);
    }

    synchronized void countLoaded() {
      loadedFromDisk++;
    }

    synchronized void countKept() {
      keptOnDisk++;
    }
  }
}
