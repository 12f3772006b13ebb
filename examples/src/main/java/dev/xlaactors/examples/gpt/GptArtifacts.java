package dev.xlaactors.examples.gpt;

import dev.xlaactors.error.InvalidArgumentException;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

/**
 * A directory written by {@code tools/jax_gpt.py make}: the weights ({@code weights.safetensors}), the
 * exported programs ({@code prefill_b<B>}, {@code decode_b<B>}, {@code decode_sample_b<B>}, each as
 * {@code .jax}), and {@code model.properties} (config, weights sha256, JAX's reference run).
 * Immutable.
 */
public record GptArtifacts(Path dir, Properties properties) {

  /** Reads the artifacts in {@code dir}, refusing a directory the script did not finish. */
  public static GptArtifacts open(Path dir) {
    if (!Files.isRegularFile(dir.resolve("model.properties")) || !Files.isRegularFile(dir.resolve("weights.safetensors"))) {
      throw new InvalidArgumentException("no model in " + dir + " (expected model.properties and weights.safetensors written by "
          + "tools/jax_gpt.py make): make one with $(bash tools/jax-env.sh) tools/jax_gpt.py make --config <tiny|gpt2-124m> --out "
          + dir);
    }
    Properties p = new Properties();
    try (InputStream in = Files.newInputStream(dir.resolve("model.properties"))) {
      p.load(in);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + dir.resolve("model.properties"), e);
    }
    return new GptArtifacts(dir, p);
  }

  /**
   * The artifacts of a config of {@code tools/jax_gpt.py} ({@code tiny}, {@code gpt2-124m}) in
   * ~/.cache/xla-actors/models, made by the script on first use (it needs the JAX venv of
   * tools/jax-env.sh, itself made on first use); what happens is reported on {@code log}.
   */
  public static GptArtifacts ensure(Path repoRoot, String config, PrintStream log) {
    Path script = repoRoot.resolve("tools/jax_gpt.py");
    String python = run(repoRoot, List.of("bash", repoRoot.resolve("tools/jax-env.sh").toString()), null).strip();
    Path dir = Path.of(run(repoRoot, List.of(python, script.toString(), "dir", "--config", config), null).strip());
    if (!Files.exists(dir.resolve(".complete"))) {
      log.println("making model '" + config + "' in " + dir + " with JAX (first use; the 124M one takes about 25 s) ...");
      long t0 = System.nanoTime();
      run(repoRoot, List.of(python, script.toString(), "make", "--config", config), log);
      log.printf("made in %.1f s%n", (System.nanoTime() - t0) / 1e9);
    }
    return open(dir);
  }

  /**
   * The artifacts of config {@code config} in ~/.cache/xla-actors/models if they were made (by the current
   * tools/jax_gpt.py format), else empty; makes nothing (the JAX venv is made on first use).
   */
  public static java.util.Optional<GptArtifacts> existing(Path repoRoot, String config) {
    String python = run(repoRoot, List.of("bash", repoRoot.resolve("tools/jax-env.sh").toString()), null).strip();
    Path dir = Path.of(run(repoRoot, List.of(python, repoRoot.resolve("tools/jax_gpt.py").toString(), "dir", "--config", config), null).strip());
    return Files.exists(dir.resolve(".complete")) ? java.util.Optional.of(open(dir)) : java.util.Optional.empty();
  }

  /** Runs a command in {@code dir} and returns its standard output; its errors go to {@code log} (or are kept). */
  static String run(Path dir, List<String> command, PrintStream log) {
    try {
      Process p = new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(log == null).start();
      if (log != null) {
        p.getErrorStream().transferTo(log);
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

  public String name() {
    return properties.getProperty("name");
  }

  public int layers() {
    return integer("layers");
  }

  public int dModel() {
    return integer("d_model");
  }

  public int heads() {
    return integer("heads");
  }

  public int vocab() {
    return integer("vocab");
  }

  /** The context length: positions 0 .. ctx-1. */
  public int ctx() {
    return integer("ctx");
  }

  /** The number of token slots of the prefill programs (a prompt may be shorter: it is padded). */
  public int prefillLength() {
    return integer("prefill_len");
  }

  /** The batch sizes the programs were exported for. */
  public int[] batches() {
    return ints("batches");
  }

  public long weightBytes() {
    return Long.parseLong(required("weights_bytes"));
  }

  public Path weights() {
    return dir.resolve("weights.safetensors");
  }

  /** The exported program {@code name} (e.g. {@code decode_b1}) with the given suffix ({@code .jax}). */
  public Path program(String name, String suffix) {
    Path p = dir.resolve(name + suffix);
    if (!Files.isRegularFile(p)) {
      throw new InvalidArgumentException("model '" + name() + "' in " + dir + " has no program " + p.getFileName()
          + ": it was exported for batch sizes " + Arrays.toString(batches()));
    }
    return p;
  }

  /** A comma-separated integer list of model.properties (e.g. {@code greedy_tokens}, {@code prompt}). */
  public int[] ints(String key) {
    return Arrays.stream(required(key).split(",")).mapToInt(s -> Integer.parseInt(s.trim())).toArray();
  }

  /** A comma-separated float list of model.properties (e.g. {@code prefill_last_logits}). */
  public float[] floats(String key) {
    String[] parts = required(key).split(",");
    float[] out = new float[parts.length];
    for (int i = 0; i < parts.length; i++) {
      out[i] = Float.parseFloat(parts[i].trim());
    }
    return out;
  }

  private int integer(String key) {
    return Integer.parseInt(required(key).trim());
  }

  private String required(String key) {
    String v = properties.getProperty(key);
    if (v == null) {
      throw new InvalidArgumentException("model.properties in " + dir + " has no '" + key + "': remake it with tools/jax_gpt.py make");
    }
    return v;
  }
}
