package dev.xlaactors.runtime;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import java.nio.file.Path;

/**
 * The runtime module's settings, read once from {@code xla-actors.runtime} (see its reference.conf).
 *
 * @param pluginPath the PJRT plugin file to load
 * @param clientAsynchronous whether the CPU client runs executions on its own thread pool
 * @param compileCacheSize executables a client keeps for reuse; 0 disables the cache
 * @param hostMemoryPoolBytes the most bytes of idle host memory the {@link HostMemoryPool} keeps for reuse
 * @param cpuDeviceCount the CPU client's {@code cpu_device_count} option; 0 leaves it to the plugin
 * @param compiledProgramsDirectory where a client keeps the programs it compiles from modules for the next
 *     process ({@link CompiledProgramStore}); null keeps none
 * @param compiledProgramsMaxBytes the most bytes of compiled programs kept there
 */
public record RuntimeSettings(
    Path pluginPath, boolean clientAsynchronous, int compileCacheSize, long hostMemoryPoolBytes, int cpuDeviceCount,
    Path compiledProgramsDirectory, long compiledProgramsMaxBytes) {
  public RuntimeSettings {
    if (compiledProgramsMaxBytes < 0) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, COMPILED_PROGRAMS_KEY + ".max-bytes must be >= 0, got "
          + compiledProgramsMaxBytes);
    }
    if (cpuDeviceCount < 0 || cpuDeviceCount > XlaClient.MAX_CPU_DEVICE_COUNT) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, "xla-actors.runtime.cpu-device-count must be from 0 (the"
          + " plugin's count) to " + XlaClient.MAX_CPU_DEVICE_COUNT + ", got " + cpuDeviceCount);
    }
  }

  /** The config key of the plugin path, named in error messages. */
  public static final String PLUGIN_PATH_KEY = "xla-actors.runtime.plugin-path";
  /** The config key of the host-memory pool's bound, named in error messages. */
  public static final String HOST_MEMORY_POOL_BYTES_KEY = "xla-actors.runtime.host-memory.pool-bytes";
  /** The config section of the compiled programs kept on disk, named in messages. */
  public static final String COMPILED_PROGRAMS_KEY = "xla-actors.runtime.compiled-programs";
  /** The environment variable that overrides {@link #PLUGIN_PATH_KEY}. */
  public static final String PLUGIN_ENV = "XLA_ACTORS_PLUGIN";
  /** The command that fetches the default plugin. */
  public static final String FETCH_COMMAND = "bash native/fetch-third-party.sh";
  /** The environment variable naming the GPU (CUDA) plugin. */
  public static final String GPU_PLUGIN_ENV = "XLA_ACTORS_GPU_PLUGIN";
  /** The opt-in command that fetches the CUDA plugin. */
  public static final String FETCH_GPU_COMMAND = "bash native/fetch-cuda-plugin.sh";
  /** Version of the {@code jax-cuda13-pjrt} wheel fetch-cuda-plugin.sh fetches; keep in step with third-party.properties. */
  static final String DEFAULT_GPU_PLUGIN_VERSION = "0.12.0.1";

  /** The most compiled programs a client's cache may keep. */
  static final int MAX_COMPILE_CACHE = 100_000;
  /** The largest host-memory pool: 1 TiB. */
  static final long MAX_POOL_BYTES = 1L << 40;

  /** Settings from the application's config (application.conf, system properties, reference.conf). */
  public static RuntimeSettings load() {
    return fromConfig(ConfigFactory.load());
  }

  /**
   * Settings from {@code config}; a missing, mistyped or unknown key under {@code xla-actors} is an
   * {@link XlaException} naming it.
   */
  public static RuntimeSettings fromConfig(Config config) {
    KnownConfigKeys.check(config);
    try {
      Config c = config.getConfig("xla-actors.runtime");
      String path = c.getString("plugin-path").trim();
      String build = c.getString("plugin-build").trim();
      PluginBuild selected = build.isEmpty() ? PluginBuild.defaultBuild() : PluginBuild.named(build, buildOrigin(c));
      int cacheSize = c.getInt("compile-cache-size");
      if (cacheSize < 0) {
        throw new XlaException(
            ErrorCode.INVALID_ARGUMENT,
            "xla-actors.runtime.compile-cache-size must be >= 0, got " + cacheSize);
      }
      SettingRanges.check(cacheSize, "xla-actors.runtime.compile-cache-size", Integer.toString(cacheSize), 0, MAX_COMPILE_CACHE,
          "compiled programs kept; each holds its machine code");
      int devices = c.getInt("cpu-device-count");
      SettingRanges.check(devices, "xla-actors.runtime.cpu-device-count", Integer.toString(devices), 0, XlaClient.MAX_CPU_DEVICE_COUNT,
          "CPU devices of a client; 0 leaves the count to the plugin");
      return new RuntimeSettings(
          path.isEmpty() ? selected.path() : Path.of(path),
          c.getBoolean("client-asynchronous"),
          cacheSize,
          hostMemoryPoolBytes(config),
          devices,
          c.getBoolean("compiled-programs.keep") ? compiledProgramsDirectory(c) : null,
          compiledProgramsMaxBytes(config));
    } catch (ConfigException e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, "bad runtime configuration: " + e.getMessage(), e);
    }
  }

  private static Path compiledProgramsDirectory(Config runtime) {
    String directory = runtime.getString("compiled-programs.directory").trim();
    return directory.isEmpty() ? cacheRoot().resolve("compiled-programs") : Path.of(directory);
  }

  private static long compiledProgramsMaxBytes(Config config) {
    String key = COMPILED_PROGRAMS_KEY + ".max-bytes";
    long bytes;
    try {
      bytes = config.getBytes(key);
    } catch (ConfigException.WrongType | ConfigException.BadValue e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, key + " must be a size in bytes such as 1 GiB, got "
          + config.getValue(key).render() + " (" + config.getValue(key).origin().description() + ")", e);
    }
    SettingRanges.check(bytes, key, config.getValue(key).render(), 0, MAX_POOL_BYTES,
        "bytes of compiled programs kept on disk");
    return bytes;
  }

  private static long hostMemoryPoolBytes(Config config) {
    long bytes;
    try {
      bytes = config.getBytes(HOST_MEMORY_POOL_BYTES_KEY);
    } catch (ConfigException.WrongType | ConfigException.BadValue e) {
      throw new XlaException(
          ErrorCode.INVALID_ARGUMENT,
          HOST_MEMORY_POOL_BYTES_KEY + " must be a size in bytes such as 256 MiB (0 turns pooling off), got "
              + config.getValue(HOST_MEMORY_POOL_BYTES_KEY).render() + " ("
              + config.getValue(HOST_MEMORY_POOL_BYTES_KEY).origin().description() + ")",
          e);
    }
    if (bytes < 0) {
      throw new XlaException(
          ErrorCode.INVALID_ARGUMENT,
          HOST_MEMORY_POOL_BYTES_KEY + " must be >= 0 bytes (0 turns pooling off), got " + bytes);
    }
    SettingRanges.check(bytes, HOST_MEMORY_POOL_BYTES_KEY, config.getValue(HOST_MEMORY_POOL_BYTES_KEY).render(), 0, MAX_POOL_BYTES,
        "bytes of host memory the pool keeps; 0 turns pooling off");
    return bytes;
  }

  /**
   * Where fetch-third-party.sh puts the default build's plugin ({@link PluginBuild#defaultBuild()}): under {@code
   * $XLA_ACTORS_CACHE} or {@code ~/.cache/xla-actors}.
   */
  public static Path defaultPluginPath() {
    return PluginBuild.defaultBuild().path();
  }

  private static String buildOrigin(Config runtime) {
    String env = System.getenv(PluginBuild.ENV);
    return env != null && env.trim().equals(runtime.getString("plugin-build").trim())
        ? "the environment variable " + PluginBuild.ENV
        : PluginBuild.CONFIG_KEY + " (" + runtime.getValue("plugin-build").origin().description() + ")";
  }

  /**
   * The CUDA plugin: {@code $XLA_ACTORS_GPU_PLUGIN}, else where {@link #FETCH_GPU_COMMAND} puts it. The
   * file exists only on machines where someone fetched it; load it with {@link Plugin#load(Path)}.
   */
  public static Path gpuPluginPath() {
    String env = System.getenv(GPU_PLUGIN_ENV);
    if (env != null && !env.isBlank()) {
      return Path.of(env);
    }
    return cacheRoot().resolve("jax-cuda13-pjrt-" + DEFAULT_GPU_PLUGIN_VERSION).resolve("xla_cuda_plugin.so");
  }

  /** The cache the fetch steps fill: {@code $XLA_ACTORS_CACHE}, else {@code ~/.cache/xla-actors}. */
  static Path cacheRoot() {
    String cache = System.getenv("XLA_ACTORS_CACHE");
    return cache != null && !cache.isBlank()
        ? Path.of(cache)
        : Path.of(System.getProperty("user.home"), ".cache", "xla-actors");
  }

  public RuntimeSettings withPluginPath(Path path) {
    return new RuntimeSettings(path, clientAsynchronous, compileCacheSize, hostMemoryPoolBytes, cpuDeviceCount,
        compiledProgramsDirectory, compiledProgramsMaxBytes);
  }

  /** These settings with another CPU device count (1 to 1024; 0 leaves it to the plugin). */
  public RuntimeSettings withCpuDeviceCount(int count) {
    return new RuntimeSettings(pluginPath, clientAsynchronous, compileCacheSize, hostMemoryPoolBytes, count,
        compiledProgramsDirectory, compiledProgramsMaxBytes);
  }

  /** These settings with another bound for the host-memory pool (see {@link HostMemoryPool}). */
  public RuntimeSettings withHostMemoryPoolBytes(long bytes) {
    return new RuntimeSettings(pluginPath, clientAsynchronous, compileCacheSize, bytes, cpuDeviceCount,
        compiledProgramsDirectory, compiledProgramsMaxBytes);
  }

  /**
   * These settings with compiled programs kept in {@code directory} for the next process (null keeps none; see
   * {@link CompiledProgramStore}).
   */
  public RuntimeSettings withCompiledProgramsDirectory(Path directory) {
    return new RuntimeSettings(pluginPath, clientAsynchronous, compileCacheSize, hostMemoryPoolBytes, cpuDeviceCount,
        directory, compiledProgramsMaxBytes);
  }
}
