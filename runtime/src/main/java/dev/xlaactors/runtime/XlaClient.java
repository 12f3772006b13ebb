package dev.xlaactors.runtime;

import dev.xlaactors.error.CompileException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.nativebridge.PjrtNative;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * A PJRT client: the devices of one plugin, and the entry point for compiling programs and moving
 * tensors to devices.
 *
 * <p>Lifetime: executables and buffers keep their client alive; closing the client releases the owner's
 * reference, and the native client is destroyed once its last executable and buffer are closed.
 * Executables held by the compile cache are closed with the client. Thread-safe.
 */
public final class XlaClient extends NativeHandle {
  private final Plugin plugin;
  private final List<Device> devices;
  private final String platformName;
  private final CompileCache cache;

  private XlaClient(Plugin plugin, long handle, int compileCacheSize) {
    super(handle, null);
    this.plugin = plugin;
    int count = PjrtNative.clientDeviceCount(handle);
    List<Device> list = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      String[] description = PjrtNative.clientDeviceDescription(handle, i);
      list.add(new Device(i, description[0], description[1]));
    }
    this.devices = Collections.unmodifiableList(list);
    this.platformName = PjrtNative.clientPlatformName(handle);
    this.cache = new CompileCache(compileCacheSize);
  }

  /** A client of the plugin named by the application's config. */
  public static XlaClient create() {
    return create(RuntimeSettings.load());
  }

  public static XlaClient create(RuntimeSettings settings) {
    Plugin plugin = Plugin.load(settings);
    return new XlaClient(
        plugin,
        PjrtNative.clientCreate(plugin.handle(), settings.clientAsynchronous()),
        settings.compileCacheSize());
  }

  public Plugin plugin() {
    return plugin;
  }

  /** The platform PJRT reports, e.g. {@code cpu}. */
  public String platformName() {
    return platformName;
  }

  /** The addressable devices; programs run on the first. */
  public List<Device> devices() {
    return devices;
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

  private LoadedProgram compileUncached(String stablehlo, CompileOptions options) {
    ProgramSignature signature = ProgramSignature.parse(stablehlo);
    long executable;
    try (Lease lease = lease()) {
      executable =
          PjrtNative.compile(
              lease.handle(), stablehlo.getBytes(StandardCharsets.UTF_8), "mlir", options.toProto());
    }
    return new LoadedProgram(this, executable, signature);
  }

  /** Copies a host tensor to the first device. */
  public DeviceBuffer upload(HostTensor tensor) {
    return upload(tensor, devices.get(0));
  }

  /** Copies a host tensor to {@code device}; the host tensor can be reused at once. */
  public DeviceBuffer upload(HostTensor tensor, Device device) {
    Objects.requireNonNull(tensor, "tensor");
    if (device.index() < 0 || device.index() >= devices.size() || !devices.get(device.index()).equals(device)) {
      throw new InvalidArgumentException("device " + device + " does not belong to this client");
    }
    long buffer;
    try (Lease lease = lease()) {
      buffer =
          PjrtNative.bufferFromHost(
              lease.handle(),
              device.index(),
              tensor.nativeData(),
              0,
              tensor.type().byteSize(),
              tensor.dtype().pjrtType(),
              tensor.shape().dims());
    }
    return new DeviceBuffer(this, buffer, tensor.type());
  }

  @Override
  protected void onClose() {
    cache.clear();
  }

  @Override
  protected void destroy(long handle) {
    PjrtNative.clientDestroy(handle);
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
    /** Cache counters: entries held, and lookups that found or missed an entry. */
    public record Stats(int size, long hits, long misses) {}

    private record Key(String program, CompileOptions options) {}

    interface Compiler {
      LoadedProgram compile();
    }

    private final int capacity;
    private final Map<Key, LoadedProgram> entries = new LinkedHashMap<>(16, 0.75f, true);
    private long hits;
    private long misses;

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
        if (raced != null) {
          compiled.close();
          return new Executable(raced);
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

    synchronized Stats stats() {
      return new Stats(entries.size(), hits, misses);
    }
  }
}
