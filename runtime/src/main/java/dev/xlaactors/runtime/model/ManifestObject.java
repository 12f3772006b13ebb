package dev.xlaactors.runtime.model;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One JSON object of a manifest, read key by key with the type each key must have: every refusal names the
 * file, the key's path ({@code programs[2].role}), what was expected and what was found. A key present with
 * JSON {@code null} reads as absent (the manifest's way to say "not set").
 */
final class ManifestObject {
  private final String file;
  private final String where;
  private final Map<?, ?> members;

  private ManifestObject(String file, String where, Map<?, ?> members) {
    this.file = file;
    this.where = where;
    this.members = members;
  }

  /** {@code value} as the object at {@code where} ({@code ""} for the top level) of {@code file}. */
  static ManifestObject of(String file, String where, Object value) {
    if (!(value instanceof Map<?, ?> map)) {
      throw new InvalidArgumentException(file + ": " + (where.isEmpty() ? "the manifest" : "'" + where + "'")
          + " must be a JSON object, got " + describe(value));
    }
    return new ManifestObject(file, where, map);
  }

  /** Refuses any key but {@code allowed}, naming it and the allowed keys. */
  ManifestObject allowOnly(List<String> allowed) {
    for (Object key : members.keySet()) {
      if (!allowed.contains(key)) {
        throw invalid((String) key, "is not a key of " + (where.isEmpty() ? "the manifest" : "'" + where + "'")
            + "; allowed there: " + String.join(", ", allowed) + " (see docs/model-package.md)");
      }
    }
    return this;
  }

  ManifestObject allowOnly(String... allowed) {
    return allowOnly(Arrays.asList(allowed));
  }

  /** Whether {@code key} is present and not null. */
  boolean has(String key) {
    Object v = members.get(key);
    return v != null && v != HeaderJson.NULL;
  }

  /** The path of {@code key} in messages. */
  String at(String key) {
    return where.isEmpty() ? key : where + "." + key;
  }

  /** The manifest file's name, for messages. */
  String file() {
    return file;
  }

  /** A refusal naming {@code key}: "{file}: 'key' {what}". */
  InvalidArgumentException invalid(String key, String what) {
    return new InvalidArgumentException(file + ": '" + at(key) + "' " + what);
  }

  private Object required(String key, String expected) {
    if (!has(key)) {
      throw invalid(key, "is required: expected " + expected);
    }
    return members.get(key);
  }

  String string(String key) {
    Object v = required(key, "a string");
    if (!(v instanceof String s)) {
      throw invalid(key, "must be a string, got " + describe(v));
    }
    return s;
  }

  String optionalString(String key) {
    return has(key) ? string(key) : null;
  }

  int integer(String key) {
    return toInt(key, required(key, "an integer"));
  }

  Integer optionalInteger(String key) {
    return has(key) ? integer(key) : null;
  }

  private int toInt(String key, Object v) {
    if (!(v instanceof HeaderJson.Number n) || !n.text().matches("-?[0-9]+")) {
      throw invalid(key, "must be an integer, got " + describe(v));
    }
    try {
      return Integer.parseInt(n.text());
    } catch (NumberFormatException e) {
      throw invalid(key, "is " + n.text() + ", which does not fit a 32-bit integer");
    }
  }

  Float optionalNumber(String key) {
    if (!has(key)) {
      return null;
    }
    Object v = members.get(key);
    if (!(v instanceof HeaderJson.Number n)) {
      throw invalid(key, "must be a number, got " + describe(v));
    }
    float f = Float.parseFloat(n.text());
    if (!Float.isFinite(f)) {
      throw invalid(key, "is " + n.text() + ", which is not a finite 32-bit float");
    }
    return f;
  }

  Boolean optionalBoolean(String key) {
    if (!has(key)) {
      return null;
    }
    Object v = members.get(key);
    if (!(v instanceof Boolean b)) {
      throw invalid(key, "must be true or false, got " + describe(v));
    }
    return b;
  }

  ManifestObject object(String key) {
    return of(file, at(key), required(key, "an object"));
  }

  ManifestObject optionalObject(String key) {
    return has(key) ? object(key) : null;
  }

  /** The array at {@code key}, or null when absent. */
  List<Object> optionalList(String key) {
    if (!has(key)) {
      return null;
    }
    Object v = members.get(key);
    if (!(v instanceof List<?> list)) {
      throw invalid(key, "must be an array, got " + describe(v));
    }
    return new ArrayList<>(list);
  }

  List<Object> list(String key) {
    required(key, "an array");
    return optionalList(key);
  }

  /** The array at {@code key} as integers, or null when absent. */
  List<Integer> optionalIntegers(String key) {
    List<Object> list = optionalList(key);
    if (list == null) {
      return null;
    }
    List<Integer> out = new ArrayList<>(list.size());
    for (int i = 0; i < list.size(); i++) {
      out.add(toInt(key + "[" + i + "]", list.get(i)));
    }
    return List.copyOf(out);
  }

  /** The object at {@code key} as a map of strings (empty when absent). */
  Map<String, String> strings(String key) {
    Map<String, String> out = new LinkedHashMap<>();
    if (!has(key)) {
      return out;
    }
    ManifestObject object = object(key);
    for (Map.Entry<?, ?> e : object.members.entrySet()) {
      if (!(e.getValue() instanceof String s)) {
        throw object.invalid((String) e.getKey(), "must be a string (this object holds strings only), got "
            + describe(e.getValue()));
      }
      out.put((String) e.getKey(), s);
    }
    return out;
  }

  /** The members in document order. */
  Map<?, ?> members() {
    return members;
  }

  static String describe(Object value) {
    if (value == null || value == HeaderJson.NULL) {
      return "null";
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
    if (value instanceof Boolean b) {
      return b.toString();
    }
    return "the number " + value;
  }
}
