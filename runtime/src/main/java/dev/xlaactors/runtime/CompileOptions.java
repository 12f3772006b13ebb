package dev.xlaactors.runtime;

import dev.xlaactors.error.InvalidArgumentException;
import java.io.ByteArrayOutputStream;

/**
 * Options for compiling a program, serialised as XLA's {@code CompileOptionsProto}. The runtime runs
 * every program on one device, so the only options are the replica and partition counts of the
 * {@code executable_build_options} message (both 1 by default). An empty proto makes the plugin abort
 * the process, which is why this class always writes the build options.
 *
 * @param numReplicas {@code executable_build_options.num_replicas}
 * @param numPartitions {@code executable_build_options.num_partitions}
 */
public record CompileOptions(int numReplicas, int numPartitions) {
  private static final CompileOptions DEFAULT = new CompileOptions(1, 1);

  // Field numbers from xla/pjrt/proto/compile_options.proto and xla/xla.proto.
  private static final int COMPILE_OPTIONS_EXECUTABLE_BUILD_OPTIONS = 3;
  private static final int BUILD_OPTIONS_NUM_REPLICAS = 4;
  private static final int BUILD_OPTIONS_NUM_PARTITIONS = 5;
  private static final int WIRE_VARINT = 0;
  private static final int WIRE_LENGTH_DELIMITED = 2;

  public CompileOptions {
    if (numReplicas < 1 || numPartitions < 1) {
      throw new InvalidArgumentException(
          "replica and partition counts must be >= 1, got " + numReplicas + " and " + numPartitions);
    }
  }

  /** One replica, one partition. */
  public static CompileOptions defaults() {
    return DEFAULT;
  }

  /** The serialised {@code CompileOptionsProto}. */
  public byte[] toProto() {
    ByteArrayOutputStream build = new ByteArrayOutputStream();
    writeTag(build, BUILD_OPTIONS_NUM_REPLICAS, WIRE_VARINT);
    writeVarint(build, numReplicas);
    writeTag(build, BUILD_OPTIONS_NUM_PARTITIONS, WIRE_VARINT);
    writeVarint(build, numPartitions);
    byte[] buildBytes = build.toByteArray();

    ByteArrayOutputStream out = new ByteArrayOutputStream();
    writeTag(out, COMPILE_OPTIONS_EXECUTABLE_BUILD_OPTIONS, WIRE_LENGTH_DELIMITED);
    writeVarint(out, buildBytes.length);
    out.writeBytes(buildBytes);
    return out.toByteArray();
  }

  private static void writeTag(ByteArrayOutputStream out, int field, int wireType) {
    writeVarint(out, ((long) field << 3) | wireType);
  }

  private static void writeVarint(ByteArrayOutputStream out, long value) {
    long v = value;
    while ((v & ~0x7fL) != 0) {
      out.write((int) ((v & 0x7f) | 0x80));
      v >>>= 7;
    }
    out.write((int) v);
  }
}
