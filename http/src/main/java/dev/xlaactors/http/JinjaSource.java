package dev.xlaactors.http;

/**
 * Rewrites a chat template's source, once when it is loaded, into the same template as Jinjava 2.8 parses
 * it, for two forms of Python's Jinja that Jinjava's expression grammar reads otherwise (Qwen3's template
 * has both):
 *
 * <ul>
 *   <li>A keyword argument's value is a whole expression: Jinja reads {@code namespace(i=messages|length - 1)}
 *       as {@code i=(messages|length - 1)}, Jinjava as {@code (i=messages|length) - 1} (and fails: "Cannot
 *       coerce NamedParameter to Long"). Each keyword argument's value inside a call's parentheses is put in
 *       parentheses of its own, which changes nothing in Jinja.
 *   <li>The reversing slice {@code x[::-1]}, which Jinjava's parser refuses: written {@code x|reverse}, the
 *       same elements in reverse order (Jinja's filters bind tighter than its operators, as the slice does).
 * </ul>
 *
 * <p>Only the code between {@code {{ }}} and {@code {% %}} is touched, never string literals, comments,
 * {@code {% raw %}} blocks nor the text (so the messages, which are data and never part of the source, are
 * out of its reach anyway), nor a {@code macro} or {@code call} tag's parameter list. Stateless.
 */
final class JinjaSource {
  private JinjaSource() {}

  /** {@code template} with the rewrites above; a template without those forms comes back unchanged. */
  static String forJinjava(String template) {
    StringBuilder out = new StringBuilder(template.length() + 16);
    int i = 0;
    int n = template.length();
    while (i < n) {
      int open = nextOpening(template, i);
      if (open < 0) {
        out.append(template, i, n);
        break;
      }
      out.append(template, i, open);
      char kind = template.charAt(open + 1);
      if (kind == '#') { // a comment: kept as it is
        int end = template.indexOf("#}", open + 2);
        end = end < 0 ? n : end + 2;
        out.append(template, open, end);
        i = end;
        continue;
      }
      String close = kind == '{' ? "}}" : "%}";
      int end = codeEnd(template, open + 2, close);
      String code = template.substring(open + 2, end);
      out.append(template, open, open + 2);
      String word = firstWord(code);
      if (kind == '%' && word.equals("raw")) { // the raw block's body, up to its endraw, is text
        int endraw = rawEnd(template, end + 2);
        out.append(code).append(close).append(template, Math.min(end + 2, n), endraw);
        i = endraw;
        continue;
      }
      out.append(kind == '%' && (word.equals("macro") || word.equals("call")) ? code : rewrite(code));
      out.append(template, end, Math.min(end + 2, n));
      i = Math.min(end + 2, n);
    }
    return out.toString();
  }

  private static int nextOpening(String s, int from) {
    for (int i = from; i + 1 < s.length(); i++) {
      if (s.charAt(i) == '{' && (s.charAt(i + 1) == '{' || s.charAt(i + 1) == '%' || s.charAt(i + 1) == '#')) {
        return i;
      }
    }
    return -1;
  }

  /** Where the code that starts at {@code from} ends: the index of {@code close} outside string literals. */
  private static int codeEnd(String s, int from, String close) {
    int i = from;
    while (i < s.length()) {
      char c = s.charAt(i);
      if (c == '\'' || c == '"') {
        i = literalEnd(s, i);
      } else if (s.startsWith(close, i)) {
        return i;
      } else {
        i++;
      }
    }
    return s.length();
  }

  /** The index just past the string literal that opens at {@code at}. */
  private static int literalEnd(String s, int at) {
    char quote = s.charAt(at);
    int i = at + 1;
    while (i < s.length() && s.charAt(i) != quote) {
      i += s.charAt(i) == '\\' ? 2 : 1;
    }
    return Math.min(i + 1, s.length());
  }

  private static String firstWord(String code) {
    String t = code.strip();
    if (t.startsWith("-") || t.startsWith("+")) {
      t = t.substring(1).strip();
    }
    int end = 0;
    while (end < t.length() && Character.isLetter(t.charAt(end))) {
      end++;
    }
    return t.substring(0, end);
  }

  /** Where the text after a {@code {% raw %}} tag ends: at the opening of its {@code {% endraw %}} tag. */
  private static int rawEnd(String s, int from) {
    int i = from;
    while (true) {
      int open = s.indexOf("{%", i);
      if (open < 0) {
        return s.length();
      }
      int end = codeEnd(s, open + 2, "%}");
      if (firstWord(s.substring(open + 2, end)).equals("endraw")) {
        return open;
      }
      i = open + 2;
    }
  }

  /** One tag's or expression's code with the rewrites. */
  private static String rewrite(String code) {
    StringBuilder out = new StringBuilder(code.length() + 8);
    // Per open bracket: whether it is a call's parentheses, and whether a keyword value opened in it waits for its ')'.
    boolean[] call = new boolean[code.length() + 1];
    boolean[] valueOpen = new boolean[code.length() + 1];
    int depth = 0;
    int i = 0;
    while (i < code.length()) {
      char c = code.charAt(i);
      if (c == '\'' || c == '"') {
        int end = literalEnd(code, i);
        out.append(code, i, end);
        i = end;
        continue;
      }
      if (code.startsWith("[::-1]", i)) {
        out.append("|reverse");
        i += "[::-1]".length();
        continue;
      }
      if (c == '(' || c == '[' || c == '{') {
        depth++;
        call[depth] = c == '(' && endsWithCallee(out);
        valueOpen[depth] = false;
        out.append(c);
        i++;
        if (call[depth]) {
          i = keyword(code, i, out, depth, valueOpen);
        }
        continue;
      }
      if (c == ',' && depth > 0 && call[depth]) {
        closeValue(out, depth, valueOpen);
        out.append(c);
        i = keyword(code, i + 1, out, depth, valueOpen);
        continue;
      }
      if ((c == ')' || c == ']' || c == '}') && depth > 0) {
        if (c == ')' && call[depth]) {
          closeValue(out, depth, valueOpen);
        }
        depth--;
      }
      out.append(c);
      i++;
    }
    return out.toString();
  }

  private static void closeValue(StringBuilder out, int depth, boolean[] valueOpen) {
    if (valueOpen[depth]) {
      out.append(')');
      valueOpen[depth] = false;
    }
  }

  /**
   * At the start of an argument ({@code at}, just past '(' or ','): a keyword argument {@code name=} is
   * copied with a '(' after its '=' (closed at the argument's end); returns where to go on.
   */
  private static int keyword(String code, int at, StringBuilder out, int depth, boolean[] valueOpen) {
    int i = at;
    while (i < code.length() && Character.isWhitespace(code.charAt(i))) {
      i++;
    }
    int nameEnd = i;
    while (nameEnd < code.length() && (Character.isLetterOrDigit(code.charAt(nameEnd)) || code.charAt(nameEnd) == '_')) {
      nameEnd++;
    }
    if (nameEnd == i || Character.isDigit(code.charAt(i))) {
      return at;
    }
    int eq = nameEnd;
    while (eq < code.length() && Character.isWhitespace(code.charAt(eq))) {
      eq++;
    }
    if (eq >= code.length() || code.charAt(eq) != '=' || (eq + 1 < code.length() && code.charAt(eq + 1) == '=')) {
      return at;
    }
    out.append(code, at, eq + 1).append('(');
    valueOpen[depth] = true;
    return eq + 1;
  }

  /** Whether the code so far ends with what a call's '(' follows: a name, or a ')' or ']' (a callee expression). */
  private static boolean endsWithCallee(StringBuilder out) {
    int i = out.length() - 1;
    while (i >= 0 && Character.isWhitespace(out.charAt(i))) {
      i--;
    }
    if (i < 0) {
      return false;
    }
    char c = out.charAt(i);
    if (c == ')' || c == ']') {
      return true;
    }
    if (!(Character.isLetterOrDigit(c) || c == '_')) {
      return false;
    }
    int start = i;
    while (start >= 0 && (Character.isLetterOrDigit(out.charAt(start)) || out.charAt(start) == '_')) {
      start--;
    }
    String word = out.substring(start + 1, i + 1);
    // Jinja's keywords before a '(' start a parenthesised expression, not a call: "not(a and b)", "in (...)".
    return !(word.equals("not") || word.equals("and") || word.equals("or") || word.equals("in") || word.equals("is")
        || word.equals("if") || word.equals("else") || word.equals("elif"));
  }
}
