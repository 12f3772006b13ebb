package dev.xlaactors.examples.serve;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.model.LoadedPackage;
import dev.xlaactors.runtime.model.Model;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.Role;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.Map;

/**
 * What the serve example adds to the scoring package of {@code tools/jax_scoring_model.py} (y = relu(x . W),
 * a {@code tensor} package with {@code main} at several batch sizes): making it with JAX on first use, and
 * the Java side of its host callbacks. Loading it is {@code ModelPackage.open(dir).load(device)}, as every
 * package.
 */
public final class ScoringModel {
  private ScoringModel() {}

  /**
   * The package directory of dimension {@code dim} ({@code ~/.cache/xla-actors/models/scoring-d<D>}), made by
   * the script when missing (it needs the JAX venv): written beside it and moved in, so a run that fails
   * half-way leaves no package behind.
   */
  public static Path ensure(Path repoRoot, int dim, PrintStream log) {
    if (dim < 1 || dim > 8192) {
      throw new InvalidArgumentException("scoring dimension " + dim + " is outside 1..8192");
    }
    String cache = System.getenv().getOrDefault("XLA_ACTORS_CACHE", System.getProperty("user.home") + "/.cache/xla-actors");
    Path dir = Path.of(cache, "models", "scoring-d" + dim);
    if (Files.isRegularFile(dir.resolve(ModelPackage.MANIFEST))) {
      return dir;
    }
    log.println("making the scoring package (dimension " + dim + ") in " + dir + " with JAX (first use) ...");
    Path made = dir.resolveSibling(dir.getFileName() + ".tmp");
    try {
      Process env = new ProcessBuilder("bash", "tools/jax-env.sh").directory(repoRoot.toFile())
          .redirectError(ProcessBuilder.Redirect.INHERIT).start();
      String python = new String(env.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
      Process p = new ProcessBuilder(python, "tools/jax_scoring_model.py", "--dim", Integer.toString(dim), "--out", made.toString())
          .directory(repoRoot.toFile()).redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (env.waitFor() != 0 || p.waitFor() != 0) {
        throw new IllegalStateException("tools/jax_scoring_model.py failed (exit " + p.exitValue() + "): " + out);
      }
      deleteTree(dir); // an older layout (before packages) of the same dimension
      Files.move(made, dir, StandardCopyOption.ATOMIC_MOVE);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot make the scoring package in " + dir, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while making the scoring package", e);
    }
    return dir;
  }

  /**
   * Registers with {@code callbacks} the relu the package calls at each batch size B ({@code relu_b<B>}, its
   * {@code host_callbacks}): y = max(h, 0) of the whole padded batch, of the type the program returns.
   */
  public static void registerCallbacks(CallbackRuntime callbacks, LoadedPackage scoring) {
    for (Map.Entry<Integer, Model> e : scoring.models(Role.MAIN).entrySet()) {
      String name = "relu_b" + e.getKey();
      if (!scoring.modelPackage().hostCallbacks().contains(name)) {
        throw new InvalidArgumentException("package " + scoring.modelPackage().directory() + " does not call " + name
            + " (its host_callbacks are " + scoring.modelPackage().hostCallbacks() + "): make it again with tools/jax_scoring_model.py");
      }
      TensorType type = e.getValue().outputTypes().get(0);
      callbacks.register(name, List.of(type), null, (in, s) -> {
        float[] h = in.get(0).toFloatArray();
        for (int i = 0; i < h.length; i++) {
          h[i] = Math.max(h[i], 0f);
        }
        return List.of(HostTensor.ofFloats(h, type.shape().dims()));
      }).toCompletableFuture().join();
    }
  }

  private static void deleteTree(Path dir) throws IOException {
    if (!Files.exists(dir)) {
      return;
    }
    try (var paths = Files.walk(dir)) {
      for (Path p : paths.sorted(java.util.Comparator.reverseOrder()).toList()) {
        Files.delete(p);
      }
    }
  }
}
