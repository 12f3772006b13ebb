package dev.xlaactors.graph;

import dev.xlaactors.error.CompileException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.ProgramSignature;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;

/**
 * A StableHLO module written elsewhere, typically by JAX:
 * {@code jax.jit(f).lower(*example_args).as_text()}. The XLA CPU plugin compiles such text as it is
 * (module attributes like {@code mhlo.num_replicas}, result attributes like {@code jax.result_info},
 * {@code func.func private} helpers and the pretty op syntax all pass), so nothing is rewritten; loading
 * checks up front that the text is a module with a {@code @main} whose parameters are static tensors,
 * and compile errors name the program they came from.
 *
 * @param name where the text came from (a file name or a caller's label), used in messages
 * @param text the module text, unchanged
 * @param parameterTypes the types of {@code @main}'s parameters
 */
public record ImportedProgram(String name, String text, List<TensorType> parameterTypes) {
  public ImportedProgram {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(text, "text");
    parameterTypes = List.copyOf(parameterTypes);
  }

  /** The module's StableHLO text, unchanged: the same name as {@link Graph#stablehlo()}. */
  public String stablehlo() {
    return text;
  }

  /**
   * The module text.
   *
   * @deprecated use {@link #stablehlo()}, the name {@link Graph} uses for the same thing
   */
  @Deprecated
  @Override
  public String text() {
    return text;
  }

  /** Reads a module from text; a {@link CompileException} if it has no usable {@code @main}. */
  public static ImportedProgram fromText(String name, String text) {
    if (text == null || text.isBlank()) {
      throw new CompileException(ErrorCode.INVALID_ARGUMENT, "imported program " + name + " is empty");
    }
    try {
      return new ImportedProgram(name, text, ProgramSignature.parse(text).parameters());
    } catch (CompileException e) {
      throw new CompileException(e.code(), "imported program " + name + ": " + e.getMessage());
    }
  }

  /**
   * Reads a module from a UTF-8 file, e.g. one written from {@code lowered.as_text()}. A file of MLIR
   * bytecode (a StableHLO portable artifact) is refused with the way to run it: its signature cannot be read
   * here, so it compiles through {@link XlaClient#compileModule} with the parameter types given, or, for a
   * {@code jax.export} artifact, through {@code dev.xlaactors.runtime.model.JaxExport}.
   */
  public static ImportedProgram fromFile(Path file) throws IOException {
    byte[] bytes = Files.readAllBytes(file);
    String name = file.getFileName().toString();
    if (bytes.length >= 4 && bytes[0] == 'M' && bytes[1] == 'L' && (bytes[2] & 0xff) == 0xef && bytes[3] == 'R') {
      throw new CompileException(ErrorCode.INVALID_ARGUMENT, "imported program " + name + " is MLIR bytecode (a StableHLO "
          + "portable artifact), not text: compile it with client.compileModule(name, bytes, parameterTypes, "
          + "CompileOptions.defaults()), or read a jax.export artifact (Exported.serialize()) with JaxExport.read");
    }
    return fromText(name, new String(bytes, StandardCharsets.UTF_8));
  }

  /**
   * Compiles the module (through the client's compile cache). XLA's parse and verification errors come
   * back as a {@link CompileException} that starts with this program's name.
   */
  public Executable compile(XlaClient client) {
    try {
      return client.compile(text);
    } catch (CompileException e) {
      throw new CompileException(e.code(), "imported program " + name + " does not compile: " + e.getMessage());
    }
  }
}
