package dev.xlaactors.cli;

import dev.xlaactors.runtime.model.ModelPackage;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * {@code import hf HF_DIR --out PKG}: a Hugging Face checkpoint directory becomes a model package. The
 * conversion is {@code tools/hf_import.py} (JAX exports the programs), run in the JAX venv of
 * {@code tools/jax-env.sh} (made on first use); the package it writes is then opened and checked as every
 * user of it will open it.
 */
final class ImportCommand {
  static final String USAGE = "usage: bin/xla-actors import hf HF_DIR --out PKG [--dtype as-is|f32|bf16|f16] [--slots 1,4] "
      + "[--context-length N | --max-model-len N] [--kv-cache-memory 1GiB] [--kv-cache-dtype f32|f16|bf16] [--prefill-chunks 32,64,128] "
      + "[--decode-lengths 256,1024] [--attention-block 128] [--score-length N] [--prefill-length N] [--embed-batches 1,4] "
      + "[--kernels native|xla] [--quantize none|int8|w8a8] [--tiktoken ENCODING]";

  /** Options with one integer value each, passed on to tools/hf_import.py as given. */
  private static final List<String> INTEGERS = List.of("--score-length", "--prefill-length", "--context-length", "--max-model-len",
      "--attention-block");

  /** Options with a comma-separated list of positive integers, passed on as given. */
  private static final List<String> LISTS = List.of("--slots", "--embed-batches", "--prefill-chunks", "--decode-lengths");

  /** Options with one value of a fixed set each, passed on as given. */
  private static final Map<String, List<String>> CHOICES = Map.of(
      "--kernels", List.of("native", "xla"),
      "--quantize", List.of("none", "int8", "w8a8"),
      "--kv-cache-dtype", List.of("f32", "f16", "bf16"),
      "--tiktoken", List.of("r50k_base", "p50k_base", "cl100k_base", "o200k_base"));

  private ImportCommand() {}

  static int run(List<String> args, Path home, PrintStream out, PrintStream err) throws UsageException, IOException, InterruptedException {
    Set<String> options = new HashSet<>(Set.of("--out", "--dtype", "--kv-cache-memory"));
    options.addAll(INTEGERS);
    options.addAll(LISTS);
    options.addAll(CHOICES.keySet());
    CommandLine line = CommandLine.parse("import", args, options, Set.of());
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
    if (!List.of("as-is", "f32", "bf16", "f16").contains(dtype)) {
      throw new UsageException("import: --dtype takes as-is, f32, bf16 or f16, got '" + dtype + "'");
    }
    for (Map.Entry<String, List<String>> choice : CHOICES.entrySet()) {
      String value = line.value(choice.getKey()).orElse(null);
      if (value != null && !choice.getValue().contains(value)) {
        throw new UsageException("import: " + choice.getKey() + " takes " + String.join(", ", choice.getValue()) + ", got '"
            + value + "'");
      }
    }
    for (String option : INTEGERS) {
      line.integer(option, null, 1, 1 << 24);
    }
    if (line.value("--context-length").isPresent() && line.value("--max-model-len").isPresent()) {
      throw new UsageException("import: --context-length and --max-model-len are the same option (vLLM's name); give one");
    }
    for (String option : LISTS) {
      if (line.value(option).isPresent()) {
        CommandLine.tokenLists("import", option, line.value(option).get()); // comma-separated positive integers
      }
    }
    String memory = line.value("--kv-cache-memory").orElse(null);
    if (memory != null && !memory.matches("\\d+(K|KiB|M|MiB|G|GiB)?") || "0".equals(memory)) {
      throw new UsageException("import: --kv-cache-memory takes a byte count such as 1GiB, 512MiB or 1073741824, got '" + memory
          + "'");
    }
    List<String> command = new ArrayList<>(List.of(python(home, err), home.resolve("tools/hf_import.py").toString(),
        hfDir.toString(), "--out", outDir.toString(), "--dtype", dtype));
    List<String> passed = new ArrayList<>(INTEGERS);
    passed.addAll(LISTS);
    passed.add("--kv-cache-memory");
    passed.addAll(CHOICES.keySet());
    for (String option : passed) {
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
