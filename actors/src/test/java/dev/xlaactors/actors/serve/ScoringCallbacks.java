package dev.xlaactors.actors.serve;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.model.SafeTensors;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The host side of the scoring package of tools/jax_scoring_model.py at D = 64
 * (actors/src/test/resources/scoring, loaded by the tests with {@code ModelPackage.open(dir).load(device)}):
 * y = relu(x . W), W f32[64, 64] bound once, relu the Java host callback relu_b<B> of each batch size B.
 * The callback runs {@link #hook} on the whole padded batch first (tests block or fail it there).
 */
final class ScoringCallbacks {
  static final int D = 64;
  static final List<Integer> SIZES = List.of(1, 2, 4, 8, 16, 32);

  /** Called by the relu callback with the batch's pre-activations h = x . W (f32[B, D]) before relu. */
  interface Hook {
    void beforeRelu(float[] h, int batchSize) throws Exception;
  }

  volatile Hook hook = (h, b) -> {};
  final AtomicLong callbackRows = new AtomicLong(); // rows (padding included) the callback has seen
  final float[] w;

  private ScoringCallbacks(float[] w) {
    this.w = w;
  }

  /** The scoring package's directory. */
  static Path dir() {
    try {
      return Path.of(ScoringCallbacks.class.getResource("/scoring/xla-model.json").toURI()).getParent();
    } catch (URISyntaxException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Registers relu_b<B> for every size with {@code callbacks}; the returned object controls them. */
  static ScoringCallbacks register(CallbackRuntime callbacks) {
    float[] w;
    try (SafeTensors weights = SafeTensors.open(dir().resolve("model.safetensors"))) {
      w = weights.tensor("w").toFloatArray();
    }
    ScoringCallbacks m = new ScoringCallbacks(w);
    for (int b : SIZES) {
      int size = b;
      callbacks.register("relu_b" + b, List.of(TensorType.of(DType.F32, b, D)), null, (in, s) -> {
        float[] h = in.get(0).toFloatArray();
        m.callbackRows.addAndGet(size);
        m.hook.beforeRelu(h, size);
        for (int i = 0; i < h.length; i++) {
          h[i] = Math.max(h[i], 0f);
        }
        return List.of(HostTensor.ofFloats(h, size, D));
      }).toCompletableFuture().join();
    }
    return m;
  }

  /** relu(x . W) in double precision, for comparison. */
  double[] expected(float[] x) {
    double[] y = new double[D];
    for (int j = 0; j < D; j++) {
      double s = 0;
      for (int k = 0; k < D; k++) {
        s += (double) x[k] * w[k * D + j];
      }
      y[j] = Math.max(s, 0);
    }
    return y;
  }

  static float[] randomInput(Random random) {
    float[] x = new float[D];
    for (int i = 0; i < D; i++) {
      x[i] = random.nextFloat() * 2 - 1;
    }
    return x;
  }

  static HostTensor tensor(float[] x) {
    return HostTensor.ofFloats(x, D);
  }
}
