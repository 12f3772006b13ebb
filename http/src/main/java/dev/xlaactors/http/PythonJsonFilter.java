package dev.xlaactors.http;

import com.hubspot.jinjava.interpret.JinjavaInterpreter;
import com.hubspot.jinjava.lib.filter.Filter;
import java.util.Collection;
import java.util.Map;

/**
 * The {@code tojson} filter of Hugging Face's chat-template environment: Python's
 * {@code json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)}. Templates
 * write tool definitions and tool-call arguments with it (Qwen2.5's {@code tool | tojson}, Llama 3.1's
 * {@code tojson(indent=4)}), so its spacing is part of the prompt the model was trained on: items separated by
 * {@code ", "} (by {@code ","} and a new line with an indent), keys by {@code ": "}, non-ASCII written as is, floats
 * as Python's {@code repr}. Stateless and thread-safe.
 */
final class PythonJsonFilter implements Filter {
  @Override
  public String getName() {
    return "tojson";
  }

  @Override
  public Object filter(Object var, JinjavaInterpreter interpreter, String... args) {
    return dumps(var, null, false);
  }

  @Override
  public Object filter(Object var, JinjavaInterpreter interpreter, Object[] args, Map<String, Object> kwargs) {
    Object indent = kwargs.containsKey("indent") ? kwargs.get("indent") : args.length > 0 ? args[0] : null;
    Object sort = kwargs.get("sort_keys");
    return dumps(var, indent == null ? null : ((Number) indent).intValue(), Boolean.TRUE.equals(sort));
  }

  /** {@code value} as Python's json.dumps writes it; {@code indent} null for one line. */
  static String dumps(Object value, Integer indent, boolean sortKeys) {
    StringBuilder out = new StringBuilder();
    write(out, value, indent, sortKeys, 0);
    return out.toString();
  }

  private static void write(StringBuilder out, Object v, Integer indent, boolean sortKeys, int depth) {
    if (v == null) {
      out.append("null");
    } else if (v instanceof Boolean b) {
      out.append(b ? "true" : "false");
    } else if (v instanceof Double || v instanceof Float) {
      out.append(pythonFloat(((Number) v).doubleValue()));
    } else if (v instanceof Number n) {
      out.append(n.toString());
    } else if (v instanceof Map<?, ?> map) {
      if (map.isEmpty()) {
        out.append("{}");
        return;
      }
      out.append('{');
      var entries = new java.util.ArrayList<Map.Entry<?, ?>>(map.entrySet());
      if (sortKeys) {
        entries.sort(java.util.Comparator.comparing(e -> String.valueOf(e.getKey())));
      }
      boolean first = true;
      for (Map.Entry<?, ?> e : entries) {
        separate(out, first, indent, depth + 1);
        first = false;
        string(out, String.valueOf(e.getKey()));
        out.append(": ");
        write(out, e.getValue(), indent, sortKeys, depth + 1);
      }
      close(out, indent, depth);
      out.append('}');
    } else if (v instanceof Collection<?> list) {
      if (list.isEmpty()) {
        out.append("[]");
        return;
      }
      out.append('[');
      boolean first = true;
      for (Object e : list) {
        separate(out, first, indent, depth + 1);
        first = false;
        write(out, e, indent, sortKeys, depth + 1);
      }
      close(out, indent, depth);
      out.append(']');
    } else {
      string(out, v.toString());
    }
  }

  private static void separate(StringBuilder out, boolean first, Integer indent, int depth) {
    if (indent == null) {
      if (!first) {
        out.append(", ");
      }
      return;
    }
    if (!first) {
      out.append(',');
    }
    out.append('\n').append(" ".repeat(indent * depth));
  }

  private static void close(StringBuilder out, Integer indent, int depth) {
    if (indent != null) {
      out.append('\n').append(" ".repeat(indent * depth));
    }
  }

  private static void string(StringBuilder out, String s) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        case '\b' -> out.append("\\b");
        case '\f' -> out.append("\\f");
        default -> {
          if (c < 0x20) {
            out.append(String.format(java.util.Locale.ROOT, "\\u%04x", (int) c));
          } else {
            out.append(c);
          }
        }
      }
    }
    out.append('"');
  }

  /** Python's repr of a float: the shortest text that reads back, "1.0" not "1", "1e+20" not "1.0E20". */
  private static String pythonFloat(double d) {
    if (Double.isNaN(d)) {
      return "NaN";
    }
    if (Double.isInfinite(d)) {
      return d > 0 ? "Infinity" : "-Infinity";
    }
    if (d == Math.rint(d) && Math.abs(d) < 1e16) {
      return (long) d + ".0";
    }
    String s = Double.toString(d);
    int e = s.indexOf('E');
    if (e < 0) {
      return s;
    }
    String mantissa = s.substring(0, e).replaceAll("\\.0$", "");
    int exponent = Integer.parseInt(s.substring(e + 1));
    if (exponent >= -4 && exponent < 16) { // Python writes these positionally
      return new java.math.BigDecimal(s).toPlainString();
    }
    return mantissa + "e" + (exponent < 0 ? "-" : "+") + String.format(java.util.Locale.ROOT, "%02d", Math.abs(exponent));
  }
}
