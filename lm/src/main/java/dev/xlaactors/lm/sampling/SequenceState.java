package dev.xlaactors.lm.sampling;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.Arrays;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * What one sequence carries from step to step for the {@link Sampler}: its random generator (seeded from
 * {@link SamplingParams#seed()}, so a seeded request draws the same tokens every time) and the distinct
 * tokens it holds, prompt included, that the repetition penalty applies to; the tokens it generated
 * and how often each (what {@link OccurrencePenalty}, {@link MinTokens} and a grammar read); and its own
 * copies of the request's {@link LogitsProcessor}s. The sampler adds each token it draws.
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
  private int promptLength = -1;
  /** The generated tokens in order. */
  private int[] generated = new int[16];
  private int generatedLength;
  /** The distinct generated tokens in the order they first came, with their counts; indexed through {@link #generatedIndex}. */
  private int[] generatedDistinct = new int[16];
  private int[] generatedCounts = new int[16];
  private int generatedDistinctCount;
  private final Map<Integer, Integer> generatedIndex = new HashMap<>();
  private final List<LogitsProcessor> processors;
  private final int maxTokens;
  private final java.util.Set<Integer> stopTokenIds;

  private SequenceState(SplittableRandom random, List<LogitsProcessor> processors, int maxTokens, java.util.Set<Integer> stopTokenIds) {
    this.random = random;
    this.processors = processors;
    this.maxTokens = maxTokens;
    this.stopTokenIds = stopTokenIds;
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
    SequenceState state = new SequenceState(params.seed() == null ? new SplittableRandom() : new SplittableRandom(params.seed()),
        params.processors().stream().map(LogitsProcessor::forSequence).toList(), params.maxTokens(), params.stopTokenIds());
    for (int token : promptTokens) {
      state.append(token);
    }
    state.promptLength = promptTokens.length;
    return state;
  }

  /**
   * Adds a token to the sequence (the sampler does this for the tokens it draws): a prompt token while the
   * state is being created, a generated one after.
   */
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
    if (promptLength >= 0) {
      appendGenerated(token);
    }
  }

  private void appendGenerated(int token) {
    if (generatedLength == generated.length) {
      generated = Arrays.copyOf(generated, generatedLength * 2);
    }
    generated[generatedLength++] = token;
    Integer index = generatedIndex.get(token);
    if (index == null) {
      if (generatedDistinctCount == generatedDistinct.length) {
        generatedDistinct = Arrays.copyOf(generatedDistinct, generatedDistinctCount * 2);
        generatedCounts = Arrays.copyOf(generatedCounts, generatedDistinctCount * 2);
      }
      generatedIndex.put(token, generatedDistinctCount);
      generatedDistinct[generatedDistinctCount] = token;
      generatedCounts[generatedDistinctCount++] = 1;
    } else {
      generatedCounts[index]++;
    }
  }

  /** The most tokens the sequence may generate ({@link SamplingParams#maxTokens()}): what a constraint must finish within. */
  public int maxTokens() {
    return maxTokens;
  }

  /**
   * The tokens that end the sequence ({@link SamplingParams#stopTokenIds()} of the params it was created with): the
   * final set, whatever was added to the params after their processors were made (a chat template's end of turn).
   */
  public java.util.Set<Integer> stopTokenIds() {
    return stopTokenIds;
  }

  /** How many tokens the prompt held. */
  public int promptLength() {
    return Math.max(promptLength, 0);
  }

  /** How many tokens the sequence generated so far (after its prompt). */
  public int generatedLength() {
    return generatedLength;
  }

  /** The {@code i}-th generated token, {@code 0 <= i < generatedLength()}. */
  public int generatedToken(int i) {
    if (i < 0 || i >= generatedLength) {
      throw new InvalidArgumentException("generated token " + i + " does not exist: the sequence generated " + generatedLength);
    }
    return generated[i];
  }

  /** How many distinct tokens the sequence generated. */
  public int generatedDistinctCount() {
    return generatedDistinctCount;
  }

  /** The {@code i}-th distinct generated token, in the order they first came ({@code 0 <= i < generatedDistinctCount()}). */
  public int generatedDistinctToken(int i) {
    return generatedDistinct[i];
  }

  /** How many times the {@code i}-th distinct generated token ({@link #generatedDistinctToken(int)}) was generated. */
  public int generatedCount(int i) {
    return generatedCounts[i];
  }

  /** This sequence's copies of the request's processors ({@link LogitsProcessor#forSequence()}), in order. */
  List<LogitsProcessor> processors() {
    return processors;
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
