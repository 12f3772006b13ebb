package dev.xlaactors.runtime;

import dev.xlaactors.error.InvalidArgumentException;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.function.Function;

/**
 * Options for compiling a program, serialised as XLA's {@code CompileOptionsProto}: the replica and
 * partition counts of the {@code executable_build_options} message (both 1 by default), and whether the
 * executable is portable, i.e. compiled without a fixed device so that one executable runs on whichever
 * device a run names (the default for one replica and one partition), and the XLA options of this one
 * compilation. An empty proto makes the plugin abort the process, which is why this class always writes the
 * build options.
 *
 * <p>XLA options are fields of XLA's {@code DebugOptions} by name with their values as text, e.g. {@code
 * xla_cpu_use_xnnpack = false}: the proto's {@code env_option_overrides}, what JAX's {@code
 * compiler_options} sends. The plugin applies them over its defaults (and {@code XLA_FLAGS}) for this
 * program only. The client checks each name and value against the plugin build's flag table before the
 * plugin sees them (docs/reliability.md, section 16).
 *
 * @param numReplicas {@code executable_build_options.num_replicas}
 * @param numPartitions {@code executable_build_options.num_partitions}
 * @param portable {@code compile_portable_executable}: runnable on any device of the client
 * @param xlaOptions XLA option name to its value as text, for this compilation only (sorted, unmodifiable)
 */
public record CompileOptions(int numReplicas, int numPartitions, boolean portable, Map<String, String> xlaOptions) {
  private static final CompileOptions DEFAULT = new CompileOptions(1, 1, true, Map.of());

  // Field numbers from xla/pjrt/proto/compile_options.proto and xla/xla.proto.
  private static final int COMPILE_OPTIONS_EXECUTABLE_BUILD_OPTIONS = 3;
  private static final int COMPILE_OPTIONS_PORTABLE = 4;
  private static final int COMPILE_OPTIONS_ENV_OPTION_OVERRIDES = 7; // map<string, OptionOverrideProto>
  private static final int MAP_ENTRY_KEY = 1;
  private static final int MAP_ENTRY_VALUE = 2;
  private static final int OPTION_OVERRIDE_STRING = 1;
  private static final int OPTION_OVERRIDE_BOOL = 2;
  private static final int OPTION_OVERRIDE_INT = 3;
  private static final int OPTION_OVERRIDE_DOUBLE = 4;
  private static final int BUILD_OPTIONS_NUM_REPLICAS = 4;
  private static final int BUILD_OPTIONS_NUM_PARTITIONS = 5;
  private static final int WIRE_VARINT = 0;
  private static final int WIRE_FIXED64 = 1;
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
    Objects.requireNonNull(xlaOptions, "xlaOptions");
    xlaOptions.forEach((name, value) -> {
      if (name == null || !name.matches("xla_[a-z0-9_]+")) {
        throw new InvalidArgumentException("XLA option name '" + name + "' is not the name of an XLA DebugOptions "
            + "field (xla_ followed by lower-case letters, digits and underscores), e.g. xla_cpu_use_xnnpack");
      }
      if (value == null) {
        throw new InvalidArgumentException("XLA option " + name + " has no value; give its value as text, e.g. false");
      }
    });
    xlaOptions = Collections.unmodifiableSortedMap(new TreeMap<>(xlaOptions));
  }

  /** Replica and partition counts and portability, with no XLA options. */
  public CompileOptions(int numReplicas, int numPartitions, boolean portable) {
    this(numReplicas, numPartitions, portable, Map.of());
  }

  /** Replica and partition counts; portable when both are 1. */
  public CompileOptions(int numReplicas, int numPartitions) {
    this(numReplicas, numPartitions, numReplicas == 1 && numPartitions == 1);
  }

  /** One replica, one partition, portable, no XLA options. */
  public static CompileOptions defaults() {
    return DEFAULT;
  }

  /** These options with {@code xlaOptions} (XLA option name to value as text) in place of this one's. */
  public CompileOptions withXlaOptions(Map<String, String> xlaOptions) {
    return new CompileOptions(numReplicas, numPartitions, portable, xlaOptions);
  }

  /**
   * The serialised {@code CompileOptionsProto}, each XLA option typed by its value: {@code true} or {@code
   * false} (any case) as a boolean, a decimal integer as an integer, anything else as text (which the plugin
   * parses by the option's type). The client types them by the plugin build's flag table instead.
   */
  public byte[] toProto() {
    return toProto(name -> null);
  }

  /**
   * As {@link #toProto()}, with each XLA option's kind from {@code kindOf} ({@code bool}, {@code int32},
   * {@code int64}, {@code float}, or null when not known): the plugin takes a boolean, integer or number option
   * only as that type ("'false' is not a valid bool value" for the text).
   */
  byte[] toProto(Function<String, String> kindOf) {
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
    for (Map.Entry<String, String> option : xlaOptions.entrySet()) {
      ByteArrayOutputStream value = new ByteArrayOutputStream();
      writeOptionValue(value, kindOf.apply(option.getKey()), option.getValue());
      ByteArrayOutputStream entry = new ByteArrayOutputStream();
      writeBytes(entry, MAP_ENTRY_KEY, option.getKey().getBytes(StandardCharsets.UTF_8));
      writeBytes(entry, MAP_ENTRY_VALUE, value.toByteArray());
      writeBytes(out, COMPILE_OPTIONS_ENV_OPTION_OVERRIDES, entry.toByteArray());
    }
    return out.toByteArray();
  }

  private static void writeOptionValue(ByteArrayOutputStream out, String kind, String text) {
    String kindOrGuess = kind != null ? kind
        : text.equalsIgnoreCase("true") || text.equalsIgnoreCase("false") ? "bool"
        : text.matches("-?[0-9]{1,18}") ? "int64" : "string";
    switch (kindOrGuess) {
      case "bool", "false" -> {
        writeTag(out, OPTION_OVERRIDE_BOOL, WIRE_VARINT);
        writeVarint(out, text.equalsIgnoreCase("true") || text.equals("1") ? 1 : 0);
      }
      case "int32", "int64" -> {
        writeTag(out, OPTION_OVERRIDE_INT, WIRE_VARINT);
        writeVarint(out, Long.parseLong(text));
      }
      case "float" -> {
        double number;
        try {
          number = Double.parseDouble(text);
        } catch (NumberFormatException e) { // inf, nan: the plugin parses the text
          writeBytes(out, OPTION_OVERRIDE_STRING, text.getBytes(StandardCharsets.UTF_8));
          return;
        }
        writeTag(out, OPTION_OVERRIDE_DOUBLE, WIRE_FIXED64);
        long bits = Double.doubleToLongBits(number);
        for (int i = 0; i < 8; i++) {
          out.write((int) (bits >>> (8 * i)) & 0xff);
        }
      }
      default -> writeBytes(out, OPTION_OVERRIDE_STRING, text.getBytes(StandardCharsets.UTF_8));
    }
  }

  private static void writeBytes(ByteArrayOutputStream out, int field, byte[] bytes) {
    writeTag(out, field, WIRE_LENGTH_DELIMITED);
    writeVarint(out, bytes.length);
    out.writeBytes(bytes);
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
