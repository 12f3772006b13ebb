package dev.xlaactors.runtime;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.CompileException;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The parameter types of a StableHLO program's {@code @main} function, read from its text. PJRT does not
 * report parameter types, and a run with mismatched arguments must be refused in Java with a clear
 * message, so the runtime reads them from the program itself.
 *
 * @param parameters the types of {@code @main}'s parameters, in order; {@code !stablehlo.token}
 *     parameters are not arguments (the runtime makes a fresh token for each run) and are left out
 * @param donors the positions (in {@code parameters}) of the parameters the program lets a run donate:
 *     those with {@code tf.aliasing_output = N} (aliased to output N, JAX's {@code donate_argnums}) or
 *     {@code jax.buffer_donor = true}; PJRT reuses a donated argument's memory for an output
 */
public record ProgramSignature(List<TensorType> parameters, java.util.Set<Integer> donors) {
  static final Pattern MAIN = Pattern.compile("func\\.func\\s+(?:public\\s+)?@main\\s*\\(");
  private static final Pattern DONOR =
      Pattern.compile("\\btf\\.aliasing_output\\s*=|\\bjax\\.buffer_donor\\s*=\\s*true\\b");

  public ProgramSignature {
    parameters = List.copyOf(parameters);
    donors = java.util.Set.copyOf(donors);
  }

  /** A signature whose parameters no run may donate. */
  public ProgramSignature(List<TensorType> parameters) {
    this(parameters, java.util.Set.of());
  }

  // Custom-call targets of JAX's Python callbacks (pure_callback, io_callback, debug.print/callback).
  private static final Pattern PYTHON_CALLBACK =
      Pattern.compile("@(xla_ffi_python_cpu_callback|xla_ffi_python_gpu_callback|xla_python_cpu_callback|xla_python_gpu_callback)\\b");

  /** Reads {@code @main}'s parameters; a program without one is a {@link CompileException}. */
  public static ProgramSignature parse(String text) {
    String program = withoutComments(text); // same length: a position in it is a position in text
    Matcher python = PYTHON_CALLBACK.matcher(program);
    if (python.find()) {
      throw new CompileException(
          ErrorCode.INVALID_ARGUMENT,
          "the program calls a Python callback (custom call @" + python.group(1) + ", from jax.pure_callback, "
              + "io_callback or jax.debug.print): it lives in the Python process that exported the program and "
              + "cannot cross to the JVM. Call a Java callback instead: jax.ffi.ffi_call(\"xla_actors.host_callback\", "
              + "result_shape, has_side_effect=True)(x, callback=\"<name>\") and register <name> with CallbackRuntime");
    }
    Matcher m = MAIN.matcher(program);
    if (!m.find()) {
      throw new CompileException(
          ErrorCode.INVALID_ARGUMENT,
          "the program has no 'func.func @main(...)': XLA runs the function named main");
    }
    int close = closing(program, m.end() - 1);
    if (close < 0) {
      throw new CompileException(ErrorCode.INVALID_ARGUMENT, "the parameter list of @main is not closed");
    }
    List<String> pieces = split(program.substring(m.end(), close));
    List<TensorType> types = new ArrayList<>();
    java.util.Set<Integer> donors = new java.util.HashSet<>();
    for (int p = 0; p < pieces.size(); p++) {
      String piece = pieces.get(p);
      int colon = piece.indexOf(':');
      if (piece.substring(colon + 1).trim().startsWith("!stablehlo.token")) {
        continue; // a token: made fresh for each run, not an argument (see TokenPassThrough)
      }
      int tensor = piece.indexOf("tensor<", colon < 0 ? 0 : colon);
      if (tensor < 0) {
        throw new CompileException(
            ErrorCode.UNIMPLEMENTED,
            "parameter " + p + " of @main is not a ranked tensor (" + piece.trim() + "); only tensors are supported");
      }
      int end = matchingAngle(piece, tensor + "tensor".length());
      String type = piece.substring(tensor, end + 1);
      if (type.contains("?")) {
        throw new CompileException(
            ErrorCode.UNIMPLEMENTED,
            "parameter " + p + " of @main has a symbolic dimension (" + type + "): XLA compiles static shapes, and "
                + "the plugin does not refine them from the arguments; export with concrete shapes, e.g. "
                + "jax.jit(f).lower(*example_args).as_text() or jax.export.export(jax.jit(f))(*concrete_shape_dtype_structs)");
      }
      if (DONOR.matcher(piece.substring(end + 1)).find()) {
        donors.add(types.size());
      }
      try {
        types.add(TensorType.parseMlir(piece.substring(tensor, end + 1)));
      } catch (RuntimeException e) {
        throw new CompileException(ErrorCode.UNIMPLEMENTED, "parameter " + p + " of @main: " + e.getMessage());
      }
    }
    return new ProgramSignature(types, donors);
  }

  /**
   * {@code text} with every {@code //} comment (outside string literals) blanked out, so that {@code
   * func.func @main(...)} written in a comment is not taken for the real one.
   */
  static String withoutComments(String text) {
    StringBuilder out = new StringBuilder(text);
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c == '"') {
        i = skipString(text, i);
      } else if (c == '/' && i + 1 < text.length() && text.charAt(i + 1) == '/') {
        while (i < text.length() && text.charAt(i) != '\n') {
          out.setCharAt(i, ' ');
          i++;
        }
      }
    }
    return out.toString();
  }

  /**
   * The index of the bracket closing the one at {@code open} ('(', '{', '<' or '['), or -1 if it is never
   * closed. Brackets nest across kinds (types and attributes nest all four), string literals are skipped,
   * and the '>' of a function type's arrow closes nothing.
   */
  static int closing(String s, int open) {
    int depth = 0;
    for (int i = open; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"') {
        i = skipString(s, i);
      } else if (c == '(' || c == '{' || c == '[' || c == '<') {
        depth++;
      } else if (c == ')' || c == '}' || c == ']' || (c == '>' && (i == 0 || s.charAt(i - 1) != '-'))) {
        depth--;
        if (depth == 0) {
          return i;
        }
      }
    }
    return -1;
  }

  /** {@code list} split at its top-level commas (bracketed as for {@link #closing}); no blank last piece. */
  static List<String> split(String list) {
    List<String> pieces = new ArrayList<>();
    int depth = 0;
    int start = 0;
    for (int i = 0; i < list.length(); i++) {
      char c = list.charAt(i);
      if (c == '"') {
        i = skipString(list, i);
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

  /** The index of the quote closing the string literal that opens at {@code quote}. */
  static int skipString(String s, int quote) {
    int i = quote + 1;
    while (i < s.length() && s.charAt(i) != '"') {
      if (s.charAt(i) == '\\') {
        i++;
      }
      i++;
    }
    return i;
  }

  private static int matchingAngle(String s, int open) {
    int depth = 0;
    for (int i = open; i < s.length(); i++) {
      if (s.charAt(i) == '<') {
        depth++;
      } else if (s.charAt(i) == '>' && --depth == 0) {
        return i;
      }
    }
    throw new CompileException(ErrorCode.INVALID_ARGUMENT, "unclosed tensor type in '" + s.trim() + "'");
  }
}
