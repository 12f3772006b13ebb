package dev.xlaactors.lm.sampling;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.Set;

/**
 * vLLM's {@code min_tokens}: until the sequence has generated {@code minTokens} tokens, none of its stop
 * tokens can be drawn: every id of the sequence's own {@link SequenceState#stopTokenIds()} (generation_config's
 * list, a chat template's end of turn, whatever the final params hold, even when added after this processor
 * was made) and {@code extraTokenIds}. Stateless; costs one store per stop token per step while it applies.
 *
 * @param minTokens the fewest tokens generated before a stop token may come; {@code >= 0}
 * @param extraTokenIds tokens held back besides the sequence's stop tokens (usually none)
 */
public record MinTokens(int minTokens, Set<Integer> extraTokenIds) implements LogitsProcessor {

  /** Checks the count and copies the ids. */
  public MinTokens {
    if (minTokens < 0) {
      throw new InvalidArgumentException("min tokens is " + minTokens + ": expected an integer >= 0 (0: none)");
    }
    extraTokenIds = Set.copyOf(extraTokenIds == null ? Set.of() : extraTokenIds);
  }

  /** Holds back the sequence's stop tokens until {@code minTokens} were generated. */
  public MinTokens(int minTokens) {
    this(minTokens, Set.of());
  }

  @Override
  public void process(SequenceState state, float[] logits, int vocabularySize) {
    if (state.generatedLength() >= minTokens) {
      return;
    }
    hold(state.stopTokenIds(), logits, vocabularySize);
    hold(extraTokenIds, logits, vocabularySize);
  }

  private static void hold(Set<Integer> ids, float[] logits, int vocabularySize) {
    for (int id : ids) {
      if (id < vocabularySize) {
        logits[id] = Float.NEGATIVE_INFINITY;
      }
    }
  }
}
