package dev.xlaactors.runtime;

import static dev.xlaactors.nativebridge.pjrt.global.Pjrt.*;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.PluginException;
import dev.xlaactors.nativebridge.pjrt.PJRT_Api;
import dev.xlaactors.nativebridge.pjrt.PJRT_Plugin_Attributes_Args;
import java.nio.charset.StandardCharsets;
import org.bytedeco.javacpp.BytePointer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A loaded PJRT plugin. Loaded once per path per JVM and never unloaded: XLA keeps process-wide
 * registries (FFI handlers among them) inside the plugin, so unloading it would leave dangling state.
 * Several plugins (say the CPU plugin and a GPU plugin) can be loaded side by side; each serves its own
 * {@link XlaClient}s. Thread-safe; not closeable.
 */
public final class Plugin {
  private static final Map<Path, Plugin> LOADED = new ConcurrentHashMap<>();
  static {
    NativeLibrary.load();
  }


  private final Path path;
  private final PjrtApi api;
  private final boolean ffiHandlers;
  private final String ffiProblem;
  private final Map<String, Object> attributes;
  private final Optional<PluginBuild> build;

  private Plugin(Path path, PJRT_Api table) {
    this.path = path;
    this.build = PluginBuild.pinnedAs(path);
    this.api = new PjrtApi(table, path.getFileName().toString());
    byte[] error = new byte[1024];
    int registered = XlaActors_RegisterFfiHandlers(table, error, error.length);
    if (registered < 0) {
      throw new PluginException(
          ErrorCode.INTERNAL, "PJRT plugin " + path + ": registering the bridge's FFI handlers failed: " + text(error));
    }
    this.ffiHandlers = registered == 1;
    this.ffiProblem = registered == 1 ? "" : text(error);
    this.attributes = readAttributes();
  }

  /**
   * The plugin named by the settings. When that is a supported build's own path ({@link PluginBuild#path()})
   * and the file is missing, that build is fetched there first ({@link PluginFetcher}); a path set by the
   * environment variable or the config key is never fetched.
   */
  public static Plugin load(RuntimeSettings settings) {
    try {
      if (!Files.exists(settings.pluginPath())) {
        PluginBuild.atPath(settings.pluginPath()).ifPresent(PluginFetcher::ensure);
      }
      return load(settings.pluginPath());
    } catch (PluginException e) {
      throw new PluginException(e.code(), e.getMessage() + "; the path came from " + originOf(settings.pluginPath()));
    }
  }

  /** Where a plugin path was most likely set: the environment variable, the default, or the config key. */
  private static String originOf(Path path) {
    String env = System.getenv(RuntimeSettings.PLUGIN_ENV);
    if (env != null && !env.isBlank() && Path.of(env.trim()).equals(path)) {
      return "the environment variable " + RuntimeSettings.PLUGIN_ENV + "=" + env.trim();
    }
    Optional<PluginBuild> build = PluginBuild.atPath(path);
    if (build.isPresent()) {
      return "the location of the build " + build.get() + " (" + RuntimeSettings.PLUGIN_PATH_KEY + " is empty; "
          + PluginBuild.CONFIG_KEY + " or " + PluginBuild.ENV + " selects the build)";
    }
    return "the config key " + RuntimeSettings.PLUGIN_PATH_KEY;
  }

  /**
   * Loads the plugin at {@code path}, or returns the one already loaded from there. The file is checked
   * before it is loaded (see {@link PluginFile}): a truncated or corrupt file, or a fetched plugin whose size
   * or sha256 is not the pinned one, is refused instead of crashing the JVM inside the dynamic loader. A
   * missing file, a file that is not a PJRT plugin, or a plugin whose API lacks what the runtime needs is a {@link
   * PluginException} naming the plugin, its version and the missing piece, plus the config key, the
   * environment variable and the fetch command.
   */
  public static Plugin load(Path path) {
    Path key = path.toAbsolutePath().normalize();
    if (Files.isDirectory(key)) {
      throw new PluginException(ErrorCode.INVALID_ARGUMENT,
          "the PJRT plugin path " + key + " is a directory; it must name the plugin file itself, e.g. "
              + key.resolve("xla_cpu_pjrt.so") + hint());
    }
    if (!Files.isRegularFile(key)) {
      throw new PluginException(ErrorCode.NOT_FOUND, "PJRT plugin not found at " + key + hint());
    }
    if (!LOADED.containsKey(key)) {
      // dlopen of a truncated or corrupt file kills the JVM (SIGBUS): check the file first.
      try {
        PluginFile.check(key);
      } catch (PluginException e) {
        throw new PluginException(e.code(), e.getMessage() + hint());
      }
    }
    return LOADED.computeIfAbsent(
        key,
        p -> {
          byte[] error = new byte[2048];
          PJRT_Api table;
          try (BytePointer name = PjrtApi.cString(p.toString())) {
            table = XlaActors_LoadPlugin(name, error, error.length);
          }
          if (table == null) {
            throw new PluginException(ErrorCode.FAILED_PRECONDITION, text(error) + hint());
          }
          try {
            return new Plugin(p, table);
          } catch (PluginException e) {
            throw new PluginException(e.code(), e.getMessage() + hint());
          }
        });
  }

  private static String text(byte[] nulTerminated) {
    int n = 0;
    while (n < nulTerminated.length && nulTerminated[n] != 0) {
      n++;
    }
    return new String(nulTerminated, 0, n, StandardCharsets.UTF_8);
  }

  private static String hint() {
    return " (set "
        + RuntimeSettings.PLUGIN_PATH_KEY
        + " or the environment variable "
        + RuntimeSettings.PLUGIN_ENV
        + " to a PJRT plugin file, or fetch the default CPU plugin into "
        + RuntimeSettings.defaultPluginPath()
        + " with 'java -cp <your classpath> "
        + PluginFetcher.class.getName()
        + "' (in a source checkout: '"
        + RuntimeSettings.FETCH_COMMAND
        + "'))";
  }

  private Map<String, Object> readAttributes() {
    if (api.pluginAttributes == null) {
      return Map.of();
    }
    try (PJRT_Plugin_Attributes_Args args = new PJRT_Plugin_Attributes_Args()) {
      args.struct_size(PJRT_Plugin_Attributes_Args_STRUCT_SIZE);
      api.check(() -> api.pluginAttributes.call(args), PjrtApi.Failure.PLUGIN, "PJRT_Plugin_Attributes");
      return Map.copyOf(PjrtApi.namedValues(args.attributes(), args.num_attributes()));
    }
  }

  public Path path() {
    return path;
  }

  /** The PJRT C API version the plugin implements, e.g. {@code 0.81}. */
  public String apiVersion() {
    return api.version();
  }

  public int apiMajorVersion() {
    return api.api.pjrt_api_version().major_version();
  }

  public int apiMinorVersion() {
    return api.minorVersion;
  }

  /** The plugin's own attributes ({@code PJRT_Plugin_Attributes}), e.g. its XLA version; empty if it has none. */
  public Map<String, Object> attributes() {
    return attributes;
  }

  /** Whether the bridge's XLA FFI handlers are registered with this plugin (needs its FFI extension). */
  public boolean hasFfiHandlers() {
    return ffiHandlers;
  }

  /** Why the FFI handlers are not registered; empty when they are. */
  public String ffiUnavailableReason() {
    return ffiProblem;
  }

  /**
   * The supported build this plugin is ({@link PluginBuild#pinnedAs}: the fetch step's pin beside it names the
   * build's sha256, and {@link PluginFile} checked the file against that pin before loading it); empty for any
   * other plugin file.
   */
  public Optional<PluginBuild> build() {
    return build;
  }

  PjrtApi api() {
    return api;
  }

  @Override
  public String toString() {
    return "Plugin(" + path + ", PJRT C API " + apiVersion() + ")";
  }
}
