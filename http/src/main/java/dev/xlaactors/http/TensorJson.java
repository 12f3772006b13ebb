package dev.xlaactors.http;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.util.JsonParserDelegate;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * JSON to tensors and back, with every check done before a tensor is built: a tensor in JSON is
 * {@code {"dtype": "f32", "shape": [2, 3], "data": [1, 2, 3, 4, 5, 6]}} (data flat, row-major; an optional
 * {@code "name"} must match the model input's). Requests are checked against the types the model expects
 * (no conversions): a wrong dtype, shape, element count, a non-number, an integer out of its type's range
 * or a fractional value for an integer type is a {@link BadRequestException} naming the field, expected
 * vs got. Thread-safe.
 */
public final class TensorJson {
  /** Strict JSON: duplicate keys, trailing tokens, NaN and comments are errors. */
  static final ObjectMapper MAPPER = JsonMapper.builder()
      .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
      .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
      .disable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
      .build();

  static {
    MAPPER.getFactory().setStreamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(32).maxNumberLength(400).build());
  }

  private static final Map<String, DType> NAMES = names();

  private TensorJson() {}

  private static Map<String, DType> names() {
    Map<String, DType> m = new java.util.HashMap<>();
    for (DType t : DType.values()) {
      if (t.isComplex() || t.isFloat8()) {
        continue; // no JSON form
      }
      m.put(t.shortName(), t);
      m.put(t.mlirName(), t);
    }
    m.put("bool", DType.PRED);
    m.put("float16", DType.F16);
    m.put("bfloat16", DType.BF16);
    m.put("float32", DType.F32);
    m.put("float64", DType.F64);
    for (int bits : new int[] {8, 16, 32, 64}) {
      m.put("int" + bits, DType.valueOf("S" + bits));
      m.put("uint" + bits, DType.valueOf("U" + bits));
    }
    return Map.copyOf(m);
  }

  /** The dtype named {@code name} ({@code f32}, {@code float32}, {@code s32}, {@code i32}, {@code int32}, {@code pred}, {@code bool}, ...). */
  static DType dtype(String field, String name) {
    DType t = NAMES.get(name.toLowerCase(Locale.ROOT));
    if (t == null) {
      throw new BadRequestException(field, "unknown dtype '" + name + "'; known: "
          + NAMES.values().stream().map(DType::shortName).distinct().sorted().collect(Collectors.joining(", ")));
    }
    return t;
  }

  /** Parses {@code body} as one JSON object; malformed JSON is a {@link BadRequestException} on {@code body} saying where. */
  public static JsonNode parseObject(byte[] body) {
    return parseObject(body, Long.MAX_VALUE, "");
  }

  /** A body with more JSON values than its request can hold: refused while parsing (413). */
  static final class TooManyValues extends BadRequestException {
    TooManyValues(String message) {
      super("body", message);
    }
  }

  /**
   * As {@link #parseObject(byte[])}, refusing a body of more than {@code maxValues} JSON values (scalars,
   * lists and objects; the values of arrays count one each) with {@link TooManyValues} as soon as the parser
   * reaches one more, so no tree larger than the request can hold is built; {@code holds} says whose limit
   * it is ("a request to model 'm' holds").
   */
  static JsonNode parseObject(byte[] body, long maxValues, String holds) {
    JsonNode root;
    try (JsonParser counted = new JsonParserDelegate(MAPPER.getFactory().createParser(body)) {
      private long values;

      @Override
      public JsonToken nextToken() throws IOException {
        JsonToken t = super.nextToken();
        if (t != null && t != JsonToken.END_ARRAY && t != JsonToken.END_OBJECT && t != JsonToken.FIELD_NAME && ++values > maxValues) {
          throw new TooManyValues("more JSON values than " + holds + " (at most " + maxValues + "); it was not read further");
        }
        return t;
      }
    }) {
      root = MAPPER.readTree(counted);
    } catch (JsonProcessingException e) {
      String where = e.getLocation() == null ? "" : " at line " + e.getLocation().getLineNr() + " column " + e.getLocation().getColumnNr();
      throw new BadRequestException("body", "malformed JSON" + where + ": " + e.getOriginalMessage());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    if (root == null || root.isMissingNode()) {
      throw new BadRequestException("body", "empty; expected a JSON object");
    }
    if (!root.isObject()) {
      throw new BadRequestException("body", "expected a JSON object, got " + kind(root));
    }
    return root;
  }

  /** Refuses a field of {@code object} (at {@code path}) that is not in {@code known}. */
  static void onlyFields(JsonNode object, String path, Set<String> known) {
    for (Iterator<String> it = object.fieldNames(); it.hasNext(); ) {
      String name = it.next();
      if (!known.contains(name)) {
        throw new BadRequestException(path.isEmpty() ? name : path + "." + name, "unknown field; expected one of "
            + known.stream().sorted().collect(Collectors.joining(", ")));
      }
    }
  }

  /**
   * The request's {@code inputs} (a list, one tensor per model input, in order) as host tensors of exactly
   * {@code types}; {@code names} are the model's input names (for messages and the optional {@code name}).
   */
  public static List<HostTensor> inputs(JsonNode inputs, String model, List<String> names, List<TensorType> types) {
    String expected = describe(names, types);
    if (inputs == null || inputs.isMissingNode() || inputs.isNull()) {
      throw new BadRequestException("inputs", "missing; model '" + model + "' takes a list of " + types.size() + " tensor(s) " + expected
          + ", each {\"dtype\", \"shape\", \"data\"}");
    }
    if (!inputs.isArray()) {
      throw new BadRequestException("inputs", "expected a list of " + types.size() + " tensor(s) " + expected + ", got " + kind(inputs));
    }
    if (inputs.size() != types.size()) {
      throw new BadRequestException("inputs", "model '" + model + "' takes " + types.size() + " input(s) " + expected + ", got "
          + inputs.size());
    }
    List<HostTensor> out = new ArrayList<>();
    for (int i = 0; i < types.size(); i++) {
      out.add(tensor(inputs.get(i), "inputs[" + i + "]", names.get(i), types.get(i)));
    }
    return out;
  }

  private static String describe(List<String> names, List<TensorType> types) {
    List<String> parts = new ArrayList<>();
    for (int i = 0; i < types.size(); i++) {
      parts.add(names.get(i) + " " + types.get(i));
    }
    return "(" + String.join(", ", parts) + ")";
  }

  /** One tensor at {@code path}, which must be of {@code type}. */
  static HostTensor tensor(JsonNode node, String path, String name, TensorType type) {
    if (!node.isObject()) {
      throw new BadRequestException(path, "expected a tensor {\"dtype\", \"shape\", \"data\"} for input '" + name + "' " + type + ", got "
          + kind(node));
    }
    onlyFields(node, path, Set.of("name", "dtype", "shape", "data"));
    JsonNode given = node.get("name");
    if (given != null && !(given.isTextual() && given.asText().equals(name))) {
      throw new BadRequestException(path + ".name", "this position is input '" + name + "', got " + given);
    }
    JsonNode dt = node.get("dtype");
    if (dt == null || !dt.isTextual()) {
      throw new BadRequestException(path + ".dtype", "expected a string such as \"" + type.dtype().shortName() + "\", got "
          + (dt == null ? "nothing" : kind(dt)));
    }
    DType dtype = dtype(path + ".dtype", dt.asText());
    if (dtype != type.dtype()) {
      throw new BadRequestException(path + ".dtype", "input '" + name + "' is " + type.dtype().shortName() + ", got "
          + dtype.shortName() + " (no conversions: send " + type.dtype().shortName() + ")");
    }
    long[] dims = type.shape().dims();
    JsonNode sh = node.get("shape");
    if (sh == null || !sh.isArray()) {
      throw new BadRequestException(path + ".shape", "expected a list of dimensions " + Arrays.toString(dims) + ", got "
          + (sh == null ? "nothing" : kind(sh)));
    }
    long[] got = new long[sh.size()];
    for (int d = 0; d < got.length; d++) {
      JsonNode n = sh.get(d);
      got[d] = n.canConvertToLong() && n.isIntegralNumber() ? n.asLong() : -1;
      if (got[d] < 0) {
        throw new BadRequestException(path + ".shape[" + d + "]", "expected a dimension >= 0, got " + n);
      }
    }
    if (!Arrays.equals(dims, got)) {
      throw new BadRequestException(path + ".shape", "input '" + name + "' is " + type + ", got shape " + Arrays.toString(got));
    }
    JsonNode data = node.get("data");
    long count = type.shape().elementCount();
    if (data == null || !data.isArray()) {
      throw new BadRequestException(path + ".data", "expected a flat list of " + count + " numbers (row-major), got "
          + (data == null ? "nothing" : kind(data)));
    }
    if (data.size() != count) {
      throw new BadRequestException(path + ".data", "shape " + Arrays.toString(dims) + " holds " + count + " values, got " + data.size());
    }
    return values(data, path + ".data", type);
  }

  private static HostTensor values(JsonNode data, String path, TensorType type) {
    int n = data.size();
    long[] dims = type.shape().dims();
    DType t = type.dtype();
    if (t == DType.PRED) {
      boolean[] v = new boolean[n];
      for (int i = 0; i < n; i++) {
        JsonNode x = data.get(i);
        if (!x.isBoolean()) {
          throw new BadRequestException(path + "[" + i + "]", "expected true or false (dtype pred), got " + x);
        }
        v[i] = x.asBoolean();
      }
      return HostTensor.ofBooleans(v, dims);
    }
    if (t.isFloating()) {
      double[] v = new double[n];
      for (int i = 0; i < n; i++) {
        JsonNode x = data.get(i);
        if (!x.isNumber()) {
          throw new BadRequestException(path + "[" + i + "]", "expected a number (dtype " + t.shortName() + "), got " + x);
        }
        v[i] = x.asDouble();
        if (t != DType.F64 && Math.abs(v[i]) > Float.MAX_VALUE) {
          throw new BadRequestException(path + "[" + i + "]", x + " is beyond the range of " + t.shortName());
        }
      }
      return switch (t) {
        case F64 -> HostTensor.ofDoubles(v, dims);
        case F32 -> HostTensor.ofFloats(toFloats(v), dims);
        case F16 -> HostTensor.ofHalfFloats(toFloats(v), dims);
        case BF16 -> HostTensor.ofBFloat16s(toFloats(v), dims);
        default -> throw new BadRequestException(path, "dtype " + t.shortName() + " has no JSON form");
      };
    }
    long min = t.isSignedInteger() ? -(1L << (t.byteSize() * 8 - 1)) : 0;
    long max = t.byteSize() == 8 ? Long.MAX_VALUE : t.isSignedInteger() ? (1L << (t.byteSize() * 8 - 1)) - 1 : (1L << (t.byteSize() * 8)) - 1;
    long[] v = new long[n];
    for (int i = 0; i < n; i++) {
      JsonNode x = data.get(i);
      if (!x.isIntegralNumber() || !x.canConvertToLong()) {
        throw new BadRequestException(path + "[" + i + "]", "expected a whole number (dtype " + t.shortName() + "), got " + x);
      }
      v[i] = x.asLong();
      if (v[i] < min || v[i] > max) {
        throw new BadRequestException(path + "[" + i + "]", v[i] + " is outside the range of " + t.shortName() + " (" + min + ".." + max + ")");
      }
    }
    return HostTensor.ofLongs(t, v, dims);
  }

  private static float[] toFloats(double[] v) {
    float[] f = new float[v.length];
    for (int i = 0; i < v.length; i++) {
      f[i] = (float) v[i];
    }
    return f;
  }

  /** Writes {@code tensor} as {@code {"dtype", "shape", "data"}} (with {@code name} when not null). */
  static void write(JsonGenerator g, String name, HostTensor tensor) throws IOException {
    g.writeStartObject();
    if (name != null) {
      g.writeStringField("name", name);
    }
    DType t = tensor.dtype();
    g.writeStringField("dtype", t.shortName());
    g.writeArrayFieldStart("shape");
    for (long d : tensor.shape().dims()) {
      g.writeNumber(d);
    }
    g.writeEndArray();
    g.writeArrayFieldStart("data");
    if (t == DType.PRED) {
      for (boolean b : tensor.toBooleanArray()) {
        g.writeBoolean(b);
      }
    } else if (t == DType.F64) {
      for (double d : tensor.toDoubleArray()) {
        writeFloating(g, d);
      }
    } else if (t.isFloating()) {
      for (float f : tensor.toFloatArray()) {
        if (Float.isFinite(f)) {
          g.writeNumber(f);
        } else {
          g.writeString(Float.toString(f)); // JSON has no NaN or infinity: "NaN", "Infinity", "-Infinity"
        }
      }
    } else if (t.isInteger()) {
      for (long l : tensor.toLongArray()) {
        g.writeNumber(l);
      }
    } else {
      throw new IllegalArgumentException("dtype " + t.shortName() + " has no JSON form");
    }
    g.writeEndArray();
    g.writeEndObject();
  }

  private static void writeFloating(JsonGenerator g, double d) throws IOException {
    if (Double.isFinite(d)) {
      g.writeNumber(d);
    } else {
      g.writeString(Double.toString(d));
    }
  }

  /** {@code fields} written by {@code body} as one JSON object, UTF-8. */
  static byte[] object(JsonBody body) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    try (JsonGenerator g = MAPPER.getFactory().createGenerator(out)) {
      g.writeStartObject();
      body.write(g);
      g.writeEndObject();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out.toByteArray();
  }

  /** Writes the fields of a JSON object. */
  @FunctionalInterface
  interface JsonBody {
    void write(JsonGenerator g) throws IOException;
  }

  /** What a JSON value is, for messages: {@code a string}, {@code a number}, ... */
  static String kind(JsonNode n) {
    return switch (n.getNodeType()) {
      case ARRAY -> "a list";
      case OBJECT -> "an object";
      case STRING -> "a string";
      case NUMBER -> "a number";
      case BOOLEAN -> "a boolean";
      case NULL -> "null";
      default -> n.getNodeType().toString().toLowerCase(Locale.ROOT);
    };
  }
}
