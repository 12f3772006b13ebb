package dev.xlaactors.nativebridge;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.PluginException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * Loads the bridge library ({@code libxla_actors_bridge.so}), which the native module's build puts on
 * the classpath. It is copied to a private temporary file first because {@link System#load} needs a
 * file, and a jar entry is not one. Loaded at most once per JVM.
 */
public final class BridgeLibrary {
  private static final String RESOURCE = "/dev/xlaactors/nativebridge/linux-x86_64/libxla_actors_bridge.so";
  private static boolean loaded;

  private BridgeLibrary() {}

  /** Loads the bridge if it is not loaded yet; throws {@link PluginException} if it cannot be. */
  public static synchronized void load() {
    if (loaded) {
      return;
    }
    String os = System.getProperty("os.name", "").toLowerCase();
    String arch = System.getProperty("os.arch", "");
    if (!os.contains("linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
      throw new PluginException(
          ErrorCode.UNIMPLEMENTED,
          "the xla-actors bridge is built for linux-x86_64, this JVM runs on " + os + "-" + arch);
    }
    try (InputStream in = BridgeLibrary.class.getResourceAsStream(RESOURCE)) {
      if (in == null) {
        throw new PluginException(
            ErrorCode.FAILED_PRECONDITION,
            "the bridge library " + RESOURCE + " is not on the classpath: build the native module first (mvn install)");
      }
      Path dir = Files.createTempDirectory("xla-actors-bridge");
      Path file = dir.resolve("libxla_actors_bridge.so");
      Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
      file.toFile().deleteOnExit();
      dir.toFile().deleteOnExit();
      System.load(file.toString());
      loaded = true;
    } catch (IOException e) {
      throw new PluginException(ErrorCode.INTERNAL, "cannot unpack the bridge library: " + e.getMessage());
    }
  }
}
