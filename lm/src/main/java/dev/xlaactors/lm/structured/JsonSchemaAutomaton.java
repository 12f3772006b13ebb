package dev.xlaactors.lm.structured;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.gson.JsonPrimitive;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Compiles a JSON schema to a {@link ByteAutomaton} accepting compact JSON texts (no whitespace between
 * tokens) that are valid for it: the subset OpenAI's structured outputs accept. Supported: {@code type}
 * (one or a list) {@code object} with {@code properties} (written in their declared order; those not in
 * {@code required} may be left out; {@code additionalProperties} is accepted and no other property is
 * written), {@code string} (with {@code minLength}/{@code maxLength} up to {@value #MAX_BOUNDED}),
 * {@code number}, {@code integer}, {@code boolean}, {@code null}, {@code array} with {@code items},
 * {@code minItems}/{@code maxItems}; {@code enum}, {@code const}, {@code anyOf}, {@code allOf} of one
 * schema, {@code $ref} into {@code $defs} or {@code definitions}; annotations ({@code title},
 * {@code description}, {@code default}, {@code examples}, ...) are ignored. An empty schema, or an object
 * without {@code properties}, is any JSON value nested at most {@value #ANY_DEPTH} levels. Any other keyword
 * ({@code pattern}, {@code format}, {@code minimum}, {@code oneOf}, {@code not}, ...) and a recursive
 * {@code $ref} are refused with an {@link UnsupportedSchemaException} naming the keyword: a finite
 * automaton cannot nest without bound, and a keyword ignored would let invalid output through.
 *
 * <p>Numbers are bounded so that a constrained model cannot write one without end: at most
 * {@value #MAX_DIGITS} digits before and after the point, and a two-digit exponent. Strings hold any
 * Unicode character (well-formed UTF-8) but the control characters, {@code "} and {@code \}, or JSON's
 * escapes.
 */
public final class JsonSchemaAutomaton {
  /** How deep an unconstrained value ({@code {}}, {@code json_object}) may nest. */
  public static final int ANY_DEPTH = 3;
  /** The most digits of a number's integer part and of its fraction. */
  public static final int MAX_DIGITS = 15;
  /** The largest {@code maxLength}, {@code minLength}, {@code maxItems} and {@code minItems} compiled (each bound unrolls the automaton). */
  public static final int MAX_BOUNDED = 256;

  private static final Set<String> ANNOTATIONS = Set.of("title", "description", "default", "examples", "$schema", "$id", "$comment",
      "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "strict", "discriminator");

  /** UTF-8's multi-byte forms: lead bytes, the second byte's range (no overlong form, no surrogate), continuation bytes after it. */
  private static final int[][] UTF8 = {{0xC2, 0xDF, 0x80, 0xBF, 0}, {0xE0, 0xE0, 0xA0, 0xBF, 1}, {0xE1, 0xEC, 0x80, 0xBF, 1},
      {0xED, 0xED, 0x80, 0x9F, 1}, {0xEE, 0xEF, 0x80, 0xBF, 1}, {0xF0, 0xF0, 0x90, 0xBF, 2}, {0xF1, 0xF3, 0x80, 0xBF, 2},
      {0xF4, 0xF4, 0x80, 0x8F, 2}};

  private final Nfa nfa = new Nfa();
  private final JsonObject root;
  private final Deque<String> refs = new ArrayDeque<>();

  private JsonSchemaAutomaton(JsonObject root) {
    this.root = root;
  }

  /** The automaton of the schema {@code schemaJson} (a JSON object). */
  public static ByteAutomaton compile(String schemaJson) {
    JsonElement schema;
    try {
      schema = JsonParser.parseString(schemaJson);
    } catch (RuntimeException e) {
      throw new UnsupportedSchemaException("schema", abbreviated(schemaJson), "it is not JSON (" + e.getMessage() + ")");
    }
    return compileTree(schema);
  }

  private static ByteAutomaton compileTree(JsonElement schema) {
    if (schema == null || !schema.isJsonObject()) {
      throw new UnsupportedSchemaException("schema", schema, "a schema is a JSON object, such as {\"type\": \"object\", ...}");
    }
    JsonSchemaAutomaton c = new JsonSchemaAutomaton(schema.getAsJsonObject());
    Nfa.Frag f = c.value(schema.getAsJsonObject(), "#");
    return ByteAutomaton.of(c.nfa, f.start(), f.end());
  }

  /**
   * The nondeterministic automaton {@link #compile} determinises, as read-only copies: what bench's StructuredBench
   * hands to another determiniser (dk.brics.automaton) to compare it with {@link ByteAutomaton}'s.
   *
   * @param states how many states
   * @param start the start state
   * @param end the accepting state
   * @param epsilon each state's epsilon targets
   * @param ranges each state's byte edges, three ints per edge: lowest byte, highest byte, target
   */
  public record Nondeterministic(int states, int start, int end, int[][] epsilon, int[][] ranges) {}

  /** The nondeterministic automaton of the schema {@code schemaJson}, before determinisation. */
  public static Nondeterministic nondeterministic(String schemaJson) {
    JsonSchemaAutomaton c = new JsonSchemaAutomaton(JsonParser.parseString(schemaJson).getAsJsonObject());
    Nfa.Frag f = c.value(c.root, "#");
    Nfa n = c.nfa;
    int[][] eps = new int[n.size][];
    int[][] ranges = new int[n.size][];
    for (int s = 0; s < n.size; s++) {
      eps[s] = java.util.Arrays.copyOf(n.eps[s], n.epsCount[s]);
      ranges[s] = java.util.Arrays.copyOf(n.edges[s], n.edgeCount[s]);
    }
    return new Nondeterministic(n.size, f.start(), f.end(), eps, ranges);
  }

  /** Any JSON object (OpenAI's {@code response_format: {"type": "json_object"}}), nested at most {@value #ANY_DEPTH} levels. */
  public static ByteAutomaton anyObject() {
    JsonSchemaAutomaton c = new JsonSchemaAutomaton(new JsonObject());
    Nfa.Frag f = c.anyObject(ANY_DEPTH);
    return ByteAutomaton.of(c.nfa, f.start(), f.end());
  }

  // ------------------------------------------------------------------------------------------ schemas

  private Nfa.Frag value(JsonObject s, String path) {
    for (String key : s.keySet()) {
      if (!ANNOTATIONS.contains(key) && !Set.of("type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
          "minLength", "maxLength", "enum", "const", "anyOf", "allOf", "$ref").contains(key)) {
        throw new UnsupportedSchemaException(key, abbreviated(s.get(key).toString()), "at " + path + "; structured output supports type,"
            + " properties, required, additionalProperties, items, minItems, maxItems, minLength, maxLength, enum, const, anyOf,"
            + " allOf (of one schema), $ref and $defs (OpenAI's strict subset without pattern, format and numeric bounds)");
      }
    }
    if (s.has("$ref")) {
      return ref(s, path);
    }
    if (s.has("allOf")) {
      JsonArray all = array(s, "allOf", path);
      if (all.size() != 1 || !all.get(0).isJsonObject()) {
        throw new UnsupportedSchemaException("allOf", abbreviated(all.toString()), "at " + path + "; only an allOf of one schema"
            + " (as pydantic writes a $ref with a default) is supported: merge the schemas into one");
      }
      return value(all.get(0).getAsJsonObject(), path + "/allOf/0");
    }
    if (s.has("const")) {
      return literalValue(s.get("const"));
    }
    if (s.has("enum")) {
      JsonArray values = array(s, "enum", path);
      if (values.isEmpty()) {
        throw new UnsupportedSchemaException("enum", "[]", "at " + path + "; an empty enum admits no value: list at least one");
      }
      List<Nfa.Frag> choices = new ArrayList<>();
      for (JsonElement v : values) {
        choices.add(literalValue(v));
      }
      return nfa.alt(choices.toArray(Nfa.Frag[]::new));
    }
    if (s.has("anyOf")) {
      JsonArray any = array(s, "anyOf", path);
      if (any.isEmpty()) {
        throw new UnsupportedSchemaException("anyOf", "[]", "at " + path + "; an empty anyOf admits no value: list at least one schema");
      }
      List<Nfa.Frag> choices = new ArrayList<>();
      for (int i = 0; i < any.size(); i++) {
        if (!any.get(i).isJsonObject()) {
          throw new UnsupportedSchemaException("anyOf", abbreviated(any.toString()), "at " + path + "; anyOf lists schemas (JSON objects)");
        }
        choices.add(value(any.get(i).getAsJsonObject(), path + "/anyOf/" + i));
      }
      return nfa.alt(choices.toArray(Nfa.Frag[]::new));
    }
    JsonElement type = s.get("type");
    if (type == null) {
      if (s.has("properties")) {
        return object(s, path);
      }
      return any(ANY_DEPTH);
    }
    if (type.isJsonArray()) {
      List<Nfa.Frag> choices = new ArrayList<>();
      for (JsonElement t : type.getAsJsonArray()) {
        choices.add(typed(s, t, path));
      }
      if (choices.isEmpty()) {
        throw new UnsupportedSchemaException("type", "[]", "at " + path + "; list at least one type");
      }
      return nfa.alt(choices.toArray(Nfa.Frag[]::new));
    }
    return typed(s, type, path);
  }

  private Nfa.Frag typed(JsonObject s, JsonElement type, String path) {
    String t = type.isJsonPrimitive() && type.getAsJsonPrimitive().isString() ? type.getAsString() : "";
    return switch (t) {
      case "object" -> s.has("properties") ? object(s, path) : anyObject(ANY_DEPTH);
      case "array" -> array(s, path);
      case "string" -> string(bound(s, "minLength", 0, path), bound(s, "maxLength", -1, path));
      case "number" -> number(false);
      case "integer" -> number(true);
      case "boolean" -> nfa.alt(nfa.literal("true"), nfa.literal("false"));
      case "null" -> nfa.literal("null");
      default -> throw new UnsupportedSchemaException("type", type, "at " + path + "; expected object, array, string, number, integer,"
          + " boolean or null");
    };
  }

  private Nfa.Frag ref(JsonObject s, String path) {
    String ref = s.get("$ref").getAsString();
    if (refs.contains(ref)) {
      throw new UnsupportedSchemaException("$ref", ref, "at " + path + " it refers back to itself (through " + String.join(" -> ", refs)
          + "): recursive schemas nest without bound, which a finite automaton cannot follow; unroll it to a fixed depth");
    }
    JsonElement target = null;
    for (String prefix : List.of("#/$defs/", "#/definitions/")) {
      if (ref.startsWith(prefix)) {
        JsonElement defs = root.get(prefix.substring(2, prefix.length() - 1));
        if (defs != null && defs.isJsonObject()) {
          target = defs.getAsJsonObject().get(ref.substring(prefix.length()));
        }
      }
    }
    if (ref.equals("#")) {
      target = root;
    }
    if (target == null || !target.isJsonObject()) {
      throw new UnsupportedSchemaException("$ref", ref, "at " + path + "; it names no schema: refer to #/$defs/NAME of the root schema");
    }
    refs.push(ref);
    try {
      return value(target.getAsJsonObject(), ref);
    } finally {
      refs.pop();
    }
  }

  private Nfa.Frag object(JsonObject s, String path) {
    JsonElement p = s.get("properties");
    if (!p.isJsonObject()) {
      throw new UnsupportedSchemaException("properties", abbreviated(p.toString()), "at " + path + "; expected an object of property schemas");
    }
    Set<String> required = new java.util.HashSet<>();
    if (s.has("required")) {
      for (JsonElement r : array(s, "required", path)) {
        required.add(r.getAsString());
      }
    }
    List<Map.Entry<String, JsonElement>> props = new ArrayList<>(p.getAsJsonObject().entrySet());
    for (String r : required) {
      if (!p.getAsJsonObject().has(r)) {
        throw new UnsupportedSchemaException("required", r, "at " + path + "; property '" + r + "' is required but not in properties:"
            + " give it a schema in properties");
      }
    }
    // Two tracks: before any property was written (no comma yet) and after one was.
    int before = nfa.state();
    int after = nfa.state();
    Nfa.Frag open = nfa.literal("{");
    nfa.eps(open.end(), before);
    for (Map.Entry<String, JsonElement> e : props) {
      if (!e.getValue().isJsonObject()) {
        throw new UnsupportedSchemaException("properties", e.getKey(), "at " + path + "; each property's schema is a JSON object");
      }
      String sub = path + "/properties/" + e.getKey();
      int nextBefore = nfa.state();
      int nextAfter = nfa.state();
      Nfa.Frag first = nfa.seq(nfa.literal(quoted(e.getKey()) + ":"), value(e.getValue().getAsJsonObject(), sub));
      nfa.eps(before, first.start());
      nfa.eps(first.end(), nextAfter);
      Nfa.Frag later = nfa.seq(nfa.literal("," + quoted(e.getKey()) + ":"), value(e.getValue().getAsJsonObject(), sub));
      nfa.eps(after, later.start());
      nfa.eps(later.end(), nextAfter);
      if (!required.contains(e.getKey())) {
        nfa.eps(before, nextBefore);
        nfa.eps(after, nextAfter);
      }
      before = nextBefore;
      after = nextAfter;
    }
    Nfa.Frag close = nfa.literal("}");
    nfa.eps(before, close.start());
    nfa.eps(after, close.start());
    return new Nfa.Frag(open.start(), close.end());
  }

  private Nfa.Frag array(JsonObject s, String path) {
    int min = bound(s, "minItems", 0, path);
    int max = bound(s, "maxItems", -1, path);
    JsonElement items = s.get("items");
    if (items != null && !items.isJsonObject()) {
      throw new UnsupportedSchemaException("items", abbreviated(items.toString()), "at " + path + "; items is one schema (a JSON object);"
          + " tuples (a list of schemas) are not supported");
    }
    Nfa.Maker item = items == null ? () -> any(ANY_DEPTH - 1) : () -> value(items.getAsJsonObject(), path + "/items");
    return nfa.seq(nfa.literal("["), nfa.separated(item, () -> nfa.literal(","), min, max), nfa.literal("]"));
  }

  private int bound(JsonObject s, String key, int dflt, String path) {
    JsonElement v = s.get(key);
    if (v == null) {
      return dflt;
    }
    if (!v.isJsonPrimitive() || !v.getAsJsonPrimitive().isNumber() || v.getAsDouble() != Math.floor(v.getAsDouble())
        || v.getAsDouble() < 0 || v.getAsDouble() > MAX_BOUNDED) {
      throw new UnsupportedSchemaException(key, v, "at " + path + "; expected a whole number from 0 to " + MAX_BOUNDED
          + " (larger bounds unroll into too large an automaton)");
    }
    int b = v.getAsInt();
    if (key.startsWith("max") && s.has(key.replace("max", "min")) && s.get(key.replace("max", "min")).getAsInt() > b) {
      throw new UnsupportedSchemaException(key, v, "at " + path + "; it is below " + key.replace("max", "min") + ": no value fits");
    }
    return b;
  }

  // ------------------------------------------------------------------------------------------ values

  /** Exactly {@code v} in compact JSON. */
  private Nfa.Frag literalValue(JsonElement v) {
    return nfa.literal(v.toString().getBytes(StandardCharsets.UTF_8)); // Gson writes compact JSON, escaped as JSON requires
  }

  private Nfa.Frag any(int depth) {
    List<Nfa.Frag> choices = new ArrayList<>(List.of(string(0, -1), number(false), nfa.literal("true"), nfa.literal("false"),
        nfa.literal("null")));
    if (depth > 0) {
      choices.add(anyObject(depth));
      choices.add(nfa.seq(nfa.literal("["), nfa.separated(() -> any(depth - 1), () -> nfa.literal(","), 0, -1), nfa.literal("]")));
    }
    return nfa.alt(choices.toArray(Nfa.Frag[]::new));
  }

  private Nfa.Frag anyObject(int depth) {
    Nfa.Maker member = () -> nfa.seq(string(0, -1), nfa.literal(":"), any(depth - 1));
    return nfa.seq(nfa.literal("{"), nfa.separated(member, () -> nfa.literal(","), 0, -1), nfa.literal("}"));
  }

  /** A JSON string of {@code min} to {@code max} characters ({@code max} -1: unbounded). */
  private Nfa.Frag string(int min, int max) {
    return nfa.seq(nfa.literal("\""), nfa.repeat(this::character, min, max), nfa.literal("\""));
  }

  /** One character of a JSON string: well-formed UTF-8 but {@code "}, {@code \} and controls, or an escape. */
  private Nfa.Frag character() {
    int s = nfa.state();
    int e = nfa.state();
    nfa.range(s, 0x20, 0x21, e);
    nfa.range(s, 0x23, 0x5B, e);
    nfa.range(s, 0x5D, 0x7F, e);
    // Well-formed UTF-8 (RFC 3629): a lead byte range, the second byte's range, then plain continuation bytes.
    for (int[] r : UTF8) {
      int second = nfa.state();
      nfa.range(s, r[0], r[1], second);
      nfa.range(second, r[2], r[3], tail(r[4], e));
    }
    int esc = nfa.state();
    nfa.range(s, '\\', '\\', esc);
    for (char c : "\"\\/bfnrt".toCharArray()) {
      nfa.range(esc, c, c, e);
    }
    int u = nfa.state();
    nfa.range(esc, 'u', 'u', u);
    int at = u;
    for (int i = 0; i < 4; i++) {
      int next = i == 3 ? e : nfa.state();
      nfa.range(at, '0', '9', next);
      nfa.range(at, 'a', 'f', next);
      nfa.range(at, 'A', 'F', next);
      at = next;
    }
    return new Nfa.Frag(s, e);
  }

  /** A state from which {@code n} continuation bytes lead to {@code end}. */
  private int tail(int n, int end) {
    int at = end;
    for (int i = 0; i < n; i++) {
      int prev = nfa.state();
      nfa.range(prev, 0x80, 0xBF, at);
      at = prev;
    }
    return at;
  }

  private Nfa.Frag number(boolean integer) {
    Nfa.Frag intPart = nfa.alt(nfa.literal("0"), nfa.seq(nfa.bytes('1', '9'), nfa.repeat(() -> nfa.bytes('0', '9'), 0, MAX_DIGITS - 1)));
    Nfa.Frag n = nfa.seq(nfa.optional(nfa.literal("-")), intPart);
    if (integer) {
      return n;
    }
    Nfa.Frag fraction = nfa.optional(nfa.seq(nfa.literal("."), nfa.repeat(() -> nfa.bytes('0', '9'), 1, MAX_DIGITS)));
    Nfa.Frag exponent = nfa.optional(nfa.seq(nfa.alt(nfa.literal("e"), nfa.literal("E")), nfa.optional(nfa.alt(nfa.literal("+"),
        nfa.literal("-"))), nfa.repeat(() -> nfa.bytes('0', '9'), 1, 2)));
    return nfa.seq(n, fraction, exponent);
  }

  // ------------------------------------------------------------------------------------------ helpers

  private static JsonArray array(JsonObject s, String key, String path) {
    JsonElement v = s.get(key);
    if (!v.isJsonArray()) {
      throw new UnsupportedSchemaException(key, abbreviated(v.toString()), "at " + path + "; expected a list");
    }
    return v.getAsJsonArray();
  }

  private static String quoted(String key) {
    return new JsonPrimitive(key).toString();
  }

  private static String abbreviated(String text) {
    return text.length() <= 80 ? text : text.substring(0, 77) + "...";
  }
}
