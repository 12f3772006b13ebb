package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.PluginException;
import dev.xlaactors.error.XlaException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PluginTest {
  @Test
  void loadsThePinnedPluginOnceAndReportsItsApiVersion() {
    RuntimeSettings settings = RuntimeSettings.load();
    Plugin plugin = Plugin.load(settings);
    assertSame(plugin, Plugin.load(settings.pluginPath()), "a plugin is loaded once per path");
    assertEquals(0, plugin.apiMajorVersion());
    assertTrue(plugin.apiMinorVersion() >= 81, "PJRT C API " + plugin.apiVersion());
  }

  @Test
  void clientHasCpuDevices() {
    try (XlaClient client = XlaClient.create()) {
      assertEquals("cpu", client.platformName());
      assertFalse(client.devices().isEmpty());
      assertEquals(0, client.devices().get(0).index());
    }
  }

  @Test
  void missingPluginNamesKeyEnvironmentVariableAndFetchCommand(@TempDir Path dir) {
    RuntimeSettings settings = RuntimeSettings.load().withPluginPath(dir.resolve("nope.so"));
    PluginException e = assertThrows(PluginException.class, () -> XlaClient.create(settings));
    assertEquals(ErrorCode.NOT_FOUND, e.code());
    assertTrue(e.getMessage().contains("nope.so"), e.getMessage());
    assertTrue(e.getMessage().contains(RuntimeSettings.PLUGIN_PATH_KEY), e.getMessage());
    assertTrue(e.getMessage().contains(RuntimeSettings.PLUGIN_ENV), e.getMessage());
    assertTrue(e.getMessage().contains(RuntimeSettings.FETCH_COMMAND), e.getMessage());
  }

  @Test
  void aDirectoryIsReportedAsADirectoryAndTheConfigKeyAsTheOrigin(@TempDir Path dir) {
    RuntimeSettings settings = RuntimeSettings.load().withPluginPath(dir);
    PluginException e = assertThrows(PluginException.class, () -> XlaClient.create(settings));
    assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    assertTrue(e.getMessage().startsWith("the PJRT plugin path " + dir + " is a directory; it must name the plugin file itself"), e.getMessage());
    assertTrue(e.getMessage().endsWith("the path came from the config key " + RuntimeSettings.PLUGIN_PATH_KEY), e.getMessage());
  }

  @Test
  void aBadPathFromTheEnvironmentVariableSaysSo(@TempDir Path dir) throws Exception {
    Path missing = dir.resolve("from-env.so");
    ChildJvm.Result r = ChildJvm.run(LoadConfiguredPlugin.class, List.of(), Map.of(RuntimeSettings.PLUGIN_ENV, missing.toString()));
    assertEquals(3, r.exitCode(), r.output());
    assertTrue(r.output().contains("PJRT plugin not found at " + missing), r.output());
    assertTrue(r.output().contains("the path came from the environment variable " + RuntimeSettings.PLUGIN_ENV + "=" + missing), r.output());
  }

  /** Child JVM: creates a client from the configured settings and prints why it could not. */
  static final class LoadConfiguredPlugin {
    public static void main(String[] args) {
      try (XlaClient client = XlaClient.create(RuntimeSettings.load())) {
        System.out.println("loaded " + client);
      } catch (PluginException e) {
        System.out.println(e.getMessage());
        System.exit(3);
      }
    }
  }

  @Test
  void aFileThatIsNotASharedLibraryIsRefused(@TempDir Path dir) throws IOException {
    Path file = Files.writeString(dir.resolve("plugin.so"), "not an ELF file");
    PluginException e = assertThrows(PluginException.class, () -> Plugin.load(file));
    assertTrue(e.getMessage().contains(file + " is not an ELF shared library"), e.getMessage());
    assertTrue(e.getMessage().contains(RuntimeSettings.PLUGIN_ENV), e.getMessage());
  }

  @Test
  void aSharedLibraryThatIsNotAPluginIsRefused() {
    Path libjava = Path.of(System.getProperty("java.home"), "lib", "libjava.so");
    PluginException e = assertThrows(PluginException.class, () -> Plugin.load(libjava));
    assertTrue(e.getMessage().contains("does not export GetPjrtApi"), e.getMessage());
  }

  @Test
  void pluginPathComesFromConfig(@TempDir Path dir) {
    var config =
        ConfigFactory.parseMap(Map.of("xla-actors.runtime.plugin-path", dir.resolve("custom.so").toString()))
            .withFallback(ConfigFactory.load());
    assertEquals(dir.resolve("custom.so"), RuntimeSettings.fromConfig(config).pluginPath());
  }

  @Test
  void emptyPluginPathMeansTheFetchedDefault() {
    var config = ConfigFactory.parseMap(Map.of("xla-actors.runtime.plugin-path", "", "xla-actors.runtime.plugin-build", ""))
        .withFallback(ConfigFactory.load());
    assertEquals(RuntimeSettings.defaultPluginPath(), RuntimeSettings.fromConfig(config).pluginPath());
  }

  @Test
  void pluginBuildSelectsASupportedBuildsFetchedFileAndAnUnknownOneIsRefusedNamingThem() {
    for (PluginBuild build : PluginBuild.supported()) {
      var config = ConfigFactory.parseMap(Map.of("xla-actors.runtime.plugin-path", "", "xla-actors.runtime.plugin-build", build.name()))
          .withFallback(ConfigFactory.load());
      assertEquals(build.path(), RuntimeSettings.fromConfig(config).pluginPath());
      assertEquals(java.util.Optional.of(build), PluginBuild.atPath(build.path()));
    }
    assertEquals(3, PluginBuild.supported().size(), PluginBuild.supported().toString());
    var config = ConfigFactory.parseMap(Map.of("xla-actors.runtime.plugin-build", "xla-cpu-pjrt-0.0.2"))
        .withFallback(ConfigFactory.load());
    XlaException e = assertThrows(XlaException.class, () -> RuntimeSettings.fromConfig(config));
    assertTrue(e.getMessage().startsWith("xla-actors.runtime.plugin-build"), e.getMessage());
    assertTrue(e.getMessage().contains("names the XLA CPU plugin build 'xla-cpu-pjrt-0.0.2', which is not supported; expected one of"
        + " [xla-cpu-pjrt, fastatomstruct-xla-cpu, lammps-jax-pjrt-cpu]"), e.getMessage());
  }

  @Test
  void badConfigValueNamesTheKey() {
    var config =
        ConfigFactory.parseMap(Map.of("xla-actors.runtime.compile-cache-size", "lots"))
            .withFallback(ConfigFactory.load());
    XlaException e = assertThrows(XlaException.class, () -> RuntimeSettings.fromConfig(config));
    assertTrue(e.getMessage().contains("compile-cache-size"), e.getMessage());
  }
}
