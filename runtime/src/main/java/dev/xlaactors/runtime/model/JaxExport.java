package dev.xlaactors.runtime.model;

import dev.xlaactors.error.CompileException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.CompileOptions;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.Shape;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.fbs.AbstractValue;
import dev.xlaactors.runtime.model.fbs.AbstractValueKind;
import dev.xlaactors.runtime.model.fbs.Exported;
import dev.xlaactors.runtime.model.fbs.PyTreeDef;
import dev.xlaactors.runtime.model.fbs.PyTreeDefKind;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * A {@code jax.export} artifact, the bytes of {@code jax.export.export(jax.jit(f))(*args).serialize()}: a
 * FlatBuffer (schema {@code runtime/src/main/flatbuffers/jax_export.fbs}, matching jax 0.10.2) holding the
 * function's input and output trees and avals, the platforms it was lowered for, its effects, the calling
 * convention, and the module itself as a StableHLO portable artifact.
 *
 * <p>Reading validates everything before anything is used: an artifact that is truncated, not a FlatBuffer
 * of this schema, or of a serialization or calling-convention version this reader does not know is an
 * {@link InvalidArgumentException} naming what was found and what is read.
 *
 * <p>Running: {@link #compile(XlaClient)} compiles the module. Like the module, the executable takes
 * {@link #parameterNames()}: JAX's platform-index argument first when the export is for several platforms,
 * then only the inputs the module keeps (JAX drops unused ones, {@link #keptInputs()}). {@link
 * #arguments(Executable, List)} turns the export's inputs into those arguments, as {@code Exported.call}
 * does, and {@link #run(Executable, List)} runs with them.
 *
 * <p>Immutable and thread-safe.
 */
public final class JaxExport {
  /** Serialization versions read: JAX's versions 1 to 11 only add fields this reader does not need. */
  public static final int MIN_SERIALIZATION_VERSION = 1;
  public static final int MAX_SERIALIZATION_VERSION = 11;
  /** Calling-convention versions read: those jax 0.10.2 can write and call. */
  public static final int MIN_CALLING_CONVENTION_VERSION = 9;
  public static final int MAX_CALLING_CONVENTION_VERSION = 10;
  /** The name of the platform-index parameter of multi-platform exports (JAX's {@code jax.global_constant}). */
  public static final String PLATFORM_INDEX = "_platform_index";

  // Guards against malformed trees: real models have thousands of leaves, never a million or depth 256.
  private static final int MAX_TREE_DEPTH = 256;
  private static final int MAX_TREE_NODES = 1_000_000;

  private final String source;
  private final int serializationVersion;
  private final String functionName;
  private final List<String> inputPaths;
  private final List<Aval> inputAvals;
  private final List<String> outputPaths;
  private final List<Aval> outputAvals;
  private final List<String> platforms;
  private final List<String> orderedEffects;
  private final int callingConventionVersion;
  private final List<Integer> keptInputs;
  private final long deviceCount;
  private final byte[] module;

  /**
   * The type of one input or output as JAX wrote it: a dtype and one entry per dimension, a size or a
   * symbolic expression such as {@code b} or {@code 2*b}.
   *
   * @param dtype the runtime's short name ({@code f32}, {@code s32}, {@code pred}, ...) where the runtime has
   *     the dtype, else JAX's name ({@code i4}, {@code f0}, {@code key_fry}, ...)
   * @param dims each dimension as JAX wrote it
   */
  public record Aval(String dtype, List<String> dims) {
    public Aval {
      Objects.requireNonNull(dtype, "dtype");
      dims = List.copyOf(dims);
    }

    /** Whether some dimension is symbolic rather than a size. */
    public boolean isSymbolic() {
      return dims.stream().anyMatch(d -> size(d) < 0);
    }

    /** The first symbolic dimension, or null when every dimension is a size. */
    public String firstSymbolicDimension() {
      return dims.stream().filter(d -> size(d) < 0).findFirst().orElse(null);
    }

    /** The runtime type; an {@link InvalidArgumentException} for a symbolic shape or a dtype the runtime lacks. */
    public TensorType toTensorType(String what) {
      DType type = null;
      for (DType d : DType.values()) {
        if (d.shortName().equals(dtype)) {
          type = d;
        }
      }
      if (type == null) {
        throw new InvalidArgumentException(
            what + " has dtype " + dtype + ", which the runtime does not support (supported: "
            + java.util.Arrays.stream(DType.values()).map(DType::shortName).toList() + ")");
      }
      String symbolic = firstSymbolicDimension();
      if (symbolic != null) {
        throw new InvalidArgumentException(what + " has symbolic dimension '" + symbolic + "' in " + this);
      }
      return new TensorType(type, Shape.of(dims.stream().mapToLong(JaxExport::size).toArray()));
    }

    /** As JAX prints it, e.g. {@code f32[b,16]}. */
    @Override
    public String toString() {
      return dtype + "[" + String.join(",", dims) + "]";
    }
  }

  private JaxExport(String source, Exported e) {
    this.source = source;
    this.serializationVersion = e.serializationVersion();
    if (serializationVersion < MIN_SERIALIZATION_VERSION || serializationVersion > MAX_SERIALIZATION_VERSION) {
      throw new InvalidArgumentException(
          "jax.export artifact " + source + " has serialization version " + serializationVersion + "; this reader reads "
              + "versions " + MIN_SERIALIZATION_VERSION + " to " + MAX_SERIALIZATION_VERSION + " (jax 0.10.2 writes 3). "
              + "Export it with a jax that writes one of those, or extend runtime/src/main/flatbuffers/jax_export.fbs");
    }
    this.callingConventionVersion = e.callingConventionVersion();
    if (callingConventionVersion < MIN_CALLING_CONVENTION_VERSION
        || callingConventionVersion > MAX_CALLING_CONVENTION_VERSION) {
      throw new InvalidArgumentException(
          "jax.export artifact " + source + " uses calling convention version " + callingConventionVersion
              + "; this reader runs versions " + MIN_CALLING_CONVENTION_VERSION + " to " + MAX_CALLING_CONVENTION_VERSION
              + " (those of jax 0.10.2). Export with jax_export_calling_convention_version set to one of those");
    }
    this.functionName = Objects.requireNonNullElse(e.functionName(), "");
    this.inputAvals = avals(e, true);
    this.outputAvals = avals(e, false);
    this.inputPaths = inputPaths(e.inTree());
    this.outputPaths = outputPaths(e.outTree());
    if (inputPaths.size() != inputAvals.size() || outputPaths.size() != outputAvals.size()) {
      throw malformed("its trees have " + inputPaths.size() + " input and " + outputPaths.size() + " output leaves, but it has "
          + inputAvals.size() + " input and " + outputAvals.size() + " output avals");
    }
    this.platforms = strings(e.platformsLength(), e::platforms);
    if (platforms.isEmpty()) {
      throw malformed("it names no platform");
    }
    this.orderedEffects = strings(e.orderedEffectsLength(), j -> e.orderedEffects(j).typeName());
    List<Integer> kept = new ArrayList<>();
    for (int j = 0; j < e.moduleKeptVarIdxLength(); j++) {
      int index = e.moduleKeptVarIdx(j);
      if (index >= inputAvals.size() || (!kept.isEmpty() && index <= kept.get(kept.size() - 1))) {
        throw malformed("its kept-input indices are not increasing indices below " + inputAvals.size());
      }
      kept.add(index);
    }
    this.keptInputs = List.copyOf(kept);
    this.deviceCount = e.nrDevices() != 0 ? e.nrDevices() : e.nrDevicesShort();
    ByteBuffer bytes = e.mlirModuleSerializedAsByteBuffer();
    if (bytes == null || !bytes.hasRemaining()) {
      throw malformed("it holds no module (mlir_module_serialized is empty)");
    }
    this.module = new byte[bytes.remaining()];
    bytes.get(module);
    if (module.length < 4 || module[0] != 'M' || module[1] != 'L' || (module[2] & 0xff) != 0xef || module[3] != 'R') {
      throw malformed("its module is not MLIR bytecode (a portable artifact starts with the bytes ML\\xefR)");
    }
  }

  /** Reads an artifact file, e.g. one written by {@code open(path, "wb").write(exported.serialize())}. */
  public static JaxExport read(Path file) throws IOException {
    long size = Files.size(file);
    if (size > Integer.MAX_VALUE - 8) { // a FlatBuffer is below 2 GiB by construction
      throw new InvalidArgumentException("jax.export artifact " + file + " is " + size + " bytes; a FlatBuffer, and so "
          + "an Exported.serialize() result, is below 2 GiB: keep large weights out of the export (pass them as inputs)");
    }
    return fromBytes(file.getFileName().toString(), Files.readAllBytes(file));
  }

  /** Reads artifact bytes ({@code Exported.serialize()}). */
  public static JaxExport fromBytes(byte[] bytes) {
    return fromBytes("(bytes)", bytes);
  }

  /** Reads artifact bytes; {@code source} names them in messages. */
  public static JaxExport fromBytes(String source, byte[] bytes) {
    Objects.requireNonNull(source, "source");
    Objects.requireNonNull(bytes, "bytes");
    // A FlatBuffer starts with the offset of its root table, whose first field is its vtable offset.
    if (bytes.length < 12) {
      throw new InvalidArgumentException("jax.export artifact " + source + " is " + bytes.length
          + " bytes, too short to be one (truncated?): expected the bytes of Exported.serialize()");
    }
    ByteBuffer buffer = ByteBuffer.wrap(bytes).asReadOnlyBuffer().order(ByteOrder.LITTLE_ENDIAN);
    int root = buffer.getInt(0);
    if (root < 4 || root > bytes.length - 4) {
      throw new InvalidArgumentException("jax.export artifact " + source + " is not a FlatBuffer: its root offset "
          + Integer.toUnsignedString(root) + " is outside its " + bytes.length + " bytes (truncated or another format?)");
    }
    try {
      return new JaxExport(source, Exported.getRootAsExported(buffer));
    } catch (XlaException e) {
      throw e;
    } catch (RuntimeException | StackOverflowError e) {
      // The FlatBuffers runtime reads lazily and bounds-checks every access: a truncated or foreign buffer
      // surfaces as an index or buffer exception at the first field that points outside the bytes.
      InvalidArgumentException bad = new InvalidArgumentException("jax.export artifact " + source
          + " cannot be read as Exported (truncated, corrupted, or not a jax.export artifact): " + e);
      bad.initCause(e);
      throw bad;
    }
  }

  private InvalidArgumentException malformed(String what) {
    return new InvalidArgumentException("jax.export artifact " + source + " is malformed: " + what);
  }

  private interface Element {
    String get(int j);
  }

  private static List<String> strings(int n, Element element) {
    // Not sized by n: a corrupted length reads past the bytes (and throws) long before n elements.
    List<String> out = new ArrayList<>();
    for (int j = 0; j < n; j++) {
      out.add(Objects.requireNonNullElse(element.get(j), ""));
    }
    return List.copyOf(out);
  }

  private List<Aval> avals(Exported e, boolean inputs) {
    List<Aval> out = new ArrayList<>();
    int indexed = inputs ? e.inAvalsIdxsLength() : e.outAvalsIdxsLength();
    if (indexed > 0) { // version 10 on: indices into unique_avals
      for (int j = 0; j < indexed; j++) {
        long index = inputs ? e.inAvalsIdxs(j) : e.outAvalsIdxs(j);
        if (index >= e.uniqueAvalsLength()) {
          throw malformed("aval index " + index + " is past its " + e.uniqueAvalsLength() + " unique avals");
        }
        out.add(aval(e.uniqueAvals((int) index)));
      }
    } else {
      int n = inputs ? e.inAvalsLength() : e.outAvalsLength();
      for (int j = 0; j < n; j++) {
        out.add(aval(inputs ? e.inAvals(j) : e.outAvals(j)));
      }
    }
    return List.copyOf(out);
  }

  private Aval aval(AbstractValue v) {
    if (v.kind() != AbstractValueKind.shapedArray) {
      throw malformed("an aval of kind " + v.kind() + " (only arrays, kind 0, are inputs and outputs)");
    }
    List<String> dims = strings(v.shapeLength(), v::shape);
    return new Aval(dtypeName(v.dtype()), dims);
  }

  private String dtypeName(byte kind) {
    String[] names = dev.xlaactors.runtime.model.fbs.DType.names;
    if (kind < 0 || kind >= names.length) {
      throw malformed("dtype kind " + kind + " is unknown (known: 0 to " + (names.length - 1) + ")");
    }
    String jax = names[kind];
    return switch (jax) {
      case "bool" -> "pred";
      case "i8", "i16", "i32", "i64" -> "s" + jax.substring(1);
      case "ui8", "ui16", "ui32", "ui64" -> "u" + jax.substring(2);
      case "f8_e4m3fn" -> "f8e4m3fn";
      case "f8_e5m2" -> "f8e5m2";
      default -> jax; // f16, f32, f64, c64, c128, bf16 are spelled alike; others the runtime lacks
    };
  }

  /** A dimension's size, or -1 when it is symbolic. */
  private static long size(String dim) {
    if (dim.isEmpty() || dim.length() > 18) {
      return -1;
    }
    for (int i = 0; i < dim.length(); i++) {
      if (!Character.isDigit(dim.charAt(i))) {
        return -1;
      }
    }
    return Long.parseLong(dim);
  }

  /** The in-tree is the tree of {@code (args, kwargs)}: paths are relative to args, then to kwargs. */
  private List<String> inputPaths(PyTreeDef tree) {
    if (tree == null || tree.kind() != PyTreeDefKind.tuple || tree.childrenLength() != 2) {
      throw malformed("its input tree is not the tree of an (args, kwargs) pair");
    }
    List<String> paths = new ArrayList<>();
    int[] budget = {MAX_TREE_NODES};
    flatten(tree.children(0), "", 0, paths, budget);
    flatten(tree.children(1), "", 0, paths, budget);
    return List.copyOf(paths);
  }

  private List<String> outputPaths(PyTreeDef tree) {
    if (tree == null) {
      throw malformed("it has no output tree");
    }
    List<String> paths = new ArrayList<>();
    flatten(tree, "", 0, paths, new int[] {MAX_TREE_NODES});
    return List.copyOf(paths);
  }

  /** Appends the keystr path of every leaf under {@code node}, in JAX's flattening order. */
  private void flatten(PyTreeDef node, String path, int depth, List<String> paths, int[] budget) {
    if (depth > MAX_TREE_DEPTH || --budget[0] < 0) {
      throw malformed("a tree is deeper than " + MAX_TREE_DEPTH + " or has more than " + MAX_TREE_NODES + " nodes");
    }
    byte kind = node.kind();
    int n = node.childrenLength();
    switch (kind) {
      case PyTreeDefKind.leaf -> paths.add(path);
      case PyTreeDefKind.none -> { }
      case PyTreeDefKind.tuple, PyTreeDefKind.list, PyTreeDefKind.custom -> {
        // Custom nodes (namedtuples, dataclasses) keep their field names inside opaque auxdata: their
        // children get flattened indices, as keystr gives for nodes registered without keys.
        for (int i = 0; i < n; i++) {
          flatten(node.children(i), path + "[" + i + "]", depth + 1, paths, budget);
        }
      }
      case PyTreeDefKind.dict -> {
        if (node.childrenNamesLength() != n) {
          throw malformed("a dict node has " + n + " children but " + node.childrenNamesLength() + " keys");
        }
        for (int i = 0; i < n; i++) {
          flatten(node.children(i), path + "[" + pythonRepr(node.childrenNames(i)) + "]", depth + 1, paths, budget);
        }
      }
      default -> throw malformed("a tree node has unknown kind " + kind + " (known: 0 to 5)");
    }
  }

  /** Python's repr of a str, as keystr writes dict keys: {@code 'a'}, or {@code "it's"}. */
  static String pythonRepr(String s) {
    char quote = s.indexOf('\'') >= 0 && s.indexOf('"') < 0 ? '"' : '\'';
    StringBuilder b = new StringBuilder().append(quote);
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '\\' -> b.append("\\\\");
        case '\n' -> b.append("\\n");
        case '\r' -> b.append("\\r");
        case '\t' -> b.append("\\t");
        default -> {
          if (c == quote) {
            b.append('\\').append(c);
          } else if (c < 0x20 || c == 0x7f) {
            b.append(String.format("\\x%02x", (int) c));
          } else {
            b.append(c);
          }
        }
      }
    }
    return b.append(quote).toString();
  }

  /** Where the artifact came from (a file name, or what the caller passed). */
  public String source() {
    return source;
  }

  /** The {@code serialization_version} field (jax 0.10.2 writes 3 for older readers' sake). */
  public int serializationVersion() {
    return serializationVersion;
  }

  /** The exported function's name, e.g. {@code mlp}. */
  public String functionName() {
    return functionName;
  }

  /**
   * JAX's {@code keystr} of each flattened input leaf: the positional arguments' paths (e.g. {@code
   * [0]['blocks.0.attn.wo']}, {@code [1]}), then the keyword arguments' (e.g. {@code ['mask']}). Under
   * custom nodes (namedtuples, dataclasses) children are numbered ({@code [i]}), not named.
   */
  public List<String> inputPaths() {
    return inputPaths;
  }

  /**
   * The input paths made plain, for matching weights by name: an input {@code [i]['key']} (argument i is a
   * flat dict with string keys) becomes {@code key}, unquoted, unless two inputs would get the same name;
   * every other input keeps its keystr. For {@code f(params, x)} with {@code params = {'wte': ..., 'wpe': ...}}: {@code wpe, wte, [1]}.
   */
  public List<String> inputNames() {
    // Arguments that are flat dicts: every input under [i] is [i]['key'].
    Map<String, Boolean> flatArguments = new HashMap<>();
    for (String path : inputPaths) {
      int close = path.indexOf(']');
      if (path.startsWith("[") && close > 0) {
        flatArguments.merge(path.substring(0, close + 1), plainKey(path) != null, Boolean::logicalAnd);
      }
    }
    List<String> plain = new ArrayList<>(inputPaths.size());
    Map<String, Integer> counts = new HashMap<>();
    for (String path : inputPaths) {
      String key = plainKey(path);
      String name = key != null && flatArguments.get(path.substring(0, path.indexOf(']') + 1)) ? key : path;
      plain.add(name);
      counts.merge(name, 1, Integer::sum);
    }
    List<String> names = new ArrayList<>(plain.size());
    for (int i = 0; i < plain.size(); i++) {
      String name = plain.get(i);
      boolean clash = counts.get(name) > 1 || (!name.equals(inputPaths.get(i)) && inputPaths.contains(name));
      names.add(clash ? inputPaths.get(i) : name);
    }
    return List.copyOf(names);
  }

  /** The key of a path {@code [i]['key']} (one string key under a positional argument), unquoted; else null. */
  private static String plainKey(String path) {
    int close = path.indexOf("][");
    if (!path.startsWith("[") || close < 2 || !path.substring(1, close).chars().allMatch(Character::isDigit)) {
      return null;
    }
    int at = close + 2;
    char quote = path.charAt(at);
    if (quote != '\'' && quote != '"') {
      return null;
    }
    StringBuilder key = new StringBuilder();
    for (int i = at + 1; i < path.length(); i++) {
      char c = path.charAt(i);
      if (c == quote) {
        return i == path.length() - 2 && path.charAt(i + 1) == ']' ? key.toString() : null;
      }
      if (c == '\\' && i + 1 < path.length()) {
        char e = path.charAt(++i);
        switch (e) {
          case 'n' -> key.append('\n');
          case 'r' -> key.append('\r');
          case 't' -> key.append('\t');
          case 'x', 'u' -> {
            int digits = e == 'x' ? 2 : 4;
            if (i + digits >= path.length()) {
              return null;
            }
            key.append((char) Integer.parseInt(path.substring(i + 1, i + 1 + digits), 16));
            i += digits;
          }
          default -> key.append(e); // \\, \', \"
        }
      } else {
        key.append(c);
      }
    }
    return null;
  }

  /** Each input's dtype and shape as exported (symbolic dimensions included). */
  public List<Aval> inputAvals() {
    return inputAvals;
  }

  /** Each output's dtype and shape as exported. */
  public List<Aval> outputAvals() {
    return outputAvals;
  }

  /** The inputs' types; an {@link InvalidArgumentException} naming the input if one has a symbolic dimension. */
  public List<TensorType> inputTypes() {
    return types(inputAvals, inputPaths, "input");
  }

  /** The outputs' types; an {@link InvalidArgumentException} naming the output if one has a symbolic dimension. */
  public List<TensorType> outputTypes() {
    return types(outputAvals, outputPaths, "output");
  }

  private static List<TensorType> types(List<Aval> avals, List<String> paths, String what) {
    List<TensorType> types = new ArrayList<>(avals.size());
    for (int i = 0; i < avals.size(); i++) {
      types.add(avals.get(i).toTensorType(what + " " + i + " (" + paths.get(i) + ")"));
    }
    return List.copyOf(types);
  }

  /** JAX's {@code keystr} of each output leaf, e.g. {@code ['logits']}; empty for a single array result. */
  public List<String> outputPaths() {
    return outputPaths;
  }

  /** The platforms the module was lowered for, e.g. {@code [cpu]} or {@code [cpu, cuda]}. */
  public List<String> platforms() {
    return platforms;
  }

  /** The ordered effects' type names (empty for nearly every export: they come from host callbacks). */
  public List<String> orderedEffects() {
    return orderedEffects;
  }

  /** The calling-convention version ({@value #MIN_CALLING_CONVENTION_VERSION} to {@value #MAX_CALLING_CONVENTION_VERSION}). */
  public int callingConventionVersion() {
    return callingConventionVersion;
  }

  /** The indices of the inputs the module takes, increasing; JAX drops inputs the function does not use. */
  public List<Integer> keptInputs() {
    return keptInputs;
  }

  /** The number of devices the export is for (1 for everything this runtime runs). */
  public long deviceCount() {
    return deviceCount;
  }

  /** The module: a StableHLO portable artifact (VHLO bytecode), as {@code Exported.mlir_module_serialized}. */
  public byte[] module() {
    return module.clone();
  }

  /**
   * The names of the compiled module's parameters, in order: {@value #PLATFORM_INDEX} first when the export
   * is for several platforms, then the {@link #inputNames()} of the {@link #keptInputs()}.
   */
  public List<String> parameterNames() {
    List<String> names = new ArrayList<>();
    if (platforms.size() > 1) {
      names.add(PLATFORM_INDEX);
    }
    List<String> inputs = inputNames();
    keptInputs.forEach(i -> names.add(inputs.get(i)));
    return List.copyOf(names);
  }

  /** The compiled module's parameter types, matching {@link #parameterNames()}. */
  public List<TensorType> parameterTypes() {
    List<TensorType> all = inputTypes();
    List<TensorType> types = new ArrayList<>();
    if (platforms.size() > 1) {
      types.add(TensorType.of(DType.S32));
    }
    keptInputs.forEach(i -> types.add(all.get(i)));
    return List.copyOf(types);
  }

  /**
   * The values to bind to parameters that are not inputs, by name: {@value #PLATFORM_INDEX} (this client's
   * platform's index in {@link #platforms()}) for a multi-platform export; empty otherwise.
   */
  public Map<String, HostTensor> constants(XlaClient client) {
    Map<String, HostTensor> constants = new LinkedHashMap<>();
    if (platforms.size() > 1) {
      constants.put(PLATFORM_INDEX, HostTensor.scalar(platformIndex(client)));
    }
    return java.util.Collections.unmodifiableMap(constants);
  }

  /** The index of {@code client}'s platform in {@link #platforms()}; a {@link CompileException} if absent. */
  public int platformIndex(XlaClient client) {
    String platform = client.platformName().toLowerCase(java.util.Locale.ROOT);
    int index = platforms.indexOf(platform);
    if (index < 0) {
      throw new CompileException(ErrorCode.FAILED_PRECONDITION, "jax.export artifact " + source + " was exported for "
          + platforms + ", not for this client's platform '" + platform + "': export with platforms=['" + platform
          + "', ...] (jax.export.export(jax.jit(f), platforms=[...]))");
    }
    return index;
  }

  /**
   * Compiles the module for {@code client}. Refused, with a {@link CompileException} that says why and what
   * to export instead, before anything reaches the plugin: an export without {@code client}'s platform, one
   * for several devices, one with symbolic dimensions (see {@link #compile(XlaClient, List)}), one with
   * ordered effects, one that calls Python callbacks.
   */
  public Executable compile(XlaClient client) {
    return compile(client, CompileOptions.defaults());
  }

  /** As {@link #compile(XlaClient)}, with {@code options} (its XLA options, say). */
  public Executable compile(XlaClient client, CompileOptions options) {
    Objects.requireNonNull(client, "client");
    Objects.requireNonNull(options, "options");
    for (int i = 0; i < inputAvals.size(); i++) {
      String symbolic = inputAvals.get(i).firstSymbolicDimension();
      if (symbolic != null) {
        throw new CompileException(ErrorCode.UNIMPLEMENTED, "input " + i + " (" + inputPaths.get(i)
            + ") of jax.export artifact " + source + " has symbolic dimension '" + symbolic + "' in " + inputAvals.get(i)
            + "; the XLA plugin compiles static shapes only and a portable artifact cannot be specialized here. "
            + "Export with concrete shapes, e.g. jax.export.export(jax.jit(f))(jax.ShapeDtypeStruct((8, 16), jnp.float32))");
      }
    }
    return compileChecked(client, options);
  }

  /**
   * Compiles for the concrete input types of a call, as {@code Exported.call} specializes symbolic
   * dimensions. The types must match the avals (dtype, rank, every static dimension, one value per symbol
   * where a symbol is a dimension by itself). Specializing a module with symbolic dimensions needs its
   * {@code @main} rewritten (JAX refines shapes with MLIR passes that this runtime does not have, and the
   * plugin rejects the dynamic ops of an unrefined module), so such an export is refused, naming the
   * dimension and the value it would take; an export without symbolic dimensions compiles.
   */
  public Executable compile(XlaClient client, List<TensorType> concreteInputTypes) {
    Objects.requireNonNull(client, "client");
    Objects.requireNonNull(concreteInputTypes, "concreteInputTypes");
    if (concreteInputTypes.size() != inputAvals.size()) {
      throw new InvalidArgumentException("jax.export artifact " + source + " takes " + inputAvals.size()
          + " inputs " + inputPaths + ", got " + concreteInputTypes.size() + " types");
    }
    Map<String, Long> bound = new LinkedHashMap<>();
    String firstSymbolic = null;
    for (int i = 0; i < inputAvals.size(); i++) {
      Aval aval = inputAvals.get(i);
      TensorType type = Objects.requireNonNull(concreteInputTypes.get(i), "type " + i);
      String what = "input " + i + " (" + inputPaths.get(i) + ")";
      if (!type.dtype().shortName().equals(aval.dtype()) || type.shape().rank() != aval.dims().size()) {
        throw new InvalidArgumentException(what + " of " + source + " is " + aval + ", got " + type);
      }
      for (int d = 0; d < aval.dims().size(); d++) {
        String dim = aval.dims().get(d);
        long actual = type.shape().dim(d);
        long size = size(dim);
        if (size >= 0 && size != actual) {
          throw new InvalidArgumentException(what + " of " + source + " is " + aval + ", got " + type);
        }
        if (size < 0) {
          firstSymbolic = firstSymbolic != null ? firstSymbolic
              : "input " + i + " (" + inputPaths.get(i) + ") has symbolic dimension '" + dim + "' in " + aval;
          if (dim.chars().allMatch(c -> Character.isLetterOrDigit(c) || c == '_')) {
            Long previous = bound.putIfAbsent(dim, actual);
            if (previous != null && previous != actual) {
              throw new InvalidArgumentException(what + " of " + source + " has " + dim + " = " + actual + " in " + type
                  + ", but an earlier input has " + dim + " = " + previous);
            }
          }
        }
      }
    }
    if (firstSymbolic != null) {
      throw new CompileException(ErrorCode.UNIMPLEMENTED, firstSymbolic + " of jax.export artifact " + source
          + " (the call binds " + bound + "): the XLA plugin cannot specialize symbolic shapes of a portable artifact "
          + "(its dynamic ops do not lower to HLO before JAX's shape refinement, which this runtime lacks). Export with "
          + "the concrete shapes instead: jax.export.export(jax.jit(f))(*[jax.ShapeDtypeStruct(shape, dtype) ...])");
    }
    return compileChecked(client, CompileOptions.defaults());
  }

  // Custom-call targets of JAX's Python callbacks: they live in the exporting Python process.
  private static final List<String> PYTHON_CALLBACKS = List.of(
      "xla_ffi_python_cpu_callback", "xla_ffi_python_gpu_callback", "xla_ffi_partitioned_python_cpu_callback",
      "xla_python_cpu_callback", "xla_python_gpu_callback");

  private Executable compileChecked(XlaClient client, CompileOptions options) {
    platformIndex(client); // refuses an export without this platform
    if (deviceCount > 1) {
      throw new CompileException(ErrorCode.UNIMPLEMENTED, "jax.export artifact " + source + " was exported for "
          + deviceCount + " devices; only single-device exports run here");
    }
    if (!orderedEffects.isEmpty()) {
      throw new CompileException(ErrorCode.UNIMPLEMENTED, "jax.export artifact " + source + " has ordered effects "
          + orderedEffects + ": its @main takes and returns !stablehlo.token values, which PJRT cannot pass and which "
          + "this runtime removes only from StableHLO text (ImportedProgram), not from a portable artifact. Export "
          + "without ordered effects, or load exported.mlir_module() text with ImportedProgram");
    }
    String strings = new String(module, StandardCharsets.ISO_8859_1); // bytecode keeps names as plain bytes
    for (String target : PYTHON_CALLBACKS) {
      if (strings.contains(target)) {
        throw new CompileException(ErrorCode.INVALID_ARGUMENT, "jax.export artifact " + source + " calls a Python "
            + "callback (custom call @" + target + ", from jax.pure_callback, io_callback or jax.debug.print): it "
            + "lives in the Python process that exported the program and cannot cross to the JVM. Call a Java "
            + "callback instead: jax.ffi.ffi_call(\"xla_actors.host_callback\", result_shape, has_side_effect=True)"
            + "(x, callback=\"<name>\") and register <name> with CallbackRuntime");
      }
    }
    Executable compiled =
        client.compileModule("jax.export artifact " + source, module, parameterTypes(), options);
    // XLA's compiler frees its working memory (about 80 MB for the 124 M GPT's programs) to malloc, which
    // keeps it mapped; handing it back keeps a served model's resident set near its weights and caches.
    org.bytedeco.javacpp.Pointer.trimMemory();
    return compiled;
  }

  /**
   * The arguments of {@code executable} (compiled from this export) for a call with the export's inputs, in
   * {@link #inputPaths()} order, as {@code Exported.call} makes them: each input is checked against its
   * aval, inputs the module dropped are left out, and the platform index is put first for a
   * multi-platform export.
   */
  public List<HostTensor> arguments(Executable executable, List<HostTensor> inputs) {
    Objects.requireNonNull(executable, "executable");
    Objects.requireNonNull(inputs, "inputs");
    List<TensorType> types = inputTypes();
    if (inputs.size() != types.size()) {
      throw new InvalidArgumentException("jax.export artifact " + source + " takes " + types.size() + " inputs "
          + inputPaths + ", got " + inputs.size());
    }
    for (int i = 0; i < inputs.size(); i++) {
      HostTensor input = Objects.requireNonNull(inputs.get(i), "input " + i);
      if (!input.type().equals(types.get(i))) {
        throw new InvalidArgumentException("input " + i + " (" + inputPaths.get(i) + ") of " + source + " must be "
            + types.get(i) + ", got " + input.type());
      }
    }
    List<HostTensor> arguments = new ArrayList<>(keptInputs.size() + 1);
    if (platforms.size() > 1) {
      arguments.add(HostTensor.scalar(platformIndex(executable.client())));
    }
    keptInputs.forEach(i -> arguments.add(inputs.get(i)));
    return arguments;
  }

  /** Runs {@code executable} (compiled from this export) on the export's inputs; see {@link #arguments}. */
  public List<HostTensor> run(Executable executable, List<HostTensor> inputs) {
    return executable.run(arguments(executable, inputs), null);
  }

  @Override
  public String toString() {
    return "JaxExport(" + source + ": " + functionName + ", inputs " + inputAvals + ", outputs " + outputAvals + ", platforms "
        + platforms + ", calling convention " + callingConventionVersion + ")";
  }
}
