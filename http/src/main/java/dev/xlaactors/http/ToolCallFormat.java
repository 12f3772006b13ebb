package dev.xlaactors.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.xlaactors.lm.structured.JsonSchemaAutomaton;
import dev.xlaactors.lm.structured.UnsupportedSchemaException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * How a chat answer with {@code tools} is constrained and read back. The whole answer is one JSON object (compact, as the
 * grammar writes it) that the JSON-schema grammar constrains:
 * <ul>
 *   <li>a call, {@code {"name":"NAME","arguments":{...}}} (the form Hermes-style templates such as Qwen2.5's ask for),
 *       NAME one of the tools' names and the arguments valid for that tool's {@code parameters} schema (an {@code anyOf}
 *       over the tools);</li>
 *   <li>or, with {@code tool_choice} {@code auto}, an answer in words, {@code {"response":"TEXT"}} (the response's value
 *       is the {@code response_format}'s schema instead when the request has one).</li>
 * </ul>
 * With {@code required} only the call form is allowed, with a named function only that function's; with {@code none} no
 * grammar is added (the tools still reach the chat template). So with {@code auto} the model's own logits decide between
 * words and a call at the first byte where the two forms differ ({@code n} or {@code r} after <code>{"</code>), masked as
 * every other step: no template markers are needed, and a model of random weights answers either way, always parsing
 * (llama.cpp's generic tool-call format is the same idea). The forms are short on purpose: a call costs about 25 tokens
 * more than its arguments on a byte-level vocabulary.
 *
 * <p>{@link Decoder} reads the answer's text as it streams: the call's name once whole, then its arguments as deltas; or
 * the response's text (JSON-unescaped). Stateless but for its decoders; thread-safe.
 */
final class ToolCallFormat {
  static final String CALL_PREFIX = "{\"name\":\"";
  static final String ARGUMENTS = "\",\"arguments\":";
  static final String RESPONSE_PREFIX = "{\"response\":";

  private ToolCallFormat() {}

  /**
   * The JSON schema (its text) of an answer to {@code tools} with the response format {@code format} (null: text), or null
   * when the choice is {@code none} (no constraint from the tools). A tool's schema outside the compiled subset is refused
   * naming the tool and the keyword.
   */
  static String schema(OpenAiRequest.Tools tools, OpenAiRequest.ResponseFormat format) {
    if (!tools.mayCall()) {
      return null;
    }
    JsonNodeFactory f = JsonNodeFactory.instance;
    ObjectNode root = f.objectNode();
    ObjectNode defs = f.objectNode();
    ArrayNode calls = f.arrayNode();
    for (int i = 0; i < tools.functions().size(); i++) {
      OpenAiRequest.Tool tool = tools.functions().get(i);
      ObjectNode parameters = tool.parameters() == null ? emptyObject(f) : (ObjectNode) tool.parameters().deepCopy();
      String at = "tools[" + i + "].function.parameters";
      try {
        JsonSchemaAutomaton.compile(parameters.toString()); // refused here, where the tool can be named
      } catch (UnsupportedSchemaException e) {
        throw OpenAiError.invalid(at, "tool '" + tool.name() + "': " + e.getMessage());
      }
      if (!tools.choice().equals("function") || tool.name().equals(tools.function())) {
        hoistDefinitions(parameters, defs, at);
        calls.add(object(f, "name", f.objectNode().put("const", tool.name()), "arguments", parameters));
      }
    }
    if (tools.choice().equals("auto")) {
      JsonNode response;
      if (format == null) {
        response = f.objectNode().put("type", "string");
      } else if (format.schema() == null) {
        response = f.objectNode().put("type", "object");
      } else {
        ObjectNode schema = (ObjectNode) parse(format.schema());
        hoistDefinitions(schema, defs, "response_format");
        response = schema;
      }
      calls.add(object(f, "response", response));
    }
    if (calls.size() == 1) {
      root.setAll((ObjectNode) calls.get(0));
    } else {
      root.set("anyOf", calls);
    }
    if (!defs.isEmpty()) {
      root.set("$defs", defs);
    }
    return root.toString();
  }

  private static ObjectNode emptyObject(JsonNodeFactory f) {
    ObjectNode o = f.objectNode().put("type", "object");
    o.set("properties", f.objectNode());
    return o;
  }

  /** An object schema of the properties {@code nameValue} (name, schema, ...), all required, in that order, no others. */
  private static ObjectNode object(JsonNodeFactory f, Object... nameValue) {
    ObjectNode properties = f.objectNode();
    ArrayNode required = f.arrayNode();
    for (int i = 0; i < nameValue.length; i += 2) {
      properties.set((String) nameValue[i], (JsonNode) nameValue[i + 1]);
      required.add((String) nameValue[i]);
    }
    ObjectNode o = f.objectNode().put("type", "object");
    o.set("properties", properties);
    o.set("required", required);
    o.put("additionalProperties", false);
    return o;
  }

  /**
   * Moves {@code schema}'s {@code $defs} (and {@code definitions}) to the answer's root, where its {@code #/$defs/NAME}
   * references point once it is nested; two schemas defining one name differently are refused.
   */
  private static void hoistDefinitions(ObjectNode schema, ObjectNode defs, String at) {
    for (String key : List.of("$defs", "definitions")) {
      JsonNode d = schema.remove(key);
      if (d == null) {
        continue;
      }
      if (key.equals("definitions")) { // its references say #/definitions/NAME: point them at $defs
        String text = schema.toString().replace("\"#/definitions/", "\"#/$defs/");
        schema.removeAll();
        schema.setAll((ObjectNode) parse(text));
      }
      for (Iterator<Map.Entry<String, JsonNode>> it = d.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        JsonNode before = defs.get(e.getKey());
        if (before != null && !before.equals(e.getValue())) {
          throw OpenAiError.invalid(at, "defines $defs/" + e.getKey() + " unlike another tool (or the response format) does: the "
              + "schemas of one request share their definitions; rename one");
        }
        defs.set(e.getKey(), e.getValue());
      }
    }
  }

  private static JsonNode parse(String json) {
    try {
      return TensorJson.MAPPER.readTree(json);
    } catch (java.io.IOException e) {
      throw new IllegalStateException("a schema that was JSON is not: " + e.getMessage(), e);
    }
  }

  // ------------------------------------------------------------------------------------------ reading answers

  /** What a decoder found in the text it was given so far. */
  sealed interface Event {}

  /** The call begins: its id and the function's name (its arguments follow as {@link ArgumentsDelta}s). */
  record CallStart(String id, String name) implements Event {}

  /** More of the call's arguments (a JSON text once all have come). */
  record ArgumentsDelta(String text) implements Event {}

  /** More of the answer's words (or of its response-format JSON). */
  record ContentDelta(String text) implements Event {}

  /**
   * Reads one choice's answer text as it comes (pieces in order), as events; holds back what may still turn out to be
   * the form's closing characters. Not thread-safe: one choice's pieces come one at a time.
   */
  static final class Decoder {
    private enum Phase { START, NAME, ARGUMENTS, TEXT, VALUE, DONE, RAW }

    private final StringBuilder raw = new StringBuilder();
    private final String id;
    private Phase phase = Phase.START;
    private int at; // how much of raw was read
    private String name;
    private final StringBuilder arguments = new StringBuilder();
    private final StringBuilder content = new StringBuilder();

    /** A decoder whose call, if any, has {@code id}. */
    Decoder(String id) {
      this.id = id;
    }

    /** The events that {@code piece} (the next of the answer's text) completes. */
    List<Event> feed(String piece) {
      raw.append(piece);
      List<Event> out = new ArrayList<>();
      read(out, false);
      return out;
    }

    /** The events of the text held back, at the answer's end. */
    List<Event> finish() {
      List<Event> out = new ArrayList<>();
      read(out, true);
      return out;
    }

    /** Whether the answer is (or began as) a call. */
    boolean isCall() {
      return name != null;
    }

    /**
     * Whether the answer is a call whose arguments are whole JSON (after {@link #finish}): not one cut short by
     * {@code max_tokens} or a stop string (its {@code finish_reason} stays {@code length} or {@code stop}).
     */
    boolean isWholeCall() {
      if (name == null || phase != Phase.DONE || raw.charAt(raw.length() - 1) != '}') {
        return false;
      }
      try (var parser = TensorJson.MAPPER.getFactory().createParser(arguments.toString())) {
        TensorJson.MAPPER.readTree(parser);
        return parser.nextToken() == null;
      } catch (java.io.IOException e) {
        return false;
      }
    }

    /** The call's function name (null: not a call). */
    String name() {
      return name;
    }

    /** The call's id. */
    String id() {
      return id;
    }

    /** The call's arguments so far (all of them after {@link #finish} of a whole answer). */
    String arguments() {
      return arguments.toString();
    }

    /** The words (or response-format JSON) so far; the raw text when the answer is neither form (cut short before either). */
    String content() {
      return content.toString();
    }

    private void read(List<Event> out, boolean end) {
      while (true) {
        switch (phase) {
          case START -> {
            String s = raw.toString();
            if (s.startsWith(CALL_PREFIX)) {
              at = CALL_PREFIX.length();
              phase = Phase.NAME;
            } else if (s.startsWith(RESPONSE_PREFIX + "\"")) {
              at = RESPONSE_PREFIX.length() + 1;
              phase = Phase.TEXT;
            } else if (s.length() > RESPONSE_PREFIX.length() && s.startsWith(RESPONSE_PREFIX)) {
              at = RESPONSE_PREFIX.length();
              phase = Phase.VALUE;
            } else if (end || !(CALL_PREFIX.startsWith(s) || (RESPONSE_PREFIX + "\"").startsWith(s))) {
              phase = Phase.RAW; // cut short before either form showed (or not this format at all): the text as it is
              at = 0;
            } else {
              return;
            }
          }
          case NAME -> {
            int quote = raw.indexOf("\"", at);
            if (quote < 0 || raw.length() < quote + ARGUMENTS.length()) {
              if (end) {
                phase = Phase.RAW;
                at = 0;
                continue;
              }
              return;
            }
            name = raw.substring(at, quote); // a tool's name: letters, digits, _ and -, never escaped
            at = quote + ARGUMENTS.length();
            out.add(new CallStart(id, name));
            phase = Phase.ARGUMENTS;
          }
          case ARGUMENTS -> {
            // The last character may be the form's "}": held back until the end.
            int until = end ? (raw.charAt(raw.length() - 1) == '}' ? raw.length() - 1 : raw.length()) : raw.length() - 1;
            if (until > at) {
              String delta = raw.substring(at, until);
              arguments.append(delta);
              out.add(new ArgumentsDelta(delta));
              at = until;
            }
            if (end) {
              phase = Phase.DONE;
            }
            return;
          }
          case TEXT -> {
            if (!unescape(out)) {
              return;
            }
          }
          case VALUE -> {
            int until = end ? (raw.charAt(raw.length() - 1) == '}' ? raw.length() - 1 : raw.length()) : raw.length() - 1;
            if (until > at) {
              emitContent(out, raw.substring(at, until));
              at = until;
            }
            if (end) {
              phase = Phase.DONE;
            }
            return;
          }
          case RAW -> {
            if (raw.length() > at) {
              emitContent(out, raw.substring(at));
              at = raw.length();
            }
            return;
          }
          case DONE -> {
            return;
          }
          default -> throw new IllegalStateException(phase.toString());
        }
      }
    }

    /** Reads the response string's characters up to what is incomplete; true when its closing quote was read. */
    private boolean unescape(List<Event> out) {
      StringBuilder text = new StringBuilder();
      boolean closed = false;
      while (at < raw.length()) {
        char c = raw.charAt(at);
        if (c == '"') {
          closed = true;
          at = raw.length(); // the rest is the form's "}"
          break;
        }
        if (c != '\\') {
          text.append(c);
          at++;
          continue;
        }
        if (at + 1 >= raw.length()) {
          break;
        }
        char e = raw.charAt(at + 1);
        if (e == 'u') {
          if (at + 6 > raw.length()) {
            break;
          }
          char u = (char) Integer.parseInt(raw.substring(at + 2, at + 6), 16);
          if (Character.isHighSurrogate(u)) { // its pair is the next escape: both go out together, never half a character
            if (at + 12 > raw.length()) {
              break;
            }
            text.append(u).append((char) Integer.parseInt(raw.substring(at + 8, at + 12), 16));
            at += 12;
            continue;
          }
          text.append(u);
          at += 6;
          continue;
        }
        text.append(switch (e) {
          case 'n' -> '\n';
          case 't' -> '\t';
          case 'r' -> '\r';
          case 'b' -> '\b';
          case 'f' -> '\f';
          default -> e; // \" \\ \/
        });
        at += 2;
      }
      if (text.length() > 0) {
        emitContent(out, text.toString());
      }
      if (closed) {
        phase = Phase.DONE;
      }
      return false;
    }

    private void emitContent(List<Event> out, String text) {
      content.append(text);
      out.add(new ContentDelta(text));
    }
  }
}
