package dev.xlaactors.runtime;

import dev.xlaactors.error.CompileException;
import dev.xlaactors.error.ErrorCode;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;

/**
 * Runs programs whose {@code @main} takes and returns {@code !stablehlo.token}s (JAX exports with ordered
 * effects): PJRT has no token arguments or outputs, so the program's {@code @main} is renamed and a new
 * {@code @main} without the tokens calls it, making a fresh token for each token parameter ({@code
 * stablehlo.after_all}) and dropping the token results. The tokens only order effects inside one
 * execution, which a fresh token at the start of each run preserves.
 */
final class TokenPassThrough {
  private static final String TOKEN = "!stablehlo.token";
  static final String RENAMED = "xla_actors_main_with_tokens";

  private TokenPassThrough() {}

  /** {@code text} with the wrapper described above if {@code @main} has token parameters or results. */
  static String rewrite(String text) {
    String program = ProgramSignature.withoutComments(text);
    Matcher m = ProgramSignature.MAIN.matcher(program);
    if (!m.find()) {
      return text; // ProgramSignature reports the missing @main
    }
    int paramsOpen = m.end() - 1;
    int paramsClose = ProgramSignature.closing(program, paramsOpen);
    if (paramsClose < 0) {
      return text; // ProgramSignature reports the unclosed parameter list
    }
    List<String> params = ProgramSignature.split(program.substring(paramsOpen + 1, paramsClose));
    int arrow = program.indexOf("->", paramsClose);
    int bodyOpen = bodyStart(program, paramsClose);
    if (bodyOpen < 0) {
      return text;
    }
    List<String> results = new ArrayList<>();
    if (arrow >= 0 && arrow < bodyOpen) {
      String resultText = program.substring(arrow + 2, bodyOpen).trim();
      int resultsClose = resultText.startsWith("(") ? ProgramSignature.closing(resultText, 0) : -1;
      results = resultsClose > 0 ? ProgramSignature.split(resultText.substring(1, resultsClose)) : List.of(resultText);
    }
    boolean tokens = params.stream().anyMatch(p -> typeOf(p, true).equals(TOKEN))
        || results.stream().anyMatch(r -> typeOf(r, false).equals(TOKEN));
    if (!tokens) {
      return text;
    }
    int bodyClose = ProgramSignature.closing(program, bodyOpen);
    if (bodyClose < 0) {
      return text; // XLA reports the unclosed body
    }

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
        i = ProgramSignature.closing(s, i);
        if (i < 0) {
          return -1;
        }
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
    int close = ProgramSignature.closing(s, brace);
    if (close < 0) {
      return false;
    }
    int next = close + 1;
    while (next < s.length() && Character.isWhitespace(s.charAt(next))) {
      next++;
    }
    return next < s.length() && s.charAt(next) == '{' && j >= 0 && s.charAt(j) == '>';
  }
}
