package dev.xlaactors.runtime;

import org.bytedeco.javacpp.Loader;

/**
 * Loads the one JNI library (the generated PJRT binding, JavaCPP's own natives and the bridge's C++)
 * before any JavaCPP {@code Pointer} exists. Every runtime class that reaches native code loads it from
 * its static initializer, so whichever a program touches first does it.
 */
final class NativeLibrary {
  /** The file the JNI library was loaded from. */
  private static final String PATH;

  static {
    // JavaCPP refuses native allocations once the process's resident memory passes 4x the Java heap's
    // maximum. XLA's own buffers count toward that (a 4 GiB tensor in a JVM run with -Xmx512m), which
    // would make every later args struct fail to allocate; the runtime's own allocations are small and
    // freed deterministically, so turn the limits off unless the application set them.
    setIfAbsent("org.bytedeco.javacpp.maxBytes", "0");
    setIfAbsent("org.bytedeco.javacpp.maxPhysicalBytes", "0");
    PATH = Loader.load(dev.xlaactors.nativebridge.pjrt.global.Pjrt.class);
  }

  private NativeLibrary() {}

  /** Loads the library if it is not loaded yet (the work happens once, in the static initializer). */
  static void load() {}

  /** The file the JNI library was loaded from (JavaCPP's extracted copy). */
  static String path() {
    return PATH;
  }

  private static void setIfAbsent(String key, String value) {
    if (System.getProperty(key) == null) {
      System.setProperty(key, value);
    }
  }
}
