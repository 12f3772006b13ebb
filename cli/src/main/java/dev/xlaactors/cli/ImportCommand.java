package dev.xlaactors.cli;

import dev.xlaactors.runtime.model.ModelPackage;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * {@code import hf HF_DIR --out PKG}: a Hugging Face checkpoint directory becomes a model package. The
 * conversion is {@code tools/hf_import.py} (JAX exports the programs), run in the JAX venv of
 * {@code tools/jax-env.sh} (made on first use); the package it writes is then opened and checked as every
 * user of it will open it.
 */
final class ImportCommand {
  static final String USAGE = "usage: bin/xla-actors import hf HF_DIR --out PKG [--dtype as-is|f32|bf16] [--slots 1,4] "
      + "[--score-length N] [--prefill-length N] [--embed-batches 1,4] [--kernels native|xla] [--quantize none|int8] "
      + "[--tiktoken ENCODING]";
  private static final List<String> KERNELS = List.of("native", "xla");
  private static final List<String> QUANTIZE = List.of("none", "int8");
  private static final List<String> TIKTOKEN = List.of("r50k_base", "p50k_base", "cl100k_base", "o200k_base");

  private ImportCommand() {}

  static int run(List<String> args, Path home, PrintStream out, PrintStream err) throws UsageException, IOException, InterruptedException {
    CommandLine line = CommandLine.parse("import", args,
        Set.of("--out", "--dtype", "--slots", "--score-length", "--prefill-length", "--embed-batches", "--kernels",
            "--quantize", "--tiktoken"), Set.of());
    line.expectPositional(2, 2, "a format and a checkpoint directory: import hf HF_DIR --out PKG");
    if (!line.positional().get(0).equals("hf")) {
      throw new UsageException("import: the format '" + line.positional().get(0) + "' is not known; the one format is 'hf' "
          + "(a Hugging Face checkpoint directory)");
    }
    Path hfDir = Path.of(line.positional().get(1));
    if (!Files.isDirectory(hfDir)) {
      throw new UsageException("import: " + hfDir + " is not a directory (give the checkpoint's directory, which holds config.json)");
    }
    if (!Files.isRegularFile(hfDir.resolve("config.json"))) {
      throw new UsageException("import: " + hfDir + " has no config.json: it is not a Hugging Face checkpoint directory");
    }
    Path outDir = Path.of(line.value("--out").orElseThrow(() -> new UsageException("import: --out PKG is required (the package "
        + "directory to write)")));
    String dtype = line.value("--dtype").orElse("as-is");
    if (!List.of("as-is", "f32", "bf16").contains(dtype)) {
      throw new UsageException("import: --dtype takes as-is, f32 or bf16, got '" + dtype + "'");
    }
    choice(line, "--kernels", KERNELS, "native: the bridge's FFI matmul kernels where XLA's dots are slow; xla: XLA's dots alone");
    choice(line, "--quantize", QUANTIZE, "int8 stores the matmul weights as Q8_0-style int8");
    choice(line, "--tiktoken", TIKTOKEN, "for a checkpoint without tokenizer.json: r50k_base is GPT-2's vocabulary");
    line.integer("--score-length", null, 1, 1 << 20);
    line.integer("--prefill-length", null, 1, 1 << 20);
    for (String option : List.of("--slots", "--embed-batches")) {
      if (line.value(option).isPresent()) {
        CommandLine.tokenLists("import", option, line.value(option).get()); // comma-separated positive integers
      }
    }
    List<String> command = new ArrayList<>(List.of(python(home, err), home.resolve("tools/hf_import.py").toString(),
        hfDir.toString(), "--out", outDir.toString(), "--dtype", dtype));
    for (String option : List.of("--slots", "--score-length", "--prefill-length", "--embed-batches", "--kernels", "--quantize",
        "--tiktoken")) {
      if (line.value(option).isPresent()) {
        command.add(option);
        command.add(line.value(option).get());
      }
    }
    Process p = new ProcessBuilder(command).redirectOutput(ProcessBuilder.Redirect.PIPE)
        .redirectError(ProcessBuilder.Redirect.PIPE).start();
    Thread errors = new Thread(() -> copy(p.getErrorStream(), err), "hf_import stderr");
    errors.start();
    String printed = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    int status = p.waitFor();
    errors.join();
    if (status != 0) {
      err.println("import: tools/hf_import.py failed (exit " + status + ")" + (printed.isBlank() ? "" : ": " + printed.strip()));
      return status == 2 ? 2 : 1;
    }
    ModelPackage pkg = ModelPackage.open(outDir);
    out.println("imported " + hfDir + " as model '" + pkg.name() + "' (" + pkg.kind().jsonName() + ", " + pkg.weightTypes().size()
        + " tensors, " + pkg.programs().size() + " programs) into " + outDir);
    return 0;
  }

  private static void choice(CommandLine line, String option, List<String> allowed, String hint) throws UsageException {
    if (line.value(option).isPresent() && !allowed.contains(line.value(option).get())) {
      throw new UsageException("import: " + option + " takes " + String.join(", ", allowed) + ", got '" + line.value(option).get()
          + "' (" + hint + ")");
    }
  }

  /** The JAX venv's python (tools/jax-env.sh makes the venv on first use, telling {@code err}). */
  private static String python(Path home, PrintStream err) throws IOException, InterruptedException {
    Path script = home.resolve("tools/jax-env.sh");
    if (!Files.isRegularFile(script)) {
      throw new IOException("no " + script + ": run bin/xla-actors from an xla-actors checkout (-Ddev.xlaactors.cli.home names it)");
    }
    Process p = new ProcessBuilder("bash", script.toString()).redirectError(ProcessBuilder.Redirect.PIPE).start();
    Thread errors = new Thread(() -> copy(p.getErrorStream(), err), "jax-env stderr");
    errors.start();
    String python = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
    int status = p.waitFor();
    errors.join();
    if (status != 0 || python.isEmpty()) {
      throw new IOException("tools/jax-env.sh could not make the JAX venv (exit " + status + "); see the lines above");
    }
    return python;
  }

  private static void copy(java.io.InputStream in, PrintStream to) {
    try {
      in.transferTo(to);
    } catch (IOException ignored) {
      // the process ended: nothing more to copy
    }
  }
}
