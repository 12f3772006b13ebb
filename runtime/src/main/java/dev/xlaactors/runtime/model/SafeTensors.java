package dev.xlaactors.runtime.model;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.Shape;
import dev.xlaactors.runtime.TensorType;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.CharBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.FileChannel;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.stream.Collectors;

/**
 * A safetensors file (the format Hugging Face models ship their weights in), opened for reading: an
 * 8-byte little-endian header length {@code N}, {@code N} bytes of UTF-8 JSON mapping each tensor's name
 * to {@code {"dtype", "shape", "data_offsets": [begin, end]}} (offsets relative to the end of the header)
 * plus an optional {@code "__metadata__"} object of strings, then the tensors' little-endian row-major
 * bytes, unaligned.
 *
 * <p>{@link #open} reads and validates the whole header before it returns, so a bad file fails there and
 * never half-way through loading a model: the length within the file and at most {@value
 * #MAX_HEADER_BYTES} bytes (a length claiming gigabytes fails without allocating anything), strict UTF-8
 * JSON without duplicate names, every entry an object with a known dtype, a shape of non-negative
 * integers whose byte size does not overflow, and {@code data_offsets} inside the data with {@code end -
 * begin} equal to the element count times the dtype size; entries may not overlap. Every failure is an
 * {@link InvalidArgumentException} naming the file, the tensor and what was expected against what was
 * found.
 *
 * <p>Zero copy: {@link #tensor(String)} memory-maps the tensor's bytes read-only and returns a {@link
 * HostTensor} over the mapping, without reading or copying anything (pages are read from the file when
 * first touched). Uploading it to the CPU plugin uses the mapped memory in place when the tensor is at
 * least 64 KiB and its bytes start on a 64-byte boundary (file offset {@code 8 + N + begin} a multiple of
 * 64; {@link #write} lays files out that way for the first tensor and every tensor whose predecessors'
 * sizes are multiples of 64); otherwise the upload makes the one copy.
 *
 * <p>Lifetime: each tensor's mapping lives as long as its {@code HostTensor} (and the views and device
 * buffers made from it: an in-place upload keeps the tensor, and so the mapping, until the buffer is
 * closed); the JDK unmaps it when its buffer is garbage-collected. {@link #close()} closes the file, after
 * which {@link #tensor} fails, but tensors already returned stay valid. The file must not be modified or
 * truncated while anything maps it: reading a page that was cut off the file kills the process (SIGBUS),
 * which no Java check can prevent. Thread-safe.
 */
public final class SafeTensors implements AutoCloseable {
  /** Headers longer than this are refused (real headers are kilobytes; a larger claim is corruption). */
  public static final long MAX_HEADER_BYTES = 100L << 20;

  /** Alignment {@link #write} gives the data section, which makes in-place uploads possible. */
  static final int DATA_ALIGNMENT = 64;

  private static final String METADATA = "__metadata__";

  /** safetensors dtype names and the runtime's dtypes, both ways (C128 has no safetensors name). */
  private static final Map<String, DType> DTYPES = dtypes();

  private final Path file;
  private final FileChannel channel;
  private final long dataStart;
  private final Map<String, Entry> entries;
  private final Map<String, TensorType> types;
  private final Map<String, String> metadata;

  private record Entry(String name, TensorType type, long begin, long end) {}

  private SafeTensors(Path file, FileChannel channel, long dataStart, Map<String, Entry> entries,
      Map<String, String> metadata) {
    this.file = file;
    this.channel = channel;
    this.dataStart = dataStart;
    this.entries = entries;
    Map<String, TensorType> t = new LinkedHashMap<>();
    entries.forEach((name, e) -> t.put(name, e.type()));
    this.types = Collections.unmodifiableMap(t);
    this.metadata = Collections.unmodifiableMap(metadata);
  }

  private static Map<String, DType> dtypes() {
    Map<String, DType> m = new LinkedHashMap<>();
    m.put("BOOL", DType.PRED);
    m.put("U8", DType.U8);
    m.put("I8", DType.S8);
    m.put("U16", DType.U16);
    m.put("I16", DType.S16);
    m.put("U32", DType.U32);
    m.put("I32", DType.S32);
    m.put("U64", DType.U64);
    m.put("I64", DType.S64);
    m.put("F16", DType.F16);
    m.put("BF16", DType.BF16);
    m.put("F32", DType.F32);
    m.put("F64", DType.F64);
    m.put("C64", DType.C64);
    m.put("F8_E5M2", DType.F8E5M2);
    m.put("F8_E4M3", DType.F8E4M3FN); // safetensors' F8_E4M3 is torch.float8_e4m3fn (no infinities)
    return Collections.unmodifiableMap(m);
  }

  /** The safetensors name of {@code dtype}, e.g. {@code F32}; an error for dtypes the format lacks. */
  public static String dtypeName(DType dtype) {
    for (Map.Entry<String, DType> e : DTYPES.entrySet()) {
      if (e.getValue() == dtype) {
        return e.getKey();
      }
    }
    throw new InvalidArgumentException(
        "dtype " + dtype.shortName() + " has no safetensors name; safetensors holds " + DTYPES.keySet());
  }

  /**
   * Opens {@code file} and validates its whole header (see the class doc). The data is not read: tensors
   * are mapped when {@link #tensor} asks for them.
   */
  public static SafeTensors open(Path file) {
    Objects.requireNonNull(file, "file");
    FileChannel channel;
    try {
      channel = FileChannel.open(file, StandardOpenOption.READ);
    } catch (IOException e) {
      throw new XlaException(ErrorCode.NOT_FOUND, "safetensors file " + file + " cannot be opened: " + e, e);
    }
    try {
      SafeTensors opened = read(file, channel);
      channel = null;
      return opened;
    } catch (IOException e) {
      throw new XlaException(ErrorCode.DATA_LOSS, "safetensors file " + file + " cannot be read: " + e, e);
    } finally {
      if (channel != null) {
        try {
          channel.close();
        } catch (IOException ignored) {
          // the failure being reported matters more
        }
      }
    }
  }

  private static SafeTensors read(Path file, FileChannel channel) throws IOException {
    long size = channel.size();
    if (size < 8) {
      throw invalid(file, "is " + size + " bytes, shorter than the 8-byte header length that starts every"
          + " safetensors file (truncated, or not a safetensors file)");
    }
    ByteBuffer lengthBytes = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
    readFully(channel, lengthBytes, 0);
    long headerLength = lengthBytes.getLong(0); // unsigned in the format: a negative long is above 2^63
    if (headerLength < 0 || headerLength > size - 8) {
      throw invalid(file, "header length " + Long.toUnsignedString(headerLength) + " runs past the end of the"
          + " file: only " + (size - 8) + " bytes follow the length (truncated, or not a safetensors file)");
    }
    if (headerLength > MAX_HEADER_BYTES) {
      throw invalid(file, "header length " + headerLength + " exceeds the limit of " + MAX_HEADER_BYTES
          + " bytes (real headers are kilobytes: the length is corrupt, or not a safetensors file)");
    }
    if (headerLength < 2) {
      throw invalid(file, "header length " + headerLength + " is too short for a JSON object, expected at"
          + " least 2 bytes ({})");
    }
    ByteBuffer headerBytes = ByteBuffer.allocate((int) headerLength);
    readFully(channel, headerBytes, 8);
    String json;
    try {
      CharBuffer chars = StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(headerBytes.flip());
      json = chars.toString();
    } catch (CharacterCodingException e) {
      throw invalid(file, "header is not valid UTF-8 (" + e.getMessage() + ")");
    }
    Object root;
    try {
      root = HeaderJson.parse(json);
    } catch (HeaderJson.Malformed e) {
      throw invalid(file, "header is not valid JSON: " + e.getMessage());
    }
    if (!(root instanceof Map<?, ?> members)) {
      throw invalid(file, "header must be a JSON object of tensors, got " + kind(root));
    }
    long dataStart = 8 + headerLength;
    long dataLength = size - dataStart;
    Map<String, Entry> entries = new LinkedHashMap<>();
    Map<String, String> metadata = new LinkedHashMap<>();
    for (Map.Entry<?, ?> member : members.entrySet()) {
      String name = (String) member.getKey();
      if (name.equals(METADATA)) {
        metadata = metadata(file, member.getValue());
      } else {
        entries.put(name, entry(file, name, member.getValue(), dataLength));
      }
    }
    checkNoOverlap(file, entries);
    return new SafeTensors(file, channel, dataStart, entries, metadata);
  }

  private static Map<String, String> metadata(Path file, Object value) {
    if (!(value instanceof Map<?, ?> map)) {
      throw invalid(file, "\"" + METADATA + "\" must be an object of strings, got " + kind(value));
    }
    Map<String, String> metadata = new LinkedHashMap<>();
    for (Map.Entry<?, ?> e : map.entrySet()) {
      if (!(e.getValue() instanceof String s)) {
        throw invalid(file, "\"" + METADATA + "\" entry '" + e.getKey() + "' must be a string, got "
            + kind(e.getValue()));
      }
      metadata.put((String) e.getKey(), s);
    }
    return metadata;
  }

  private static Entry entry(Path file, String name, Object value, long dataLength) {
    if (!(value instanceof Map<?, ?> fields)) {
      throw invalidTensor(file, name, "must be an object {\"dtype\", \"shape\", \"data_offsets\"}, got "
          + kind(value));
    }
    Object dtypeValue = fields.get("dtype");
    if (!(dtypeValue instanceof String dtypeName)) {
      throw invalidTensor(file, name, "needs \"dtype\" as a string, got " + kind(dtypeValue));
    }
    DType dtype = DTYPES.get(dtypeName);
    if (dtype == null) {
      throw invalidTensor(file, name, "has dtype '" + dtypeName + "', which is not supported; supported: "
          + String.join(", ", DTYPES.keySet()));
    }
    long[] dims = integers(file, name, "shape", fields.get("shape"), -1);
    for (int i = 0; i < dims.length; i++) {
      if (dims[i] < 0) {
        throw invalidTensor(file, name, "has shape " + Arrays.toString(dims) + ": dimension " + i
            + " is negative, expected sizes >= 0");
      }
    }
    long bytes;
    try {
      long count = 1;
      for (long d : dims) {
        count = Math.multiplyExact(count, d);
      }
      bytes = Math.multiplyExact(count, (long) dtype.byteSize());
    } catch (ArithmeticException e) {
      throw invalidTensor(file, name, "has shape " + Arrays.toString(dims)
          + " whose byte size overflows a 64-bit integer");
    }
    long[] offsets = integers(file, name, "data_offsets", fields.get("data_offsets"), 2);
    long begin = offsets[0];
    long end = offsets[1];
    if (begin < 0 || end < begin) {
      throw invalidTensor(file, name, "has data_offsets [" + begin + ", " + end + "], expected 0 <= begin <= end");
    }
    if (end > dataLength) {
      throw invalidTensor(file, name, "has data_offsets [" + begin + ", " + end + "] past the end of the data,"
          + " which is " + dataLength + " bytes (truncated file?)");
    }
    TensorType type = new TensorType(dtype, Shape.of(dims));
    if (end - begin != bytes) {
      throw invalidTensor(file, name, "has data_offsets [" + begin + ", " + end + "] holding " + (end - begin)
          + " bytes, expected " + bytes + " for " + type + " (" + type.shape().elementCount() + " elements x "
          + dtype.byteSize() + " bytes)");
    }
    return new Entry(name, type, begin, end);
  }

  /** An array of integers fitting a long; {@code length} -1 for any length. */
  private static long[] integers(Path file, String name, String field, Object value, int length) {
    if (!(value instanceof List<?> list)) {
      throw invalidTensor(file, name, "needs \"" + field + "\" as an array of integers, got " + kind(value));
    }
    if (length >= 0 && list.size() != length) {
      throw invalidTensor(file, name, "has \"" + field + "\" of " + list.size() + " numbers, expected "
          + length + " ([begin, end])");
    }
    long[] out = new long[list.size()];
    for (int i = 0; i < out.length; i++) {
      Object element = list.get(i);
      if (!(element instanceof HeaderJson.Number n) || !n.text().matches("-?[0-9]+")) {
        throw invalidTensor(file, name, "has \"" + field + "\" " + list + ": element " + i
            + " is not an integer");
      }
      try {
        out[i] = Long.parseLong(n.text());
      } catch (NumberFormatException e) {
        throw invalidTensor(file, name, "has \"" + field + "\" element " + i + " = " + n.text()
            + ", which does not fit a 64-bit integer");
      }
    }
    return out;
  }

  private static void checkNoOverlap(Path file, Map<String, Entry> entries) {
    List<Entry> byOffset = new ArrayList<>(entries.values());
    byOffset.removeIf(e -> e.begin() == e.end()); // empty tensors occupy nothing
    byOffset.sort(Comparator.comparingLong(Entry::begin));
    for (int i = 1; i < byOffset.size(); i++) {
      Entry before = byOffset.get(i - 1);
      Entry after = byOffset.get(i);
      if (after.begin() < before.end()) {
        throw invalid(file, "tensors '" + before.name() + "' (data_offsets [" + before.begin() + ", "
            + before.end() + "]) and '" + after.name() + "' (data_offsets [" + after.begin() + ", "
            + after.end() + "]) overlap; expected each tensor's bytes to be its own");
      }
    }
  }

  private static void readFully(FileChannel channel, ByteBuffer into, long position) throws IOException {
    while (into.hasRemaining()) {
      int n = channel.read(into, position + into.position());
      if (n < 0) {
        throw new IOException("unexpected end of file at byte " + (position + into.position()));
      }
    }
  }

  private static String kind(Object value) {
    if (value == null) {
      return "nothing";
    }
    if (value instanceof Map) {
      return "an object";
    }
    if (value instanceof List) {
      return "an array";
    }
    if (value instanceof String s) {
      return "the string \"" + s + "\"";
    }
    return value instanceof HeaderJson.Number ? "the number " + value : value.toString();
  }

  private static InvalidArgumentException invalid(Path file, String what) {
    return new InvalidArgumentException("safetensors file " + file + ": " + what);
  }

  private static InvalidArgumentException invalidTensor(Path file, String name, String what) {
    return invalid(file, "tensor '" + name + "' " + what);
  }

  /** The file this reads. */
  public Path file() {
    return file;
  }

  /** Each tensor's name and type, in the header's order. */
  public Map<String, TensorType> types() {
    return types;
  }

  /** The header's {@code "__metadata__"} (empty when it has none). */
  public Map<String, String> metadata() {
    return metadata;
  }

  /** Whether the file has a tensor called {@code name}. */
  public boolean contains(String name) {
    return entries.containsKey(name);
  }

  /**
   * The tensor called {@code name}: a read-only view of its bytes mapped from the file, no copy (see the
   * class doc for lifetime and in-place uploads). Fails for a name the file lacks, naming the ones it has,
   * and with {@link IllegalStateException} once this is closed.
   */
  public HostTensor tensor(String name) {
    Objects.requireNonNull(name, "name");
    Entry entry = entries.get(name);
    if (entry == null) {
      String known = entries.keySet().stream().limit(20).map(n -> "'" + n + "'").collect(Collectors.joining(", "));
      throw invalid(file, "has no tensor '" + name + "'; it has " + entries.size() + ": " + known
          + (entries.size() > 20 ? ", ..." : ""));
    }
    long bytes = entry.end() - entry.begin();
    if (bytes > Integer.MAX_VALUE - 8) {
      throw invalid(file, "tensor '" + name + "' is " + bytes + " bytes; a host tensor holds at most 2 GiB");
    }
    if (bytes == 0) {
      return HostTensor.zeros(entry.type());
    }
    ByteBuffer mapped;
    try {
      mapped = channel.map(FileChannel.MapMode.READ_ONLY, dataStart + entry.begin(), bytes);
    } catch (ClosedChannelException e) {
      throw new IllegalStateException("safetensors file " + file + " is closed; tensor '" + name
          + "' can no longer be read", e);
    } catch (IOException e) {
      throw new XlaException(ErrorCode.DATA_LOSS, "safetensors file " + file + ": tensor '" + name
          + "' cannot be mapped: " + e, e);
    }
    return HostTensor.of(entry.type(), mapped.order(ByteOrder.LITTLE_ENDIAN));
  }

  /** Closes the file; tensors already returned stay valid (each keeps its own mapping). Idempotent. */
  @Override
  public void close() {
    try {
      channel.close();
    } catch (IOException ignored) {
      // a read-only channel has nothing to flush
    }
  }

  @Override
  public String toString() {
    return "SafeTensors(" + file + ", " + entries.size() + " tensors)";
  }

  /**
   * Writes {@code tensors} (in the map's order) and {@code metadata} (may be null or empty) to {@code
   * file} as safetensors, replacing it atomically (a temporary file in the same directory, then a move).
   * The header is padded with spaces so the data starts on a 64-byte boundary, as the format allows;
   * tensors follow each other without gaps, as Python's reader requires. Fails for dtypes the format
   * lacks (c128), an empty or reserved name, and a closed or borrowed tensor.
   */
  public static void write(Path file, Map<String, HostTensor> tensors, Map<String, String> metadata) {
    Objects.requireNonNull(file, "file");
    Objects.requireNonNull(tensors, "tensors");
    StringBuilder json = new StringBuilder("{");
    if (metadata != null && !metadata.isEmpty()) {
      json.append(quote(METADATA)).append(":{");
      String separator = "";
      for (Map.Entry<String, String> e : metadata.entrySet()) {
        json.append(separator).append(quote(Objects.requireNonNull(e.getKey(), "metadata key")))
            .append(':').append(quote(Objects.requireNonNull(e.getValue(), "metadata value of " + e.getKey())));
        separator = ",";
      }
      json.append('}');
    }
    long offset = 0;
    List<ByteBuffer> data = new ArrayList<>();
    for (Map.Entry<String, HostTensor> e : tensors.entrySet()) {
      String name = Objects.requireNonNull(e.getKey(), "tensor name");
      HostTensor tensor = Objects.requireNonNull(e.getValue(), "tensor " + name);
      if (name.isEmpty() || name.equals(METADATA)) {
        throw new InvalidArgumentException("safetensors file " + file + ": tensor name '" + name
            + "' is not allowed (empty, or the reserved \"" + METADATA + "\")");
      }
      TensorType type = tensor.type();
      String dtype;
      try {
        dtype = dtypeName(type.dtype());
      } catch (InvalidArgumentException ex) {
        throw new InvalidArgumentException("safetensors file " + file + ": tensor '" + name + "': "
            + ex.getMessage());
      }
      long bytes = type.byteSize();
      if (json.length() > 1) {
        json.append(',');
      }
      json.append(quote(name)).append(":{\"dtype\":\"").append(dtype).append("\",\"shape\":[")
          .append(Arrays.stream(type.shape().dims()).mapToObj(Long::toString)
              .collect(Collectors.joining(",")))
          .append("],\"data_offsets\":[").append(offset).append(',').append(offset + bytes).append("]}");
      offset += bytes;
      data.add(tensor.data()); // fails clearly for a closed or borrowed tensor
    }
    json.append('}');
    byte[] header = json.toString().getBytes(StandardCharsets.UTF_8);
    int padded = header.length + (int) Math.floorMod(-(8L + header.length), (long) DATA_ALIGNMENT);
    ByteBuffer head = ByteBuffer.allocate(8 + padded).order(ByteOrder.LITTLE_ENDIAN);
    head.putLong(padded).put(header);
    while (head.hasRemaining()) {
      head.put((byte) ' ');
    }
    head.flip();
    Path directory = file.toAbsolutePath().getParent();
    Path temporary = null;
    try {
      // Not createTempFile: its 0600 mode would stay on the model file; this one gets the umask's mode.
      temporary = directory.resolve("." + file.getFileName() + "." + java.util.UUID.randomUUID() + ".partial");
      try (FileChannel out = FileChannel.open(temporary, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
        writeFully(out, head);
        for (ByteBuffer b : data) {
          writeFully(out, b);
        }
        out.force(false);
      }
      Files.move(temporary, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
      temporary = null;
    } catch (IOException e) {
      throw new XlaException(ErrorCode.DATA_LOSS, "safetensors file " + file + " cannot be written: " + e, e);
    } finally {
      if (temporary != null) {
        try {
          Files.deleteIfExists(temporary);
        } catch (IOException ignored) {
          // the failure being reported matters more
        }
      }
    }
  }

  private static void writeFully(FileChannel out, ByteBuffer b) throws IOException {
    while (b.hasRemaining()) {
      out.write(b);
    }
  }

  /** {@code s} as a JSON string. */
  private static String quote(String s) {
    StringBuilder out = new StringBuilder(s.length() + 2).append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        default -> {
          if (c < 0x20) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
        }
      }
    }
    return out.append('"').toString();
  }
}
