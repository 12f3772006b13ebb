package dev.xlaactors.examples.gpt;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.Set;

/**
 * How the next token is drawn from a step's logits. {@code temperature} 0 is greedy (the highest logit,
 * the lowest token id on a tie); otherwise logits are divided by it, cut to the {@code topK} highest
 * (0: no cut), then to the smallest set whose probability reaches {@code topP} (1: no cut), and one token is
 * drawn with a {@link java.util.SplittableRandom} seeded with {@code seed}. Generation stops after a token
 * in {@code stopTokens} (which is not emitted).
 */
public record SamplingSettings(double temperature, int topK, double topP, Set<Integer> stopTokens, long seed) {
  public SamplingSettings {
    if (!(temperature >= 0) || Double.isInfinite(temperature)) {
      throw new InvalidArgumentException("temperature must be a finite number >= 0 (0 = greedy), got " + temperature);
    }
    if (topK < 0) {
      throw new InvalidArgumentException("top-k must be >= 0 (0 = no cut), got " + topK);
    }
    if (!(topP > 0 && topP <= 1)) {
      throw new InvalidArgumentException("top-p must be in (0, 1] (1 = no cut), got " + topP);
    }
    stopTokens = Set.copyOf(stopTokens);
  }

  /** Greedy decoding: always the highest logit; no stop tokens. */
  public static SamplingSettings greedy() {
    return new SamplingSettings(0, 0, 1, Set.of(), 0);
  }

  /** These settings with generation stopping at {@code tokens}. */
  public SamplingSettings withStopTokens(Set<Integer> tokens) {
    return new SamplingSettings(temperature, topK, topP, tokens, seed);
  }
}
