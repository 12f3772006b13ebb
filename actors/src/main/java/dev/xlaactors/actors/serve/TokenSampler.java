package dev.xlaactors.actors.serve;

/**
 * Chooses the next token of one sequence from its logits. One per request (it may hold the request's
 * random generator); {@link GenerationServer} calls it from its background thread, one call at a time.
 * A sampler that throws fails its own request only.
 */
@FunctionalInterface
public interface TokenSampler {
  /** The next token, {@code 0 .. vocabulary-1}, from {@code logits[offset .. offset+vocabulary)}. */
  int sample(float[] logits, int offset, int vocabulary);

  /** The highest logit (the lowest token id on a tie); NaN logits fail the request. */
  static TokenSampler greedy() {
    return (logits, offset, vocabulary) -> {
      int best = 0;
      for (int i = 0; i < vocabulary; i++) {
        float x = logits[offset + i];
        if (Float.isNaN(x)) {
          throw new IllegalStateException("logit " + i + " is NaN: the model produced no distribution to sample from");
        }
        if (x > logits[offset + best]) {
          best = i;
        }
      }
      return best;
    };
  }

  /**
   * Draws from the softmax of {@code logits / temperature} over the {@code topK} highest logits (0: all),
   * with a generator seeded by {@code seed}; {@code temperature} 0 is {@link #greedy()}. One per request.
   */
  static TokenSampler sampling(double temperature, int topK, long seed) {
    if (!(temperature >= 0) || Double.isInfinite(temperature)) {
      throw new dev.xlaactors.error.InvalidArgumentException("temperature must be a finite number >= 0 (0 = greedy), got " + temperature);
    }
    if (topK < 0) {
      throw new dev.xlaactors.error.InvalidArgumentException("top_k must be >= 0 (0 = no cut), got " + topK);
    }
    if (temperature == 0) {
      return greedy();
    }
    java.util.SplittableRandom random = new java.util.SplittableRandom(seed);
    return (logits, offset, vocabulary) -> {
      int k = topK == 0 ? vocabulary : Math.min(topK, vocabulary);
      Integer[] order = new Integer[vocabulary];
      for (int i = 0; i < vocabulary; i++) {
        if (Float.isNaN(logits[offset + i])) {
          throw new IllegalStateException("logit " + i + " is NaN: the model produced no distribution to sample from");
        }
        order[i] = i;
      }
      java.util.Arrays.sort(order, (a, b) -> Float.compare(logits[offset + b], logits[offset + a]));
      double top = logits[offset + order[0]];
      double[] weights = new double[k];
      double sum = 0;
      for (int i = 0; i < k; i++) {
        weights[i] = Math.exp((logits[offset + order[i]] - top) / temperature);
        sum += weights[i];
      }
      double r = random.nextDouble() * sum;
      for (int i = 0; i < k; i++) {
        r -= weights[i];
        if (r < 0) {
          return order[i];
        }
      }
      return order[k - 1];
    };
  }
}
