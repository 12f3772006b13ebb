package dev.xlaactors.runtime;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.PluginException;
import dev.xlaactors.nativebridge.PjrtNative;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A loaded PJRT plugin. Loaded once per path per JVM and never unloaded: XLA keeps process-wide
 * registries (FFI handlers among them) inside the plugin, so unloading it would leave dangling state.
 * Thread-safe; not closeable.
 */
public final class Plugin {
  private static final Map<Path, Plugin> LOADED = new ConcurrentHashMap<>();

  private final Path path;
  private final long handle;
  private final int apiMajor;
  private final int apiMinor;
  private final boolean ffiHandlers;

  private Plugin(Path path, long handle) {
    this.path = path;
    this.handle = handle;
    int[] version = PjrtNative.pluginApiVersion(handle);
    this.apiMajor = version[0];
    this.apiMinor = version[1];
    this.ffiHandlers = PjrtNative.pluginHasFfiHandlers(handle);
  }

  /** The plugin named by the settings. */
  public static Plugin load(RuntimeSettings settings) {
    try {
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
    if (path.equals(RuntimeSettings.defaultPluginPath())) {
      return "the default location (" + RuntimeSettings.PLUGIN_PATH_KEY + " is empty)";
    }
    return "the config key " + RuntimeSettings.PLUGIN_PATH_KEY;
  }

  /**
   * Loads the plugin at {@code path}, or returns the one already loaded from there. A missing file or
   * a file that is not a PJRT plugin is a {@link PluginException} naming the config key, the
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
      throw new PluginException(ErrorCode.NOT_FOUND, missingMessage(key));
    }
    return LOADED.computeIfAbsent(
        key,
        p -> {
          try {
            return new Plugin(p, PjrtNative.pluginLoad(p.toString()));
          } catch (PluginException e) {
            throw new PluginException(e.code(), e.getMessage() + hint());
          }
        });
  }

  private static String missingMessage(Path path) {
    return "PJRT plugin not found at " + path + hint();
  }

  private static String hint() {
    return " (set "
        + RuntimeSettings.PLUGIN_PATH_KEY
        + " or the environment variable "
        + RuntimeSettings.PLUGIN_ENV
        + " to a PJRT plugin file, or run '"
        + RuntimeSettings.FETCH_COMMAND
        + "' to fetch the default CPU plugin)";
  }

  public Path path() {
    return path;
  }

  /** The PJRT C API version the plugin implements, e.g. {@code 0.81}. */
  public String apiVersion() {
    return apiMajor + "." + apiMinor;
  }

  public int apiMajorVersion() {
    return apiMajor;
  }

  public int apiMinorVersion() {
    return apiMinor;
  }

  /** Whether the bridge's XLA FFI handlers are registered with this plugin (needs its FFI extension). */
  public boolean hasFfiHandlers() {
    return ffiHandlers;
  }

  long handle() {
    return handle;
  }

  @Override
  public String toString() {
    return "Plugin(" + path + ", PJRT C API " + apiVersion() + ")";
  }
}
