package dev.xlaactors.runtime;

import dev.xlaactors.error.CompileException;
import dev.xlaactors.error.ErrorCode;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Runs programs whose {@code @main} takes and returns {@code !stablehlo.token}s (JAX exports with ordered
 * effects): PJRT has no token arguments or outputs, so the program's {@code @main} is renamed and a new
 * {@code @main} without the tokens calls it, making a fresh token for each token parameter ({@code
 * stablehlo.after_all}) and dropping the token results. The tokens only order effects inside one
 * execution, which a fresh token at the start of each run preserves.
 */
final class TokenPassThrough {
  private static final Pattern MAIN = Pattern.compile("func\\.func\\s+(?:public\\s+)?@main\\s*\\(");
  private static final String TOKEN = "!stablehlo.token";
  static final String RENAMED = "xla_actors_main_with_tokens";

  private TokenPassThrough() {}

  /** {@code text} with the wrapper described above if {@code @main} has token parameters or results. */
  static String rewrite(String text) {
    String program = ProgramSignature.withoutComments(text);
    Matcher m = MAIN.matcher(program);
    if (!m.find()) {
      return text; // ProgramSignature reports the missing @main
    }
    int paramsOpen = m.end() - 1;
    int paramsClose = closing(program, paramsOpen);
    List<String> params = split(program.substring(paramsOpen + 1, paramsClose));
    int arrow = program.indexOf("->", paramsClose);
    int bodyOpen = bodyStart(program, paramsClose);
    if (bodyOpen < 0) {
      return text;
    }
    List<String> results = new ArrayList<>();
    if (arrow >= 0 && arrow < bodyOpen) {
      String resultText = program.substring(arrow + 2, bodyOpen).trim();
      results = resultText.startsWith("(") ? split(resultText.substring(1, closing(resultText, 0))) : List.of(resultText);
    }
    boolean tokens = params.stream().anyMatch(p -> typeOf(p, true).equals(TOKEN))
        || results.stream().anyMatch(r -> typeOf(r, false).equals(TOKEN));
    if (!tokens) {
      return text;
    }
    int bodyClose = closing(program, bodyOpen);

    List<String> paramTypes = params.stream().map(p -> typeOf(p, true)).toList();
    List<String> resultTypes = results.stream().map(r -> typeOf(r, false)).toList();
    StringBuilder wrapper = new StringBuilder("\n  func.func public @main(");
    StringBuilder operands = new StringBuilder();
    StringBuilder body = new StringBuilder();
    int kept = 0;
    for (int i = 0; i < paramTypes.size(); i++) {
      if (i > 0) {
        operands.append(", ");
      }
      if (paramTypes.get(i).equals(TOKEN)) {
        body.append("    %token").append(i).append(" = \"stablehlo.after_all\"() : () -> !stablehlo.token\n");
        operands.append("%token").append(i);
      } else {
        wrapper.append(kept++ > 0 ? ", " : "").append("%arg").append(i).append(": ").append(paramTypes.get(i));
        operands.append("%arg").append(i);
      }
    }
    List<String> keptResults = resultTypes.stream().filter(t -> !t.equals(TOKEN)).toList();
    wrapper.append(") -> (").append(String.join(", ", keptResults)).append(") {\n").append(body);
    String call = "\"func.call\"(" + operands + ") {callee = @" + RENAMED + "} : (" + String.join(", ", paramTypes)
        + ") -> (" + String.join(", ", resultTypes) + ")";
    List<String> returned = new ArrayList<>();
    if (resultTypes.size() == 1) {
      wrapper.append("    %r = ").append(call).append('\n');
      if (!resultTypes.get(0).equals(TOKEN)) {
        returned.add("%r");
      }
    } else if (!resultTypes.isEmpty()) {
      wrapper.append("    %r:").append(resultTypes.size()).append(" = ").append(call).append('\n');
      for (int i = 0; i < resultTypes.size(); i++) {
        if (!resultTypes.get(i).equals(TOKEN)) {
          returned.add("%r#" + i);
        }
      }
    } else {
      wrapper.append("    ").append(call).append('\n');
    }
    wrapper.append("    \"func.return\"(").append(String.join(", ", returned)).append(") : (")
        .append(String.join(", ", keptResults)).append(") -> ()\n  }\n");

    String renamedHeader = "func.func private @" + RENAMED + "(";
    return text.substring(0, m.start()) + renamedHeader + text.substring(m.end(), bodyClose + 1) + wrapper
        + text.substring(bodyClose + 1);
  }

  /** The type of a parameter ({@code %x: T {attrs} loc(..)}) or a result ({@code T {attrs}}). */
  private static String typeOf(String piece, boolean parameter) {
    String s = piece.trim();
    if (parameter) {
      int colon = s.indexOf(':');
      if (colon < 0) {
        throw new CompileException(ErrorCode.INVALID_ARGUMENT, "cannot read the parameter '" + s + "' of @main");
      }
      s = s.substring(colon + 1).trim();
    }
    int end = s.length();
    int depth = 0;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '<' || c == '(' || c == '[') {
        depth++;
      } else if (c == '>' || c == ')' || c == ']') {
        depth--;
      } else if (depth == 0 && (c == '{' || c == ' ')) {
        end = i;
        break;
      }
    }
    return s.substring(0, end).trim();
  }

  /** Where {@code @main}'s body opens: the first top-level '{' after the parameter list. */
  private static int bodyStart(String s, int from) {
    int depth = 0;
    for (int i = from + 1; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"') {
        i = ProgramSignature.skipString(s, i);
      } else if (c == '(' || c == '<' || c == '[') {
        depth++;
      } else if (c == ')' || (c == '>' && s.charAt(i - 1) != '-') || c == ']') {
        depth--;
      } else if (c == '{') {
        if (depth == 0 && !attributeBrace(s, i)) {
          return i;
        }
        i = closing(s, i);
      }
    }
    return -1;
  }

  /** A '{' right after a result type opens that result's attributes, not the body. */
  private static boolean attributeBrace(String s, int brace) {
    int j = brace - 1;
    while (j >= 0 && Character.isWhitespace(s.charAt(j))) {
      j--;
    }
    // Results: "-> (tensor<..> {attrs}, ...)" are inside parentheses (depth > 0) and never reach here;
    // a single result "-> tensor<4xf32> {jax.result_info = ...} {" has attributes then the body.
    int next = closing(s, brace) + 1;
    while (next < s.length() && Character.isWhitespace(s.charAt(next))) {
      next++;
    }
    return next < s.length() && s.charAt(next) == '{' && j >= 0 && s.charAt(j) == '>';
  }

  /** The index of the bracket closing the one at {@code open} ('(', '{', '<' or '['). */
  private static int closing(String s, int open) {
    int depth = 0;
    for (int i = open; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"') {
        i = ProgramSignature.skipString(s, i);
      } else if (c == '(' || c == '{' || c == '[' || c == '<') {
        depth++;
      } else if (c == ')' || c == '}' || c == ']' || (c == '>' && s.charAt(i - 1) != '-')) {
        depth--;
        if (depth == 0) {
          return i;
        }
      }
    }
    throw new CompileException(ErrorCode.INVALID_ARGUMENT, "unbalanced brackets in @main's signature");
  }

  /** {@code list} split at its top-level commas. */
  private static List<String> split(String list) {
    List<String> pieces = new ArrayList<>();
    int depth = 0;
    int start = 0;
    for (int i = 0; i < list.length(); i++) {
      char c = list.charAt(i);
      if (c == '"') {
        i = ProgramSignature.skipString(list, i);
      } else if (c == '(' || c == '{' || c == '[' || c == '<') {
        depth++;
      } else if (c == ')' || c == '}' || c == ']' || (c == '>' && (i == 0 || list.charAt(i - 1) != '-'))) {
        depth--;
      } else if (c == ',' && depth == 0) {
        pieces.add(list.substring(start, i));
        start = i + 1;
      }
    }
    if (!list.substring(start).isBlank()) {
      pieces.add(list.substring(start));
    }
    return pieces;
  }
}
