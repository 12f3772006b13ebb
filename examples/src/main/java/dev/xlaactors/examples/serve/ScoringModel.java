package dev.xlaactors.examples.serve;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.serve.BatchedModel;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.JaxExport;
import dev.xlaactors.runtime.model.SafeTensors;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

/**
 * The scoring model of {@code tools/jax_scoring_model.py} (y = relu(x . W), relu a Java host callback
 * {@code relu_b<B>} per compiled batch size B), as the serve example loads it: made with JAX on first
 * use into {@code ~/.cache/xla-actors/models/scoring-d<D>}, loaded at every batch size with W uploaded
 * once, its callbacks registered.
 */
public final class ScoringModel {
  private ScoringModel() {}

  /** The directory of the model of dimension {@code dim}, made by the script when missing (it needs the JAX venv). */
  public static Path ensure(Path repoRoot, int dim, PrintStream log) {
    if (dim < 1 || dim > 8192) {
      throw new InvalidArgumentException("scoring dimension " + dim + " is outside 1..8192");
    }
    String cache = System.getenv().getOrDefault("XLA_ACTORS_CACHE", System.getProperty("user.home") + "/.cache/xla-actors");
    Path dir = Path.of(cache, "models", "scoring-d" + dim);
    if (!Files.isRegularFile(dir.resolve("model.properties"))) { // written last by the script
      log.println("making the scoring model (dimension " + dim + ") in " + dir + " with JAX (first use) ...");
      try {
        Process env = new ProcessBuilder("bash", "tools/jax-env.sh").directory(repoRoot.toFile())
            .redirectError(ProcessBuilder.Redirect.INHERIT).start();
        String python = new String(env.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        Process p = new ProcessBuilder(python, "tools/jax_scoring_model.py", "--dim", Integer.toString(dim), "--out", dir.toString())
            .directory(repoRoot.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (env.waitFor() != 0 || p.waitFor() != 0) {
          throw new IllegalStateException("tools/jax_scoring_model.py failed (exit " + p.exitValue() + "): " + out);
        }
      } catch (IOException e) {
        throw new UncheckedIOException("cannot run tools/jax_scoring_model.py", e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while making the scoring model", e);
      }
    }
    return dir;
  }

  /** The model of {@code dir} as "scoring" at every exported batch size, on {@code client}'s first device. */
  public static BatchedModel load(XlaClient client, Path dir) {
    Map<Integer, JaxExport> exports = new TreeMap<>();
    try {
      for (int b : batches(dir)) {
        exports.put(b, JaxExport.read(dir.resolve("score_b" + b + ".jax")));
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read the scoring model in " + dir, e);
    }
    try (SafeTensors weights = SafeTensors.open(dir.resolve("weights.safetensors"))) {
      return BatchedModel.load("scoring", exports, weights, client.devices().get(0));
    }
  }

  /** Registers relu_b<B> for every batch size of {@code dir} with {@code callbacks}: y = max(h, 0) of the whole batch. */
  public static void registerCallbacks(CallbackRuntime callbacks, Path dir) {
    int dim = Integer.parseInt(properties(dir).getProperty("dim").trim());
    for (int b : batches(dir)) {
      int size = b;
      callbacks.register("relu_b" + b, List.of(TensorType.of(DType.F32, b, dim)), null, (in, s) -> {
        float[] h = in.get(0).toFloatArray();
        for (int i = 0; i < h.length; i++) {
          h[i] = Math.max(h[i], 0f);
        }
        return List.of(HostTensor.ofFloats(h, size, dim));
      }).toCompletableFuture().join();
    }
  }

  private static int[] batches(Path dir) {
    return Arrays.stream(properties(dir).getProperty("batches").split(",")).mapToInt(s -> Integer.parseInt(s.trim())).toArray();
  }

  private static Properties properties(Path dir) {
    Properties p = new Properties();
    try (InputStream in = Files.newInputStream(dir.resolve("model.properties"))) {
      p.load(in);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + dir.resolve("model.properties"), e);
    }
    return p;
  }
}
