package dev.xlaactors.runtime;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.Properties;

/**
 * A supported build of the XLA CPU PJRT plugin, pinned in {@code native/third-party.properties} (packed in the
 * native jar): the wheel on PyPI that ships it (name, version, platform, sha256) and the plugin file inside it
 * (its path in the wheel, size and sha256). The build fetches the selected one ({@code native/fetch-third-party.sh},
 * {@link PluginFetcher} for an installed jar) into {@code $XLA_ACTORS_CACHE/<name>-<version>/}, and {@code
 * xla-actors.runtime.plugin-build} (environment variable {@value #ENV}) selects which one a client loads.
 *
 * @param name the wheel's name, which is the build's name, e.g. {@code xla-cpu-pjrt}
 * @param version the wheel's version
 * @param platform the wheel's platform tag
 * @param wheelSha256 the wheel file's sha256
 * @param member the plugin file's path inside the wheel
 * @param fileSha256 the plugin file's sha256
 * @param fileSize the plugin file's size in bytes
 */
public record PluginBuild(
    String name, String version, String platform, String wheelSha256, String member, String fileSha256, long fileSize) {
  /** The environment variable that selects a build (overrides {@link #CONFIG_KEY}). */
  public static final String ENV = "XLA_ACTORS_PLUGIN_BUILD";
  /** The config key that selects a build; empty means {@link #defaultBuild()}. */
  public static final String CONFIG_KEY = "xla-actors.runtime.plugin-build";

  /** The builds {@code third-party.properties} lists, the default first. */
  public static List<PluginBuild> supported() {
    Properties pins = PluginFetcher.pins();
    List<PluginBuild> builds = new ArrayList<>();
    builds.add(defaultBuild());
    for (String name : names(pins)) {
      if (!name.equals(builds.get(0).name())) {
        builds.add(of(pins, name));
      }
    }
    return List.copyOf(builds);
  }

  /** The build chosen by the A/B in bench/README.md ({@code cpu_plugin.default}). */
  public static PluginBuild defaultBuild() {
    Properties pins = PluginFetcher.pins();
    return of(pins, pins.getProperty("cpu_plugin.default"));
  }

  /**
   * The supported build called {@code name}; an unknown name is an {@link XlaException} (INVALID_ARGUMENT) naming
   * it, {@code where} it was set and the supported builds.
   */
  public static PluginBuild named(String name, String where) {
    Properties pins = PluginFetcher.pins();
    if (!names(pins).contains(name)) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, where + " names the XLA CPU plugin build '" + name
          + "', which is not supported; expected one of " + names(pins) + " (see native/third-party.properties), or"
          + " empty for the default (" + pins.getProperty("cpu_plugin.default") + ")");
    }
    return of(pins, name);
  }

  /** The supported build whose fetched file is {@code path} (the path this build is fetched to), if any. */
  public static Optional<PluginBuild> atPath(Path path) {
    Path normal = path.toAbsolutePath().normalize();
    return supported().stream().filter(b -> b.path().toAbsolutePath().normalize().equals(normal)).findFirst();
  }

  /**
   * The supported build {@code plugin} is, by the sha256 in the pin file the fetch step wrote beside it (a file
   * without a pin is not known to be any build: a copy of one, stripped or not, is not identified).
   */
  public static Optional<PluginBuild> pinnedAs(Path plugin) {
    Path pin = PluginFile.pinOf(plugin);
    if (!Files.isRegularFile(pin)) {
      return Optional.empty();
    }
    try {
      String sha = PluginFile.readPin(pin).get("sha256");
      return supported().stream().filter(b -> b.fileSha256().equalsIgnoreCase(sha)).findFirst();
    } catch (IOException | RuntimeException e) {
      return Optional.empty();
    }
  }

  /** Where the fetch step puts this build's plugin file: {@code $XLA_ACTORS_CACHE/<name>-<version>/<file>}. */
  public Path path() {
    return RuntimeSettings.cacheRoot().resolve(name + "-" + version).resolve(Path.of(member).getFileName());
  }

  /** The start of the wheel's file name ({@code <name with _>-<version>-}). */
  String wheelPrefix() {
    return name.replace('-', '_') + "-" + version + "-";
  }

  /** The name of this build's measured {@code XLA_FLAGS} table (a resource beside {@link XlaFlags}). */
  String flagsTable() {
    return name + "-" + version + ".flags";
  }

  @Override
  public String toString() {
    return name + " " + version;
  }

  private static List<String> names(Properties pins) {
    String builds = pins.getProperty("cpu_plugin.builds", "").trim();
    return builds.isEmpty() ? List.of() : Arrays.asList(builds.split("\\s+"));
  }

  private static PluginBuild of(Properties pins, String name) {
    String prefix = "cpu_plugin." + name + ".";
    String[] keys = {"version", "platform", "sha256", "member", "so.sha256", "so.size"};
    String[] values = new String[keys.length];
    for (int i = 0; i < keys.length; i++) {
      values[i] = pins.getProperty(prefix + keys[i]);
      if (values[i] == null || values[i].isBlank()) {
        throw new XlaException(ErrorCode.INTERNAL, "third-party.properties (in the xla-actors-native jar) has no "
            + prefix + keys[i] + " for the XLA CPU plugin build '" + name + "': mixed xla-actors versions on the classpath?");
      }
    }
    return new PluginBuild(name, values[0], values[1], values[2], values[3], values[4], Long.parseLong(values[5]));
  }
}
