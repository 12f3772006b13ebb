package dev.xlaactors.lm.sampling;

import dev.xlaactors.error.InvalidArgumentException;

/**
 * OpenAI's {@code presence_penalty} and {@code frequency_penalty}, as OpenAI and vLLM define them: from the
 * logit of each token the sequence has <em>generated</em> (the prompt does not count), subtract
 * {@code presence} once and {@code frequency} times the number of times it was generated. Positive values
 * discourage repeats, negative ones encourage them. Stateless (the counts are the {@link SequenceState}'s);
 * costs one subtraction per distinct generated token per step.
 *
 * @param presence subtracted once from each generated token's logit; in {@code [-2, 2]} as OpenAI's
 * @param frequency subtracted per occurrence; in {@code [-2, 2]}
 */
public record OccurrencePenalty(double presence, double frequency) implements LogitsProcessor {
  /** OpenAI's bound on either penalty, each way. */
  public static final double MAX_PENALTY = 2;

  /** Checks both penalties, naming the one out of range. */
  public OccurrencePenalty {
    if (!(presence >= -MAX_PENALTY && presence <= MAX_PENALTY)) {
      throw new InvalidArgumentException("presence penalty is " + presence + ": expected a number from -2 to 2 (0: none)");
    }
    if (!(frequency >= -MAX_PENALTY && frequency <= MAX_PENALTY)) {
      throw new InvalidArgumentException("frequency penalty is " + frequency + ": expected a number from -2 to 2 (0: none)");
    }
  }

  @Override
  public void process(SequenceState state, float[] logits, int vocabularySize) {
    for (int i = 0; i < state.generatedDistinctCount(); i++) {
      int token = state.generatedDistinctToken(i);
      if (token < vocabularySize && logits[token] != Float.NEGATIVE_INFINITY) {
        logits[token] -= (float) (presence + frequency * state.generatedCount(i));
      }
    }
  }
}
