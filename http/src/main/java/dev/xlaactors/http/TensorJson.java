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
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Iterator;
import java.util.Locale;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * The JSON of the routes' requests and answers: strict parsing into a tree bounded by the number of values
 * a request can hold ({@link #parseObject(byte[], long, String)}), unknown-field checks and writing. The
 * tensors of the Open Inference Protocol are {@link InferenceTensorJson}'s. Malformed JSON or an unknown
 * field is a {@link BadRequestException} naming it. Thread-safe.
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

  private TensorJson() {}

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
