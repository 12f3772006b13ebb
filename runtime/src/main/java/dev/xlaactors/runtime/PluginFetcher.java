package dev.xlaactors.runtime;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.PluginException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Fetches a pinned XLA CPU plugin build ({@link PluginBuild}) into the user cache ({@link PluginBuild#path()})
 * when it is missing, the way the build's {@code native/fetch-third-party.sh} does, so a program depending on
 * the installed jars finds its plugin without the source tree: {@code pip download} of the pinned wheel
 * (version, platform and sha256 from {@code third-party.properties}, packed in the native jar), its sha256
 * checked, the plugin file extracted and checked against its pinned sha256, and its pin written beside it.
 * Used only for a build's own path; a path set by {@code XLA_ACTORS_PLUGIN} or {@code
 * xla-actors.runtime.plugin-path} is never fetched. Without pip or a reachable package index, the error gives
 * the exact command to run instead.
 *
 * <p>Run it ahead of time with {@code java -cp <classpath> dev.xlaactors.runtime.PluginFetcher [BUILD]}.
 */
public final class PluginFetcher {
  private static final Logger LOG = LoggerFactory.getLogger(PluginFetcher.class);
  private static final String PROPERTIES = "/dev/xlaactors/nativebridge/third-party.properties";

  private PluginFetcher() {}

  /** Fetches the build named by the first argument (default: the selected one) if it is missing and prints where it is. */
  public static void main(String[] args) {
    PluginBuild build = args.length > 0 ? PluginBuild.named(args[0], "the argument") : selected();
    System.out.println(ensure(build));
  }

  private static PluginBuild selected() {
    String env = System.getenv(PluginBuild.ENV);
    return env == null || env.isBlank() ? PluginBuild.defaultBuild() : PluginBuild.named(env.trim(), "the environment variable " + PluginBuild.ENV);
  }

  /** {@code build}'s plugin file, fetched first if it is missing (once per process at a time). */
  public static synchronized Path ensure(PluginBuild build) {
    Path plugin = build.path();
    if (Files.isRegularFile(plugin)) {
      return plugin;
    }
    Path wheels = plugin.getParent().getParent().resolve("wheels");
    List<String> pip = List.of("python3", "-m", "pip", "download", "--disable-pip-version-check", "--no-deps",
        "--only-binary=:all:", "--python-version", "3.11", "--platform", build.platform(), "-d", wheels.toString(),
        build.name() + "==" + build.version());
    String byHand = "run: " + String.join(" ", pip) + " && check that the wheel's sha256 is " + build.wheelSha256()
        + ", then unzip " + build.member() + " from it to " + plugin
        + " (or set " + RuntimeSettings.PLUGIN_ENV + " to a plugin file you have)";
    LOG.warn("the XLA CPU plugin {} is not in {}: fetching it with pip (about 63 MB), sha256-checked", build, plugin);
    try {
      Files.createDirectories(wheels);
      Process process = new ProcessBuilder(pip).redirectErrorStream(true).start();
      String output = new String(process.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
      if (!process.waitFor(30, TimeUnit.MINUTES) || process.exitValue() != 0) {
        throw new PluginException(ErrorCode.NOT_FOUND, "PJRT plugin not found at " + plugin
            + ", and fetching it failed (pip said: " + output.strip() + "); to fetch it by hand, " + byHand);
      }
      Path wheel;
      try (var found = Files.list(wheels)) {
        wheel = found.filter(p -> p.getFileName().toString().startsWith(build.wheelPrefix()))
            .findFirst()
            .orElseThrow(() -> new PluginException(ErrorCode.NOT_FOUND,
                "pip reported success but left no " + build.wheelPrefix() + "* wheel in " + wheels + "; " + byHand));
      }
      String actual = sha256(wheel);
      if (!actual.equals(build.wheelSha256())) {
        Files.delete(wheel);
        throw new PluginException(ErrorCode.DATA_LOSS, "the downloaded " + wheel.getFileName() + " has sha256 " + actual
            + ", expected " + build.wheelSha256() + "; deleted it. " + byHand);
      }
      Files.createDirectories(plugin.getParent());
      // A file of its own, moved into place whole: another process fetching at the same time cannot see
      // a half-written plugin.
      Path partial = Files.createTempFile(plugin.getParent(), plugin.getFileName().toString(), ".partial");
      try (ZipFile zip = new ZipFile(wheel.toFile())) {
        ZipEntry entry = zip.getEntry(build.member());
        if (entry == null) {
          throw new PluginException(ErrorCode.DATA_LOSS, wheel + " has no " + build.member());
        }
        try (InputStream in = zip.getInputStream(entry)) {
          Files.copy(in, partial, StandardCopyOption.REPLACE_EXISTING);
        }
      }
      String unpacked = sha256(partial);
      if (!unpacked.equals(build.fileSha256())) {
        Files.delete(partial);
        throw new PluginException(ErrorCode.DATA_LOSS, build.member() + " in " + wheel.getFileName() + " has sha256 "
            + unpacked + ", expected " + build.fileSha256() + "; " + byHand);
      }
      Path pin = PluginFile.pinOf(plugin);
      Files.writeString(pin, "sha256=" + build.fileSha256() + "\nsize=" + build.fileSize() + "\n");
      Files.move(partial, plugin, StandardCopyOption.ATOMIC_MOVE);
      Files.delete(wheel); // unpacked: keep the cache small, as fetch-third-party.sh does
      LOG.warn("fetched the XLA CPU plugin {} into {}", build, plugin);
      return plugin;
    } catch (IOException e) {
      throw new PluginException(ErrorCode.NOT_FOUND, "PJRT plugin not found at " + plugin + ", and fetching it failed ("
          + e + "); to fetch it by hand, " + byHand);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new PluginException(ErrorCode.CANCELLED, "interrupted while fetching the XLA CPU plugin into " + plugin);
    }
  }

  /** The pins in {@code third-party.properties} (versions and sha256s of the fetched parts). */
  static Properties pins() {
    Properties pins = new Properties();
    try (InputStream in = PluginFetcher.class.getResourceAsStream(PROPERTIES)) {
      if (in == null) {
        throw new PluginException(ErrorCode.INTERNAL, PROPERTIES + " is missing from the classpath (it comes in the"
            + " xla-actors-native jar)");
      }
      pins.load(in);
    } catch (IOException e) {
      throw new PluginException(ErrorCode.INTERNAL, "cannot read " + PROPERTIES + ": " + e);
    }
    return pins;
  }

  /** The hex SHA-256 of {@code file}'s bytes, read as a stream. */
  static String sha256(Path file) throws IOException {
    try (InputStream in = Files.newInputStream(file)) {
      MessageDigest digest = MessageDigest.getInstance("SHA-256");
      byte[] buffer = new byte[1 << 16];
      for (int n; (n = in.read(buffer)) > 0; ) {
        digest.update(buffer, 0, n);
      }
      return HexFormat.of().formatHex(digest.digest());
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
