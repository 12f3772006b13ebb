package dev.xlaactors.http;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HalfFloats;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Tensors of the Open Inference Protocol (KServe v2) in JSON: {@code {"name": "input_1", "shape": [2, 3],
 * "datatype": "FP32", "data": [1, 2, 3, 4, 5, 6]}}, data row-major, flat (nested lists are flattened).
 * Datatypes: {@code BOOL}, {@code UINT8..UINT64}, {@code INT8..INT64}, {@code FP16}, {@code BF16}, {@code
 * FP32}, {@code FP64}; {@code BYTES} is a protocol datatype no compiled model takes, so it is refused like
 * any other mismatch. No conversions: an input must come in the model's datatype.
 *
 * <p>The binary tensor data extension: an input whose {@code parameters} hold {@code binary_data_size}
 * has no {@code data}; its raw bytes (little-endian, row-major; BOOL one byte 0 or 1) follow the JSON in the
 * request body, the inputs' in the order the JSON lists them; an output may be answered the same way.
 *
 * <p>The first dimension of every input and output is the batch: {@code [n, ...]} holds n rows, each one
 * request to the model's server; the model's own per-request shape follows. Every check (names, datatypes,
 * shapes, counts, values) is done before a tensor is built, each failure a {@link BadRequestException}
 * naming the field, expected vs got. Thread-safe.
 */
final class InferenceTensorJson {
  private static final Map<DType, String> DATATYPES = datatypes();
  private static final Map<String, DType> BY_DATATYPE = byDatatype();

  private InferenceTensorJson() {}

  private static Map<DType, String> datatypes() {
    Map<DType, String> m = new EnumMap<>(DType.class);
    m.put(DType.PRED, "BOOL");
    for (int bits : new int[] {8, 16, 32, 64}) {
      m.put(DType.valueOf("U" + bits), "UINT" + bits);
      m.put(DType.valueOf("S" + bits), "INT" + bits);
    }
    m.put(DType.F16, "FP16");
    m.put(DType.BF16, "BF16");
    m.put(DType.F32, "FP32");
    m.put(DType.F64, "FP64");
    return m;
  }

  private static Map<String, DType> byDatatype() {
    Map<String, DType> m = new HashMap<>();
    DATATYPES.forEach((t, name) -> m.put(name, t));
    return Map.copyOf(m);
  }

  /** The protocol's datatype of {@code t} ({@code FP32}, ...); an {@link IllegalArgumentException} for one it has none of. */
  static String datatype(DType t) {
    String name = DATATYPES.get(t);
    if (name == null) {
      throw new IllegalArgumentException("dtype " + t.shortName() + " has no Open Inference Protocol datatype");
    }
    return name;
  }

  /** Whether the protocol can carry tensors of {@code t}. */
  static boolean hasDatatype(DType t) {
    return DATATYPES.containsKey(t);
  }

  /**
   * The request's {@code inputs} (a list of named tensors, any order, each model input once) cut into rows:
   * {@code rows.get(r)} is the r-th request's inputs, in the model's order. {@code names} are the model's
   * inputs as the protocol names them, {@code types} their per-request types; at most {@code maxRows} rows.
   * {@code binary} is what followed the JSON in the body (the binary tensor data extension; empty when none).
   */
  static List<List<HostTensor>> rows(JsonNode inputs, String model, List<String> names, List<TensorType> types, int maxRows,
      byte[] binary) {
    String expected = describe(names, types);
    if (inputs == null || inputs.isNull()) {
      throw new BadRequestException("inputs", "missing; model '" + model + "' takes " + expected);
    }
    if (!inputs.isArray()) {
      throw new BadRequestException("inputs", "expected a list of tensors " + expected + ", got " + TensorJson.kind(inputs));
    }
    JsonNode[] byInput = new JsonNode[types.size()];
    String[] paths = new String[types.size()];
    long[] binaryAt = new long[types.size()]; // where an input's bytes start in binary; -1: its data are JSON
    long[] binarySize = new long[types.size()];
    long binaryUsed = 0;
    Set<String> seen = new HashSet<>();
    for (int i = 0; i < inputs.size(); i++) {
      String path = "inputs[" + i + "]";
      JsonNode t = inputs.get(i);
      if (!t.isObject()) {
        throw new BadRequestException(path, "expected a tensor {\"name\", \"shape\", \"datatype\", \"data\"}, got " + TensorJson.kind(t));
      }
      TensorJson.onlyFields(t, path, Set.of("name", "shape", "datatype", "parameters", "data"));
      JsonNode n = t.get("name");
      if (n == null || !n.isTextual()) {
        throw new BadRequestException(path + ".name", "expected the input's name, one of " + names + ", got "
            + (n == null ? "nothing" : TensorJson.kind(n)));
      }
      int at = names.indexOf(n.asText());
      if (at < 0) {
        throw new BadRequestException(path + ".name", "model '" + model + "' has no input '" + n.asText() + "'; its inputs: " + expected);
      }
      if (!seen.add(n.asText())) {
        throw new BadRequestException(path + ".name", "input '" + n.asText() + "' is given twice");
      }
      long size = parameters(t.get("parameters"), path + ".parameters");
      byInput[at] = t;
      paths[at] = path;
      binaryAt[at] = size < 0 ? -1 : binaryUsed;
      binarySize[at] = size;
      if (size >= 0) {
        if (t.has("data")) {
          throw new BadRequestException(path + ".data", "input '" + n.asText() + "' has binary data (parameters.binary_data_size): give no"
              + " \"data\"");
        }
        binaryUsed += size;
        if (binaryUsed > binary.length) {
          throw new BadRequestException(path + ".parameters.binary_data_size", "the binary data of the inputs up to '" + n.asText() + "' need "
              + binaryUsed + " bytes after the JSON, the body has " + binary.length);
        }
      }
    }
    if (binaryUsed != binary.length) {
      throw new BadRequestException("body", "the inputs' binary_data_size add up to " + binaryUsed + " bytes, but " + binary.length
          + " bytes follow the JSON (Inference-Header-Content-Length)");
    }
    for (int i = 0; i < types.size(); i++) {
      if (byInput[i] == null) {
        throw new BadRequestException("inputs", "input '" + names.get(i) + "' is missing; model '" + model + "' takes " + expected);
      }
    }
    int rows = -1;
    String rowsFrom = null;
    for (int i = 0; i < types.size(); i++) {
      long n = batch(byInput[i], paths[i], names.get(i), types.get(i), maxRows);
      if (rows >= 0 && n != rows) {
        throw new BadRequestException(paths[i] + ".shape", "input '" + names.get(i) + "' has " + n + " rows, input '" + rowsFrom + "' "
            + rows + ": every input needs the same first (batch) dimension");
      }
      rows = (int) n;
      rowsFrom = names.get(i);
    }
    List<List<HostTensor>> out = new ArrayList<>();
    for (int r = 0; r < rows; r++) {
      out.add(new ArrayList<>());
    }
    try { // a refused input gives back the rows made before it (pooled memory)
      for (int i = 0; i < types.size(); i++) {
        if (binaryAt[i] >= 0) {
          long need = rows * types.get(i).byteSize();
          if (binarySize[i] != need) {
            throw new BadRequestException(paths[i] + ".parameters.binary_data_size", "shape " + shape(rows, types.get(i)) + " of "
                + datatype(types.get(i).dtype()) + " takes " + need + " bytes, got " + binarySize[i]);
          }
          binaryRows(binary, (int) binaryAt[i], rows, paths[i], names.get(i), types.get(i), out);
          continue;
        }
        List<JsonNode> values = new ArrayList<>();
        flatten(byInput[i].get("data"), values, paths[i] + ".data");
        long perRow = types.get(i).shape().elementCount();
        if (values.size() != perRow * rows) {
          throw new BadRequestException(paths[i] + ".data", "shape " + shape(rows, types.get(i)) + " holds " + perRow * rows
              + " values, got " + values.size());
        }
        for (int r = 0; r < rows; r++) {
          out.get(r).add(values(values.subList((int) (r * perRow), (int) ((r + 1) * perRow)), paths[i] + ".data", (int) (r * perRow),
              types.get(i)));
        }
      }
    } catch (RuntimeException e) {
      out.forEach(row -> row.forEach(HostTensor::close));
      throw e;
    }
    return out;
  }

  /**
   * An input's {@code binary_data_size} (-1 when its data are JSON); refuses shared memory, whose data this
   * server cannot reach.
   */
  private static long parameters(JsonNode p, String path) {
    if (p == null) {
      return -1;
    }
    if (!p.isObject()) {
      throw new BadRequestException(path, "expected an object, got " + TensorJson.kind(p));
    }
    for (String refused : List.of("shared_memory_region", "shared_memory_byte_size", "shared_memory_offset")) {
      if (p.has(refused)) {
        throw new BadRequestException(path + "." + refused, "shared memory is not supported: send the data in the request (JSON, or binary"
            + " after it)");
      }
    }
    for (var names = p.fieldNames(); names.hasNext(); ) {
      String name = names.next();
      if (!name.equals("binary_data_size")) { // refused, not ignored: a client never gets less than it asked for
        throw new BadRequestException(path + "." + name, "not supported; an input's one parameter is binary_data_size (the binary tensor"
            + " data extension)");
      }
    }
    JsonNode size = p.get("binary_data_size");
    if (size == null) {
      return -1;
    }
    if (!size.isIntegralNumber() || !size.canConvertToLong() || size.asLong() < 0) {
      throw new BadRequestException(path + ".binary_data_size", "expected a number of bytes >= 0, got " + size);
    }
    return size.asLong();
  }

  /** The rows of an input whose raw bytes start at {@code at} in {@code binary}, into {@code out}. */
  private static void binaryRows(byte[] binary, int at, int rows, String path, String name, TensorType type, List<List<HostTensor>> out) {
    int perRow = (int) type.byteSize();
    for (int r = 0; r < rows; r++) {
      byte[] row = java.util.Arrays.copyOfRange(binary, at + r * perRow, at + (r + 1) * perRow);
      if (type.dtype() == DType.PRED) {
        for (int i = 0; i < row.length; i++) {
          if (row[i] != 0 && row[i] != 1) {
            throw new BadRequestException(path, "input '" + name + "' is BOOL: byte " + (r * perRow + i) + " of its binary data is " + row[i]
                + ", expected 0 or 1");
          }
        }
      }
      out.get(r).add(HostTensor.filled(type, b -> b.put(row))); // pooled: closed once the request is answered
    }
  }

  /** The number of rows of the input tensor {@code t}: its shape must be {@code [n] + type's dims}, 1 <= n <= maxRows. */
  private static long batch(JsonNode t, String path, String name, TensorType type, int maxRows) {
    JsonNode dt = t.get("datatype");
    String want = datatype(type.dtype());
    if (dt == null || !dt.isTextual()) {
      throw new BadRequestException(path + ".datatype", "expected \"" + want + "\" for input '" + name + "', got "
          + (dt == null ? "nothing" : TensorJson.kind(dt)));
    }
    if (!dt.asText().equals(want)) {
      throw new BadRequestException(path + ".datatype", "input '" + name + "' is " + want + ", got " + dt.asText()
          + (BY_DATATYPE.containsKey(dt.asText()) || dt.asText().equals("BYTES") ? "" : " (not a datatype: " + String.join(", ",
          DATATYPES.values()) + ", BYTES)") + "; no conversions: send " + want);
    }
    JsonNode sh = t.get("shape");
    long[] dims = type.shape().dims();
    String expected = shape(-1, type);
    if (sh == null || !sh.isArray()) {
      throw new BadRequestException(path + ".shape", "expected " + expected + " for input '" + name + "' (n rows first), got "
          + (sh == null ? "nothing" : TensorJson.kind(sh)));
    }
    long[] got = new long[sh.size()];
    for (int d = 0; d < got.length; d++) {
      JsonNode n = sh.get(d);
      got[d] = n.isIntegralNumber() && n.canConvertToLong() ? n.asLong() : -1;
      if (got[d] < 0) {
        throw new BadRequestException(path + ".shape[" + d + "]", "expected a dimension >= 0, got " + n);
      }
    }
    if (got.length != dims.length + 1 || !Arrays.equals(Arrays.copyOfRange(got, 1, got.length), dims)) {
      throw new BadRequestException(path + ".shape", "input '" + name + "' is " + expected + " (n rows of " + type
          + "), got " + Arrays.toString(got));
    }
    if (got[0] < 1 || got[0] > maxRows) {
      throw new BadRequestException(path + ".shape[0]", "expected 1.." + maxRows + " rows (each row is one request to the model's"
          + " server; at most its queue-capacity), got " + got[0]);
    }
    return got[0];
  }

  /** The leaves of {@code data} (a list, maybe nested) in order, into {@code out}. */
  private static void flatten(JsonNode data, List<JsonNode> out, String path) {
    if (data == null || !data.isArray()) {
      throw new BadRequestException(path, "expected a list of values (row-major, flat or nested), got "
          + (data == null ? "nothing" : TensorJson.kind(data)));
    }
    for (JsonNode x : data) {
      if (x.isArray()) {
        flatten(x, out, path);
      } else {
        out.add(x);
      }
    }
  }

  /** One row's tensor of {@code type} from its values; {@code offset} is the first value's index in the request's data. */
  private static HostTensor values(List<JsonNode> data, String path, int offset, TensorType type) {
    int n = data.size();
    DType t = type.dtype();
    String dt = datatype(t);
    if (t == DType.PRED) {
      boolean[] v = new boolean[n];
      for (int i = 0; i < n; i++) {
        JsonNode x = data.get(i);
        if (!x.isBoolean()) {
          throw new BadRequestException(path + "[" + (offset + i) + "]", "expected true or false (BOOL), got " + x);
        }
        v[i] = x.asBoolean();
      }
      return HostTensor.filled(type, b -> {
        for (int i = 0; i < n; i++) {
          b.put(i, (byte) (v[i] ? 1 : 0));
        }
      });
    }
    if (t.isFloating()) {
      double[] v = new double[n];
      for (int i = 0; i < n; i++) {
        JsonNode x = data.get(i);
        if (!x.isNumber()) {
          throw new BadRequestException(path + "[" + (offset + i) + "]", "expected a number (" + dt + "), got " + x);
        }
        v[i] = x.asDouble();
        if (t != DType.F64 && Math.abs(v[i]) > Float.MAX_VALUE) {
          throw new BadRequestException(path + "[" + (offset + i) + "]", x + " is beyond the range of " + dt);
        }
      }
      float[] f = new float[t == DType.F64 ? 0 : n];
      for (int i = 0; i < f.length; i++) {
        f[i] = (float) v[i];
      }
      // Rows take pooled memory (HostTensor.filled), given back when the request is answered.
      return switch (t) {
        case F64 -> HostTensor.filled(type, b -> b.asDoubleBuffer().put(v));
        case F32 -> HostTensor.filled(type, b -> b.asFloatBuffer().put(f));
        case F16 -> HostTensor.filled(type, b -> {
          for (int i = 0; i < n; i++) {
            b.putShort(i * 2, HalfFloats.floatToHalf(f[i]));
          }
        });
        case BF16 -> HostTensor.filled(type, b -> {
          for (int i = 0; i < n; i++) {
            b.putShort(i * 2, HalfFloats.floatToBFloat16(f[i]));
          }
        });
        default -> throw new BadRequestException(path, dt + " has no JSON form");
      };
    }
    long min = t.isSignedInteger() ? -(1L << (t.byteSize() * 8 - 1)) : 0;
    long max = t.byteSize() == 8 ? Long.MAX_VALUE : t.isSignedInteger() ? (1L << (t.byteSize() * 8 - 1)) - 1 : (1L << (t.byteSize() * 8)) - 1;
    long[] v = new long[n];
    for (int i = 0; i < n; i++) {
      JsonNode x = data.get(i);
      if (!x.isIntegralNumber() || !x.canConvertToLong()) {
        throw new BadRequestException(path + "[" + (offset + i) + "]", "expected a whole number (" + dt + "), got " + x);
      }
      v[i] = x.asLong();
      if (v[i] < min || v[i] > max) {
        throw new BadRequestException(path + "[" + (offset + i) + "]", v[i] + " is outside the range of " + dt + " (" + min + ".." + max + ")");
      }
    }
    int width = t.byteSize(); // each value is in the dtype's range (checked above)
    return HostTensor.filled(type, b -> {
      for (int i = 0; i < n; i++) {
        switch (width) {
          case 1 -> b.put(i, (byte) v[i]);
          case 2 -> b.putShort(i * 2, (short) v[i]);
          case 4 -> b.putInt(i * 4, (int) v[i]);
          default -> b.putLong(i * 8, v[i]);
        }
      }
    });
  }

  /**
   * Writes one output: {@code rows} (one tensor per request, the same type) stacked under a first dimension
   * of {@code rows.size()}, as {@code {"name", "datatype", "shape", "data"}}. A non-finite float is written
   * as the string {@code "NaN"}, {@code "Infinity"} or {@code "-Infinity"} (JSON numbers cannot hold them;
   * numpy reads those strings back as floats). With {@code binary} (not null) the rows' raw bytes go there
   * instead and the output says their size ({@code "parameters": {"binary_data_size": n}}, no data).
   */
  static void write(JsonGenerator g, String name, List<HostTensor> rows, ByteArrayOutputStream binary) throws IOException {
    HostTensor first = rows.get(0);
    DType t = first.dtype();
    g.writeStartObject();
    g.writeStringField("name", name);
    g.writeStringField("datatype", datatype(t));
    g.writeArrayFieldStart("shape");
    g.writeNumber(rows.size());
    for (long d : first.shape().dims()) {
      g.writeNumber(d);
    }
    g.writeEndArray();
    if (binary != null) {
      long size = 0;
      for (HostTensor row : rows) {
        byte[] bytes = row.toByteArray();
        binary.write(bytes);
        size += bytes.length;
      }
      g.writeObjectFieldStart("parameters");
      g.writeNumberField("binary_data_size", size);
      g.writeEndObject();
      g.writeEndObject();
      return;
    }
    g.writeArrayFieldStart("data");
    for (HostTensor row : rows) {
      if (t == DType.PRED) {
        for (boolean b : row.toBooleanArray()) {
          g.writeBoolean(b);
        }
      } else if (t == DType.F64) {
        for (double d : row.toDoubleArray()) {
          if (Double.isFinite(d)) {
            g.writeNumber(d);
          } else {
            g.writeString(Double.toString(d));
          }
        }
      } else if (t.isFloating()) {
        for (float f : row.toFloatArray()) {
          if (Float.isFinite(f)) {
            g.writeNumber(f);
          } else {
            g.writeString(Float.toString(f));
          }
        }
      } else {
        for (long l : row.toLongArray()) {
          g.writeNumber(l);
        }
      }
    }
    g.writeEndArray();
    g.writeEndObject();
  }

  /** Writes {@code {"name", "datatype", "shape"}} of a tensor of per-request {@code type}, -1 for the batch dimension. */
  static void writeMetadata(JsonGenerator g, String name, TensorType type) throws IOException {
    g.writeStartObject();
    g.writeStringField("name", name);
    g.writeStringField("datatype", datatype(type.dtype()));
    g.writeArrayFieldStart("shape");
    g.writeNumber(-1);
    for (long d : type.shape().dims()) {
      g.writeNumber(d);
    }
    g.writeEndArray();
    g.writeEndObject();
  }

  /** {@code [n, dims...]} of {@code type} with {@code rows} first (-1: any). */
  static String shape(long rows, TensorType type) {
    long[] dims = type.shape().dims();
    long[] all = new long[dims.length + 1];
    all[0] = rows;
    System.arraycopy(dims, 0, all, 1, dims.length);
    return Arrays.toString(all);
  }

  private static String describe(List<String> names, List<TensorType> types) {
    List<String> parts = new ArrayList<>();
    for (int i = 0; i < types.size(); i++) {
      parts.add(names.get(i) + " " + (hasDatatype(types.get(i).dtype()) ? datatype(types.get(i).dtype()) : types.get(i).dtype().shortName())
          + shape(-1, types.get(i)));
    }
    return "(" + String.join(", ", parts) + ")";
  }
}
