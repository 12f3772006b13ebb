package dev.xlaactors.lm.sampling;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.Arrays;
import java.util.BitSet;
import java.util.SplittableRandom;

/**
 * What one sequence carries from step to step for the {@link Sampler}: its random generator (seeded from
 * {@link SamplingParams#seed()}, so a seeded request draws the same tokens every time) and the distinct
 * tokens it holds, prompt included, that the repetition penalty applies to. The sampler adds each token
 * it draws.
 *
 * <p>One per sequence; not thread-safe.
 */
public final class SequenceState {
  /**
   * Ids at or above this are refused: no vocabulary comes near 16.7 million tokens, and the set of seen
   * tokens is a bit set as long as the highest id (a client's stray id must not cost gigabytes).
   */
  public static final int MAX_TOKEN_ID = 1 << 24;

  private final SplittableRandom random;
  private final BitSet seen = new BitSet();
  private int[] distinct = new int[64];
  private int distinctCount;
  private int length;

  private SequenceState(SplittableRandom random) {
    this.random = random;
  }

  /** The state of a new sequence with no tokens yet. */
  public static SequenceState create(SamplingParams params) {
    return create(params, new int[0]);
  }

  /** The state of a sequence that starts with {@code promptTokens}. */
  public static SequenceState create(SamplingParams params, int[] promptTokens) {
    if (params == null || promptTokens == null) {
      throw new InvalidArgumentException("sampling params and prompt tokens must not be null: pass new int[0] for no prompt");
    }
    SequenceState state = new SequenceState(params.seed() == null ? new SplittableRandom() : new SplittableRandom(params.seed()));
    for (int token : promptTokens) {
      state.append(token);
    }
    return state;
  }

  /** Adds a token to the sequence (the sampler does this for the tokens it draws). */
  public void append(int token) {
    if (token < 0 || token >= MAX_TOKEN_ID) {
      throw new InvalidArgumentException("token id " + token + " is outside [0, " + MAX_TOKEN_ID
          + "): pass ids from the model's vocabulary");
    }
    length++;
    if (!seen.get(token)) {
      seen.set(token);
      if (distinctCount == distinct.length) {
        distinct = Arrays.copyOf(distinct, distinctCount * 2);
      }
      distinct[distinctCount++] = token;
    }
  }

  /** How many tokens the sequence holds, prompt included. */
  public int length() {
    return length;
  }

  /** The distinct tokens of the sequence, in the order they first appeared. */
  public int[] distinctTokens() {
    return Arrays.copyOf(distinct, distinctCount);
  }

  int distinctCount() {
    return distinctCount;
  }

  int distinctToken(int i) {
    return distinct[i];
  }

  /** A uniform draw in {@code [0, 1)}. */
  double nextDouble() {
    return random.nextDouble();
  }
}
