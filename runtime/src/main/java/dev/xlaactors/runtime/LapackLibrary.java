package dev.xlaactors.runtime;

import static dev.xlaactors.nativebridge.pjrt.global.Pjrt.XlaActors_LoadLapack;
import static dev.xlaactors.nativebridge.pjrt.global.Pjrt.XlaActors_SetLapackUnavailable;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Loader;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The LAPACK behind the bridge's {@code lapack_*_ffi} handlers, which run the custom calls that JAX's CPU
 * lowerings of {@code jnp.linalg} and {@code jax.scipy.linalg} emit (Cholesky, LU, triangular solve, QR,
 * SVD, symmetric and general eigendecomposition). It is bytedeco's OpenBLAS ({@code org.bytedeco:openblas}),
 * unpacked and loaded by JavaCPP; the bridge then {@code dlopen}s that same file and looks up the Fortran
 * symbols, so nothing links against it at build time.
 *
 * <p>Loaded once per JVM, the first time a client compiles (or deserializes) a program whose text calls a
 * {@code lapack_} custom call, or when {@link #isLoaded()} or {@link #description()} is asked: loading it
 * took 1.1 to 2.2 s on the 2-core development machine, which programs without linear algebra need not pay.
 * When it cannot be loaded nothing is thrown; the programs that call LAPACK fail when they run, with an
 * error naming the routine and this reason. Thread-safe.
 */
public final class LapackLibrary {
  private static final Logger LOG = LoggerFactory.getLogger(LapackLibrary.class);
  private static final Object LOCK = new Object();
  private static volatile boolean attempted;
  private static volatile boolean loaded;
  private static volatile String description = "not loaded yet";

  static {
    NativeLibrary.load();
  }

  private LapackLibrary() {}

  /** Whether the LAPACK handlers can run (loading it first if no plugin has yet). */
  public static boolean isLoaded() {
    load();
    return loaded;
  }

  /**
   * What was loaded (OpenBLAS's own configuration string, e.g. {@code "OpenBLAS 0.3.31 DYNAMIC_ARCH ..."},
   * and its path), or why nothing was.
   */
  public static String description() {
    load();
    return description;
  }

  /** Loads OpenBLAS (once) if {@code stablehlo} calls one of the bridge's LAPACK handlers. */
  static void loadIfCalledBy(String stablehlo) {
    if (!attempted && stablehlo.contains("@lapack_")) {
      load();
    }
  }

  /** Loads OpenBLAS and hands it to the bridge, once; a failure is recorded, never thrown. */
  static void load() {
    if (attempted) {
      return;
    }
    synchronized (LOCK) {
      if (attempted) {
        return;
      }
      String path;
      try {
        path = openBlasPath();
      } catch (LinkageError | RuntimeException e) {
        String reason = "OpenBLAS (org.bytedeco:openblas with the linux-x86_64 classifier) could not be loaded: " + e;
        try (BytePointer text = new BytePointer(reason, StandardCharsets.UTF_8)) {
          XlaActors_SetLapackUnavailable(text);
        }
        description = reason;
        attempted = true;
        LOG.warn("LAPACK custom calls will fail: {}", reason);
        return;
      }
      byte[] message = new byte[1024];
      int ok;
      try (BytePointer name = new BytePointer(path, StandardCharsets.UTF_8)) {
        ok = XlaActors_LoadLapack(name, message, message.length);
      }
      int n = 0;
      while (n < message.length && message[n] != 0) {
        n++;
      }
      description = new String(message, 0, n, StandardCharsets.UTF_8);
      loaded = ok == 1;
      attempted = true;
      if (loaded) {
        LOG.debug("LAPACK for lapack_*_ffi custom calls: {}", description);
      } else {
        LOG.warn("LAPACK custom calls will fail: {}", description);
      }
    }
  }

  /**
   * Has JavaCPP unpack and load OpenBLAS, and returns the file that holds LAPACK: libopenblas.so.0 next
   * to the JNI library that {@link Loader#load(Class)} returns (the JNI library itself, whose
   * dependencies the bridge's symbol lookup also searches, when the file is not there).
   */
  private static String openBlasPath() {
    String jni = Loader.load(org.bytedeco.openblas.global.openblas.class);
    if (jni == null) {
      throw new IllegalStateException("JavaCPP returned no path for OpenBLAS");
    }
    Path sibling = Path.of(jni).resolveSibling("libopenblas.so.0");
    return Files.isRegularFile(sibling) ? sibling.toString() : jni;
  }
}
