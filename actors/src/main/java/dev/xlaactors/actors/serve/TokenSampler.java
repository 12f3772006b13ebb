package dev.xlaactors.actors.serve;

/**
 * Chooses the next token of one sequence from its logits. One per request (it may hold the request's
 * random generator); {@link GenerationServer} calls it from its background thread, one call at a time.
 * A sampler that throws fails its own request only. Sampling by temperature, top-k, top-p, min-p and
 * repetition penalty is the language-model module's ({@code dev.xlaactors.lm.SamplingTokenSampler}),
 * which every serving route uses; this module keeps only {@link #greedy()}, for servers and tests that
 * need no more.
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
}
