package dev.xlaactors.runtime;

import dev.xlaactors.error.InvalidArgumentException;
import java.io.ByteArrayOutputStream;

/**
 * Options for compiling a program, serialised as XLA's {@code CompileOptionsProto}: the replica and
 * partition counts of the {@code executable_build_options} message (both 1 by default), and whether the
 * executable is portable, i.e. compiled without a fixed device so that one executable runs on whichever
 * device a run names (the default for one replica and one partition). An empty proto makes the plugin
 * abort the process, which is why this class always writes the build options.
 *
 * @param numReplicas {@code executable_build_options.num_replicas}
 * @param numPartitions {@code executable_build_options.num_partitions}
 * @param portable {@code compile_portable_executable}: runnable on any device of the client
 */
public record CompileOptions(int numReplicas, int numPartitions, boolean portable) {
  private static final CompileOptions DEFAULT = new CompileOptions(1, 1, true);

  // Field numbers from xla/pjrt/proto/compile_options.proto and xla/xla.proto.
  private static final int COMPILE_OPTIONS_EXECUTABLE_BUILD_OPTIONS = 3;
  private static final int COMPILE_OPTIONS_PORTABLE = 4;
  private static final int BUILD_OPTIONS_NUM_REPLICAS = 4;
  private static final int BUILD_OPTIONS_NUM_PARTITIONS = 5;
  private static final int WIRE_VARINT = 0;
  private static final int WIRE_LENGTH_DELIMITED = 2;

  public CompileOptions {
    if (numReplicas < 1 || numPartitions < 1) {
      throw new InvalidArgumentException(
          "replica and partition counts must be >= 1, got " + numReplicas + " and " + numPartitions);
    }
    if (portable && (numReplicas != 1 || numPartitions != 1)) {
      throw new InvalidArgumentException(
          "a portable executable has one replica and one partition, got " + numReplicas + " and " + numPartitions);
    }
  }

  /** Replica and partition counts; portable when both are 1. */
  public CompileOptions(int numReplicas, int numPartitions) {
    this(numReplicas, numPartitions, numReplicas == 1 && numPartitions == 1);
  }

  /** One replica, one partition, portable. */
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
    if (portable) {
      writeTag(out, COMPILE_OPTIONS_PORTABLE, WIRE_VARINT);
      writeVarint(out, 1);
    }
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
