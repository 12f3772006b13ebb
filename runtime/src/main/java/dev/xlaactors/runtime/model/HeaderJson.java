package dev.xlaactors.runtime.model;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A strict JSON reader for safetensors headers (RFC 8259; no comments, no trailing commas, no duplicate
 * keys, nesting at most {@value #MAX_DEPTH} deep). Objects become {@link LinkedHashMap}s in document
 * order, arrays {@link List}s, strings {@link String}s, numbers {@link Number} records holding their text,
 * {@code true}/{@code false} {@link Boolean}s and {@code null} {@link #NULL}. The runtime has no JSON
 * library and a header needs only this much; failures are {@link Malformed} with the character offset.
 */
final class HeaderJson {
  /** Deeper nesting is refused (a header is two levels deep; this bounds the recursion). */
  static final int MAX_DEPTH = 64;

  /** JSON {@code null}. */
  static final Object NULL = new Object() {
    @Override
    public String toString() {
      return "null";
    }
  };

  /** A JSON number, as written: converted by whoever knows what it should be. */
  record Number(String text) {
    @Override
    public String toString() {
      return text;
    }
  }

  /** Malformed JSON; the message says what was expected and where. */
  static final class Malformed extends Exception {
    Malformed(String message) {
      super(message);
    }
  }

  private final String text;
  private int pos;

  private HeaderJson(String text) {
    this.text = text;
  }

  /** The single value {@code text} holds (surrounding whitespace allowed). */
  static Object parse(String text) throws Malformed {
    HeaderJson reader = new HeaderJson(text);
    reader.skipWhitespace();
    Object value = reader.value(0);
    reader.skipWhitespace();
    if (reader.pos != text.length()) {
      throw reader.error("end of the JSON after the top-level value");
    }
    return value;
  }

  private Object value(int depth) throws Malformed {
    if (depth > MAX_DEPTH) {
      throw error("at most " + MAX_DEPTH + " levels of nesting");
    }
    if (pos >= text.length()) {
      throw error("a value");
    }
    char c = text.charAt(pos);
    return switch (c) {
      case '{' -> object(depth);
      case '[' -> array(depth);
      case '"' -> string();
      case 't' -> literal("true", Boolean.TRUE);
      case 'f' -> literal("false", Boolean.FALSE);
      case 'n' -> literal("null", NULL);
      default -> {
        if (c == '-' || (c >= '0' && c <= '9')) {
          yield number();
        }
        throw error("a value");
      }
    };
  }

  private Map<String, Object> object(int depth) throws Malformed {
    pos++; // {
    Map<String, Object> members = new LinkedHashMap<>();
    skipWhitespace();
    if (peek('}')) {
      pos++;
      return members;
    }
    while (true) {
      skipWhitespace();
      if (!peek('"')) {
        throw error("a string key");
      }
      int keyAt = pos;
      String key = string();
      skipWhitespace();
      expect(':');
      skipWhitespace();
      Object value = value(depth + 1);
      if (members.putIfAbsent(key, value) != null) {
        throw new Malformed("duplicate key '" + key + "' at character " + keyAt);
      }
      skipWhitespace();
      if (peek(',')) {
        pos++;
      } else if (peek('}')) {
        pos++;
        return members;
      } else {
        throw error("',' or '}'");
      }
    }
  }

  private List<Object> array(int depth) throws Malformed {
    pos++; // [
    List<Object> elements = new ArrayList<>();
    skipWhitespace();
    if (peek(']')) {
      pos++;
      return elements;
    }
    while (true) {
      skipWhitespace();
      elements.add(value(depth + 1));
      skipWhitespace();
      if (peek(',')) {
        pos++;
      } else if (peek(']')) {
        pos++;
        return elements;
      } else {
        throw error("',' or ']'");
      }
    }
  }

  private String string() throws Malformed {
    pos++; // opening quote
    StringBuilder out = new StringBuilder();
    while (true) {
      if (pos >= text.length()) {
        throw error("a closing '\"'");
      }
      char c = text.charAt(pos++);
      if (c == '"') {
        return out.toString();
      }
      if (c < 0x20) {
        pos--;
        throw error("an escaped control character (\\u" + String.format("%04x", (int) c) + ") in a string");
      }
      if (c != '\\') {
        out.append(c);
        continue;
      }
      if (pos >= text.length()) {
        throw error("an escape sequence");
      }
      char e = text.charAt(pos++);
      switch (e) {
        case '"', '\\', '/' -> out.append(e);
        case 'b' -> out.append('\b');
        case 'f' -> out.append('\f');
        case 'n' -> out.append('\n');
        case 'r' -> out.append('\r');
        case 't' -> out.append('\t');
        case 'u' -> {
          if (pos + 4 > text.length()) {
            throw error("four hex digits after \\u");
          }
          int code = 0;
          for (int i = 0; i < 4; i++) {
            int digit = Character.digit(text.charAt(pos + i), 16);
            if (digit < 0) {
              throw error("four hex digits after \\u");
            }
            code = code * 16 + digit;
          }
          pos += 4;
          out.append((char) code); // surrogate pairs arrive as two escapes and join in the builder
        }
        default -> {
          pos--;
          throw error("an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
        }
      }
    }
  }

  private Number number() throws Malformed {
    int start = pos;
    if (peek('-')) {
      pos++;
    }
    if (peek('0')) {
      pos++;
    } else if (digits() == 0) {
      throw error("a digit");
    }
    if (peek('.')) {
      pos++;
      if (digits() == 0) {
        throw error("a digit after '.'");
      }
    }
    if (peek('e') || peek('E')) {
      pos++;
      if (peek('+') || peek('-')) {
        pos++;
      }
      if (digits() == 0) {
        throw error("a digit in the exponent");
      }
    }
    return new Number(text.substring(start, pos));
  }

  private int digits() {
    int start = pos;
    while (pos < text.length() && text.charAt(pos) >= '0' && text.charAt(pos) <= '9') {
      pos++;
    }
    return pos - start;
  }

  private Object literal(String word, Object value) throws Malformed {
    if (!text.startsWith(word, pos)) {
      throw error("a value");
    }
    pos += word.length();
    return value;
  }

  private boolean peek(char c) {
    return pos < text.length() && text.charAt(pos) == c;
  }

  private void expect(char c) throws Malformed {
    if (!peek(c)) {
      throw error("'" + c + "'");
    }
    pos++;
  }

  private void skipWhitespace() {
    while (pos < text.length()) {
      char c = text.charAt(pos);
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
        return;
      }
      pos++;
    }
  }

  private Malformed error(String expected) {
    String found;
    if (pos >= text.length()) {
      found = "the end of the header";
    } else {
      int end = Math.min(text.length(), pos + 20);
      found = "'" + text.substring(pos, end).replaceAll("\\p{Cntrl}", "?") + (end < text.length() ? "..." : "") + "'";
    }
    return new Malformed("expected " + expected + " at character " + pos + ", found " + found);
  }
}
