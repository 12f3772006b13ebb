package dev.xlaactors.lm.sampling;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.Map;
import java.util.TreeMap;

/**
 * OpenAI's {@code logit_bias}: a fixed amount added to the logits of chosen tokens at every step, from -100
 * (in effect a ban) to 100 (in effect the only choice). Stateless, shared by sequences; costs one add per
 * biased token per step.
 *
 * @param bias token id to the amount added to its logit; ids {@code >= 0}, amounts finite in
 *     {@code [-100, 100]} as OpenAI's
 */
public record LogitBias(Map<Integer, Float> bias) implements LogitsProcessor {
  /** OpenAI's bound on a bias, each way. */
  public static final float MAX_BIAS = 100;

  /** Checks every entry, naming the token and the value. */
  public LogitBias {
    if (bias == null) {
      throw new InvalidArgumentException("logit bias is null: pass a map of token id to bias (an empty map for none)");
    }
    for (Map.Entry<Integer, Float> e : bias.entrySet()) {
      if (e.getKey() == null || e.getKey() < 0) {
        throw new InvalidArgumentException("logit bias names token " + e.getKey() + ": expected token ids >= 0");
      }
      if (e.getValue() == null || !(e.getValue() >= -MAX_BIAS && e.getValue() <= MAX_BIAS)) {
        throw new InvalidArgumentException("logit bias of token " + e.getKey() + " is " + e.getValue()
            + ": expected a number from -100 to 100");
      }
    }
    bias = Map.copyOf(new TreeMap<>(bias));
  }

  @Override
  public void process(SequenceState state, float[] logits, int vocabularySize) {
    for (Map.Entry<Integer, Float> e : bias.entrySet()) {
      int id = e.getKey();
      if (id >= vocabularySize) {
        throw new InvalidArgumentException("logit bias names token " + id + ", outside the vocabulary of " + vocabularySize
            + " tokens: bias ids from 0 to " + (vocabularySize - 1));
      }
      logits[id] += e.getValue();
    }
  }
}
