package dev.xlaactors.runtime;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import java.lang.management.BufferPoolMXBean;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;

/**
 * Where the runtime allocates direct memory for host tensors: an allocation that the JVM's direct-memory
 * limit refuses fails with an {@link XlaException} (RESOURCE_EXHAUSTED) naming the bytes asked, the limit,
 * the bytes in use and the setting to raise, instead of an {@link OutOfMemoryError} that would escape into
 * the actor system (which ends the JVM on a fatal error) or leave a run without an outcome. Thread-safe.
 */
final class DirectMemory {
  private DirectMemory() {}

  /** A direct buffer of {@code bytes} bytes for a host tensor of {@code tensorBytes} bytes, or the clear error. */
  static ByteBuffer allocate(int bytes, long tensorBytes) {
    try {
      return ByteBuffer.allocateDirect(bytes);
    } catch (OutOfMemoryError e) {
      throw exhausted(bytes, "a host tensor of " + tensorBytes + " bytes", e);
    }
  }

  /** The error for {@code bytes} bytes of direct memory the JVM refused for {@code what}. */
  static XlaException exhausted(long bytes, String what, OutOfMemoryError cause) {
    return new XlaException(ErrorCode.RESOURCE_EXHAUSTED,
        "cannot allocate " + bytes + " bytes of direct memory for " + what + ": the JVM's direct memory limit is "
            + limitBytes() + " bytes (" + limitSource() + "), of which " + usedBytes() + " bytes are in use;"
            + " raise it with -XX:MaxDirectMemorySize=<size> (e.g. in MAVEN_OPTS or JAVA_TOOL_OPTIONS),"
            + " or close host tensors (HostTensor.close) when done with them", cause);
  }

  /** The JVM's direct-memory limit in bytes: -XX:MaxDirectMemorySize, or the heap's maximum when unset. */
  static long limitBytes() {
    long set = setLimitBytes();
    return set > 0 ? set : Runtime.getRuntime().maxMemory();
  }

  private static String limitSource() {
    return setLimitBytes() > 0 ? "-XX:MaxDirectMemorySize" : "the default, the heap's maximum size (-Xmx)";
  }

  private static long setLimitBytes() {
    try {
      var bean = ManagementFactory.getPlatformMXBean(com.sun.management.HotSpotDiagnosticMXBean.class);
      return Long.parseLong(bean.getVMOption("MaxDirectMemorySize").getValue());
    } catch (RuntimeException | LinkageError e) {
      return 0; // not a HotSpot JVM: report the default
    }
  }

  /** Bytes of direct buffers the JVM counts now. */
  static long usedBytes() {
    for (BufferPoolMXBean pool : ManagementFactory.getPlatformMXBeans(BufferPoolMXBean.class)) {
      if (pool.getName().equals("direct")) {
        return pool.getMemoryUsed();
      }
    }
    return -1;
  }
}
