package dev.xlaactors.lm.sampling;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.Set;

/**
 * vLLM's {@code min_tokens}: until the sequence has generated {@code minTokens} tokens, its stop tokens
 * (end of text) cannot be drawn. Stateless; costs one store per stop token per step while it applies.
 *
 * @param minTokens the fewest tokens generated before a stop token may come; {@code >= 0}
 * @param stopTokenIds the tokens held back (the request's stop token ids)
 */
public record MinTokens(int minTokens, Set<Integer> stopTokenIds) implements LogitsProcessor {

  /** Checks the count and copies the ids. */
  public MinTokens {
    if (minTokens < 0) {
      throw new InvalidArgumentException("min tokens is " + minTokens + ": expected an integer >= 0 (0: none)");
    }
    stopTokenIds = Set.copyOf(stopTokenIds == null ? Set.of() : stopTokenIds);
  }

  @Override
  public void process(SequenceState state, float[] logits, int vocabularySize) {
    if (state.generatedLength() >= minTokens) {
      return;
    }
    for (int id : stopTokenIds) {
      if (id < vocabularySize) {
        logits[id] = Float.NEGATIVE_INFINITY;
      }
    }
  }
}
