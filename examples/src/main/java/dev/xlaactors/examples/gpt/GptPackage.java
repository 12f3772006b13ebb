package dev.xlaactors.examples.gpt;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.xlaactors.error.InvalidArgumentException;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.StreamSupport;

/**
 * The GPT of the examples as a model package (docs/model-package.md), made the way a user makes one from
 * a Hugging Face checkpoint: {@code tools/jax_gpt.py make} writes the seeded weights and JAX's reference
 * run, {@code export-hf} writes them as a GPT2LMHeadModel checkpoint, and {@code tools/hf_import.py}
 * imports that (the 124 M model with {@code --tiktoken r50k_base}, GPT-2's vocabulary; the tiny one with
 * its own 512-id byte-level tokenizer.json). {@code tools/jax_gpt.py package} does all three, into
 * {@code ~/.cache/xla-actors/models/<config>-<hash>-package}, with JAX's {@code reference.json} beside the
 * manifest.
 *
 * <p>This class only finds or makes the folder and reads the reference: the model itself is loaded with
 * the library ({@code LanguageModel.load(ModelPackage.open(directory()), device, runtime)}). Immutable.
 *
 * @param config the config of tools/jax_gpt.py ({@code tiny}, {@code gpt2-124m})
 * @param directory the package
 * @param made the directory {@code make} wrote (JAX's own programs), where it is on this machine
 * @param reference JAX's run of make's programs: {@code prompt}, {@code greedy_tokens}, {@code score_nll},
 *     and for the tiny model {@code prefill_last_logits} and {@code decode_step_logits}
 */
public record GptPackage(String config, Path directory, Optional<Path> made, JsonNode reference) {
  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * The package of {@code config}, made on first use (the JAX venv of tools/jax-env.sh too; the 124 M
   * model takes a minute or two); what happens is reported on {@code log}.
   */
  public static GptPackage ensure(Path repoRoot, String config, PrintStream log) {
    Path dir = Path.of(jaxGpt(repoRoot, List.of("dir", "--package", "--config", config), null).strip());
    if (!Files.exists(dir.resolve(".complete"))) {
      log.println("making model package '" + config + "' in " + dir + " (first use: tools/jax_gpt.py make, export-hf, "
          + "tools/hf_import.py; the 124 M one takes a minute or two) ...");
      long t0 = System.nanoTime();
      jaxGpt(repoRoot, List.of("package", "--config", config), log);
      log.printf("made in %.1f s%n", (System.nanoTime() - t0) / 1e9);
    }
    return open(dir, config, Optional.of(Path.of(jaxGpt(repoRoot, List.of("dir", "--config", config), null).strip())));
  }

  /** The package of {@code config} if it was made (by the current tools/jax_gpt.py), else empty; makes nothing. */
  public static Optional<GptPackage> existing(Path repoRoot, String config) {
    Path dir = Path.of(jaxGpt(repoRoot, List.of("dir", "--package", "--config", config), null).strip());
    return Files.exists(dir.resolve(".complete"))
        ? Optional.of(open(dir, config, Optional.of(Path.of(jaxGpt(repoRoot, List.of("dir", "--config", config), null).strip()))))
        : Optional.empty();
  }

  /** A package made by {@code tools/jax_gpt.py package} at {@code dir} (e.g. a test's copy), without make's directory. */
  public static GptPackage open(Path dir) {
    return open(dir, dir.getFileName().toString(), Optional.empty());
  }

  private static GptPackage open(Path dir, String config, Optional<Path> made) {
    Path file = dir.resolve("reference.json");
    if (!Files.isRegularFile(file)) {
      throw new InvalidArgumentException("no reference.json in " + dir + ": make the package with $(bash tools/jax-env.sh) "
          + "tools/jax_gpt.py package --config <tiny|gpt2-124m>");
    }
    try {
      return new GptPackage(config, dir, made.filter(m -> Files.exists(m.resolve(".complete"))), JSON.readTree(file.toFile()));
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + file, e);
    }
  }

  /** JAX's reference prompt (token ids). */
  public int[] referencePrompt() {
    return ints("prompt");
  }

  /** JAX's greedy tokens after {@link #referencePrompt()}. */
  public int[] referenceGreedyTokens() {
    return ints("greedy_tokens");
  }

  /** JAX's mean negative log-likelihood of the reference prompt's tokens after the first. */
  public double referenceScoreNll() {
    return reference.required("score_nll").asDouble();
  }

  /** A float list of the reference (the tiny model's {@code prefill_last_logits}, {@code decode_step_logits}). */
  public float[] referenceFloats(String key) {
    JsonNode a = reference.required(key);
    float[] out = new float[a.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = (float) a.get(i).asDouble();
    }
    return out;
  }

  private int[] ints(String key) {
    return StreamSupport.stream(reference.required(key).spliterator(), false).mapToInt(JsonNode::asInt).toArray();
  }

  /**
   * JAX's greedy tokens for {@code prompt}, {@code steps} of them, from make's own programs
   * ({@code tools/jax_gpt.py greedy}): what a run of the package must reproduce.
   */
  public List<Integer> jaxGreedy(Path repoRoot, int[] prompt, int steps) {
    Path dir = made.orElseThrow(() -> new InvalidArgumentException("the made model of package " + directory + " is not on this "
        + "machine: make it with tools/jax_gpt.py make --config " + config));
    String tokens = IntStream.of(prompt).mapToObj(Integer::toString).collect(Collectors.joining(","));
    String out = jaxGpt(repoRoot, List.of("greedy", "--dir", dir.toString(), "--tokens", tokens, "--steps", Integer.toString(steps)),
        System.err);
    return out.lines().filter(s -> !s.isBlank()).map(s -> Integer.parseInt(s.strip())).toList();
  }

  /** Runs tools/jax_gpt.py with the JAX venv and returns its standard output; its errors go to {@code log} (or are kept). */
  private static String jaxGpt(Path repoRoot, List<String> args, PrintStream log) {
    String python = run(repoRoot, List.of("bash", repoRoot.resolve("tools/jax-env.sh").toString()), null).strip();
    List<String> command = new java.util.ArrayList<>(List.of(python, repoRoot.resolve("tools/jax_gpt.py").toString()));
    command.addAll(args);
    return run(repoRoot, command, log);
  }

  private static String run(Path dir, List<String> command, PrintStream log) {
    try {
      Process p = new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(log == null).start();
      if (log != null) {
        Thread copy = new Thread(() -> { // stderr while stdout is read: neither pipe fills up
          try {
            p.getErrorStream().transferTo(log);
          } catch (IOException e) {
            // the process ended: nothing more to copy
          }
        }, "jax_gpt-stderr");
        copy.setDaemon(true);
        copy.start();
      }
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!p.waitFor(10, TimeUnit.MINUTES) || p.exitValue() != 0) {
        throw new IllegalStateException("command " + String.join(" ", command) + " failed (exit " + p.exitValue() + "): " + out);
      }
      return out;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot run " + String.join(" ", command), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while running " + String.join(" ", command), e);
    }
  }
}
