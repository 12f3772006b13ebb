package dev.xlaactors.http;

import java.beans.FeatureDescriptor;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import jinjava.javax.el.ELContext;
import jinjava.javax.el.ELResolver;

/**
 * The methods of Python's {@code str} that chat templates call on strings ({@code content.rstrip()},
 * {@code content.split('</think>')}, {@code role.startswith('tool')}) and Java's {@code String} lacks or
 * spells otherwise: {@code strip}, {@code lstrip}, {@code rstrip} (with or without characters),
 * {@code startswith}, {@code endswith} (a string or a list of them), {@code split} (on whitespace or a
 * separator, with a maximum), {@code lower}, {@code upper}, {@code title}, {@code capitalize}, {@code find}.
 * Whitespace is Python's ({@code str.isspace}). Resolves nothing else, so Jinjava's own resolver answers the
 * rest. Stateless and thread-safe.
 */
final class PythonStringMethods extends ELResolver {

  @Override
  public Object invoke(ELContext context, Object base, Object method, Class<?>[] paramTypes, Object[] params) {
    if (!(base instanceof String s) || !(method instanceof String name)) {
      return null;
    }
    Object[] args = params == null ? new Object[0] : params;
    Object result;
    switch (name) {
      case "strip" -> result = args.length == 0 || args[0] == null ? stripped(s, null, true, true) : stripped(s, args[0].toString(), true, true);
      case "lstrip" -> result = stripped(s, args.length == 0 || args[0] == null ? null : args[0].toString(), true, false);
      case "rstrip" -> result = stripped(s, args.length == 0 || args[0] == null ? null : args[0].toString(), false, true);
      case "startswith" -> result = args.length == 1 ? affix(s, args[0], true) : null;
      case "endswith" -> result = args.length == 1 ? affix(s, args[0], false) : null;
      case "split" -> result = split(s, args.length > 0 && args[0] != null ? args[0].toString() : null,
          args.length > 1 ? ((Number) args[1]).intValue() : -1);
      case "lower" -> result = args.length == 0 ? s.toLowerCase(Locale.ROOT) : null;
      case "upper" -> result = args.length == 0 ? s.toUpperCase(Locale.ROOT) : null;
      case "title" -> result = args.length == 0 ? title(s) : null;
      case "capitalize" -> result = args.length == 0 ? (s.isEmpty() ? s : s.substring(0, 1).toUpperCase(Locale.ROOT)
          + s.substring(1).toLowerCase(Locale.ROOT)) : null;
      case "find" -> result = args.length == 1 && args[0] != null ? (long) s.indexOf(args[0].toString()) : null;
      default -> result = null;
    }
    if (result != null) {
      context.setPropertyResolved(true);
    }
    return result;
  }

  /** Python's {@code str.isspace} for one character. */
  private static boolean pythonSpace(char c) {
    return Character.isWhitespace(c) || Character.isSpaceChar(c) || c == '\u0085';
  }

  private static String stripped(String s, String chars, boolean left, boolean right) {
    int from = 0;
    int to = s.length();
    while (left && from < to && (chars == null ? pythonSpace(s.charAt(from)) : chars.indexOf(s.charAt(from)) >= 0)) {
      from++;
    }
    while (right && to > from && (chars == null ? pythonSpace(s.charAt(to - 1)) : chars.indexOf(s.charAt(to - 1)) >= 0)) {
      to--;
    }
    return s.substring(from, to);
  }

  private static Boolean affix(String s, Object what, boolean start) {
    if (what instanceof Iterable<?> options) {
      for (Object o : options) {
        if (o != null && (start ? s.startsWith(o.toString()) : s.endsWith(o.toString()))) {
          return true;
        }
      }
      return false;
    }
    return what != null && (start ? s.startsWith(what.toString()) : s.endsWith(what.toString()));
  }

  /** Python's {@code str.split(sep, maxsplit)}: on runs of whitespace (no empty parts) when {@code sep} is null. */
  private static List<String> split(String s, String sep, int max) {
    List<String> out = new ArrayList<>();
    if (sep == null) {
      int i = 0;
      while (i < s.length()) {
        while (i < s.length() && pythonSpace(s.charAt(i))) {
          i++;
        }
        if (i == s.length()) {
          break;
        }
        if (max >= 0 && out.size() == max) {
          out.add(stripped(s.substring(i), null, false, true));
          break;
        }
        int j = i;
        while (j < s.length() && !pythonSpace(s.charAt(j))) {
          j++;
        }
        out.add(s.substring(i, j));
        i = j;
      }
      return out;
    }
    if (sep.isEmpty()) {
      throw new IllegalArgumentException("empty separator");
    }
    int from = 0;
    for (int at = s.indexOf(sep); at >= 0 && (max < 0 || out.size() < max); at = s.indexOf(sep, from)) {
      out.add(s.substring(from, at));
      from = at + sep.length();
    }
    out.add(s.substring(from));
    return out;
  }

  private static String title(String s) {
    StringBuilder out = new StringBuilder(s.length());
    boolean previousCased = false;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      out.append(previousCased ? Character.toLowerCase(c) : Character.toUpperCase(c));
      previousCased = Character.isLetter(c);
    }
    return out.toString();
  }

  @Override
  public Class<?> getCommonPropertyType(ELContext context, Object base) {
    return null;
  }

  @Override
  public Iterator<FeatureDescriptor> getFeatureDescriptors(ELContext context, Object base) {
    return null;
  }

  @Override
  public Class<?> getType(ELContext context, Object base, Object property) {
    return null;
  }

  @Override
  public Object getValue(ELContext context, Object base, Object property) {
    return null;
  }

  @Override
  public boolean isReadOnly(ELContext context, Object base, Object property) {
    return true;
  }

  @Override
  public void setValue(ELContext context, Object base, Object property, Object value) {
    // never resolves a property: Jinjava's resolver does
  }
}
