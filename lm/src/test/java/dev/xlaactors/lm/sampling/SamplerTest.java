package dev.xlaactors.lm.sampling;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import java.nio.FloatBuffer;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** The sampler's cuts and draws, checked against the distributions they should produce. */
class SamplerTest {
  private final Sampler sampler = new Sampler();

  /** log(p) for each p, so that softmax(logits) = p exactly. */
  private static float[] logitsOf(double... probabilities) {
    float[] logits = new float[probabilities.length];
    for (int i = 0; i < logits.length; i++) {
      logits[i] = (float) Math.log(probabilities[i]);
    }
    return logits;
  }

  private static double[] softmax(float[] logits, double temperature) {
    double max = Double.NEGATIVE_INFINITY;
    for (float x : logits) {
      max = Math.max(max, x / temperature);
    }
    double[] p = new double[logits.length];
    double sum = 0;
    for (int i = 0; i < p.length; i++) {
      p[i] = Math.exp(logits[i] / temperature - max);
      sum += p[i];
    }
    for (int i = 0; i < p.length; i++) {
      p[i] /= sum;
    }
    return p;
  }

  /** Frequencies of {@code draws} draws (one sequence, so the repetition penalty must be off). */
  private double[] frequencies(float[] logits, SamplingParams params, int draws) {
    SequenceState state = SequenceState.create(params);
    double[] counts = new double[logits.length];
    for (int i = 0; i < draws; i++) {
      counts[sampler.sample(logits, params, state).token()]++;
    }
    for (int i = 0; i < counts.length; i++) {
      counts[i] /= draws;
    }
    return counts;
  }

  /** Cut tokens never drawn; each other frequency within five standard errors (plus a little) of its expected probability. */
  private static void assertMatches(double[] expected, double[] actual, int draws) {
    for (int i = 0; i < expected.length; i++) {
      if (expected[i] == 0) {
        assertEquals(0, actual[i], "token " + i + " was cut and must never be drawn");
        continue;
      }
      double tolerance = 5 * Math.sqrt(expected[i] * (1 - expected[i]) / draws) + 1e-3;
      assertEquals(expected[i], actual[i], tolerance, "token " + i + ": expected " + expected[i] + ", drew " + actual[i]);
    }
  }

  @Test
  void greedyTakesTheHighestLogitAndTheLowestIdOnATie() {
    SamplingParams greedy = SamplingParams.greedy();
    assertEquals(2, sampler.sample(new float[] {0.1f, -3f, 5f, 4.9f}, greedy, SequenceState.create(greedy)).token());
    assertEquals(1, sampler.sample(new float[] {1f, 3f, 3f, 2f}, greedy, SequenceState.create(greedy)).token());
    assertEquals(2, sampler.sample(new float[] {Float.NEGATIVE_INFINITY, Float.NEGATIVE_INFINITY, 7f}, greedy,
        SequenceState.create(greedy)).token());
  }

  /**
   * Found by serve-fuzz: a repetition penalty near 0 made the repeated tokens' logits infinite, their weights NaN,
   * and the draw failed with index -1 (a 500 over HTTP). They are now the most likely tokens, drawn among themselves.
   */
  @Test
  void aVanishingRepetitionPenaltyStillDraws() {
    float[] logits = {1f, 2f, 3f, 1.5f, 2.5f}; // positive: divided by the penalty
    SamplingParams p = SamplingParams.defaults().withRepetitionPenalty(8.503344339703381e-156).withTemperature(0.5292570297248661)
        .withTopP(2.225073858507203e-309).withTopK(76833927).withMinP(0.03093282272585763).withSeed(1L);
    SequenceState state = SequenceState.create(p);
    int first = sampler.sample(logits, p, state).token();
    for (int i = 0; i < 20; i++) {
      assertEquals(first, sampler.sample(logits, p, state).token()); // the one repeated token outweighs all others
    }
    SamplingParams wide = p.withTopP(1).withMinP(0);
    SequenceState two = SequenceState.create(wide);
    java.util.Set<Integer> drawn = new java.util.HashSet<>();
    for (int i = 0; i < 40; i++) {
      drawn.add(sampler.sample(logits, wide, two).token());
    }
    assertTrue(drawn.size() >= 1 && drawn.stream().allMatch(t -> t >= 0 && t < 5), drawn.toString());
  }

  @Test
  void topKOneIsGreedy() {
    SplittableRandom random = new SplittableRandom(1);
    SamplingParams topOne = SamplingParams.defaults().withTopK(1).withTemperature(1.5).withSeed(3L);
    SequenceState state = SequenceState.create(topOne);
    for (int row = 0; row < 200; row++) {
      float[] logits = new float[1000];
      for (int i = 0; i < logits.length; i++) {
        logits[i] = (float) Math.floor(random.nextDouble() * 50); // many ties
      }
      int greedy = sampler.sample(logits, SamplingParams.greedy(), SequenceState.create(SamplingParams.greedy())).token();
      assertEquals(greedy, sampler.sample(logits, topOne, state).token());
    }
  }

  @Test
  void aFixedSeedDrawsTheSameSequenceTwice() {
    float[] logits = logitsOf(0.1, 0.2, 0.3, 0.15, 0.25);
    SamplingParams seeded = SamplingParams.defaults().withSeed(42L).withTopP(0.95);
    int[] first = new int[200];
    int[] second = new int[200];
    int[] other = new int[200];
    SequenceState a = SequenceState.create(seeded);
    SequenceState b = SequenceState.create(seeded);
    SequenceState c = SequenceState.create(seeded.withSeed(43L));
    for (int i = 0; i < 200; i++) {
      first[i] = sampler.sample(logits, seeded, a).token();
      second[i] = new Sampler().sample(logits, seeded, b).token();
      other[i] = sampler.sample(logits, seeded, c).token();
    }
    assertArrayEquals(first, second);
    assertNotEquals(java.util.Arrays.toString(first), java.util.Arrays.toString(other));
  }

  @Test
  void drawsMatchTheSoftmax() {
    float[] logits = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f, 0.0f};
    int draws = 20_000;
    SamplingParams plain = SamplingParams.defaults().withSeed(11L);
    assertMatches(softmax(logits, 1), frequencies(logits, plain, draws), draws);
    SamplingParams cool = plain.withTemperature(0.5);
    assertMatches(softmax(logits, 0.5), frequencies(logits, cool, draws), draws);
  }

  @Test
  void topKDrawsFromTheRenormalisedTopK() {
    float[] logits = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f, 0.0f};
    int draws = 20_000;
    double[] top3 = softmax(new float[] {1.0f, 2.0f, 1.5f}, 1);
    double[] expected = {top3[0], top3[1], 0, 0, top3[2], 0};
    assertMatches(expected, frequencies(logits, SamplingParams.defaults().withSeed(5L).withTopK(3), draws), draws);
  }

  @Test
  void topKAtATemperatureDrawsFromTheTopKsSoftmaxAtThatTemperature() {
    // Only the k candidates are weighed at a temperature other than 1: their weights must still be the
    // tempered softmax's, renormalised, and min-p must read them.
    float[] logits = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f, 0.0f};
    int draws = 20_000;
    double[] top3 = softmax(new float[] {1.0f, 2.0f, 1.5f}, 0.5);
    SamplingParams cool = SamplingParams.defaults().withSeed(6L).withTopK(3).withTemperature(0.5);
    assertMatches(new double[] {top3[0], top3[1], 0, 0, top3[2], 0}, frequencies(logits, cool, draws), draws);
    // Weights at 0.5: token 1 is 1, token 4 e^-1 = 0.37, token 0 e^-2 = 0.14; min-p 0.2 cuts token 0.
    double rest = 1 + Math.exp(-1);
    assertMatches(new double[] {0, 1 / rest, 0, 0, Math.exp(-1) / rest, 0},
        frequencies(logits, cool.withMinP(0.2), draws), draws);
  }

  @Test
  void topPKeepsExactlyTheNucleus() {
    float[] logits = logitsOf(0.05, 0.5, 0.15, 0.3);
    int draws = 20_000;
    // 0.5 + 0.3 reaches 0.75: tokens 1 and 3 only, in the ratio 5 : 3.
    assertMatches(new double[] {0, 0.625, 0, 0.375},
        frequencies(logits, SamplingParams.defaults().withSeed(9L).withTopP(0.75), draws), draws);
    // 0.85 needs the 0.15 token too.
    assertMatches(new double[] {0, 0.5 / 0.95, 0.15 / 0.95, 0.3 / 0.95},
        frequencies(logits, SamplingParams.defaults().withSeed(9L).withTopP(0.85), draws), draws);
  }

  @Test
  void topPAfterTopKIsAFractionOfTheTopK() {
    float[] logits = logitsOf(0.4, 0.1, 0.3, 0.2);
    // Top-2 renormalised: 4/7 and 3/7; top-p 0.5 keeps only the first (4/7 >= 0.5).
    SamplingParams params = SamplingParams.defaults().withSeed(2L).withTopK(2).withTopP(0.5);
    assertMatches(new double[] {1, 0, 0, 0}, frequencies(logits, params, 2_000), 2_000);
  }

  @Test
  void topPWithoutTopKKeepsALargeNucleus() {
    float[] flat = new float[1000]; // 1000 equally likely tokens: the nucleus of 0.5005 is tokens 0..500
    int draws = 20_000;
    double[] f = frequencies(flat, SamplingParams.defaults().withSeed(4L).withTopP(0.5005), draws);
    int distinct = 0;
    for (int i = 0; i < f.length; i++) {
      if (i > 500) {
        assertEquals(0, f[i], "token " + i + " is outside the nucleus");
      } else if (f[i] > 0) {
        distinct++;
      }
    }
    assertTrue(distinct > 450, "drew " + distinct + " of the 501 nucleus tokens");
  }

  @Test
  void minPKeepsTokensAtLeastThatFractionOfTheBest() {
    float[] logits = logitsOf(0.15, 0.5, 0.05, 0.3);
    int draws = 20_000;
    // minP 0.2: at least 0.1 -> tokens 0, 1, 3.
    assertMatches(new double[] {0.15 / 0.95, 0.5 / 0.95, 0, 0.3 / 0.95},
        frequencies(logits, SamplingParams.defaults().withSeed(8L).withMinP(0.2), draws), draws);
    // minP 0.5: at least 0.25 -> tokens 1 and 3; the same cut with a top-k in front.
    double[] expected = {0, 0.5 / 0.8, 0, 0.3 / 0.8};
    assertMatches(expected, frequencies(logits, SamplingParams.defaults().withSeed(8L).withMinP(0.5), draws), draws);
    assertMatches(expected, frequencies(logits, SamplingParams.defaults().withSeed(8L).withMinP(0.5).withTopK(3), draws), draws);
  }

  @Test
  void repetitionPenaltyDividesPositiveAndMultipliesNegativeLogits() {
    float[] logits = {2.0f, 1.9f, -1.0f, -1.1f};
    SamplingParams penalised = SamplingParams.greedy().withRepetitionPenalty(2.0);
    // Token 0 seen: 2.0 -> 1.0, so token 1 (1.9) wins.
    assertEquals(1, sampler.sample(logits, penalised, SequenceState.create(penalised, new int[] {0, 0})).token());
    // Tokens 0 and 1 seen: 1.0 and 0.95 are still above the negatives.
    assertEquals(0, sampler.sample(logits, penalised, SequenceState.create(penalised, new int[] {0, 1})).token());
    // Among the negatives: -1.0 seen becomes -2.0, so -1.1 wins.
    float[] negative = {-1.0f, -1.1f};
    assertEquals(1, sampler.sample(negative, penalised, SequenceState.create(penalised, new int[] {0})).token());
    // Drawing: the frequencies follow the penalised softmax.
    SamplingParams drawing = SamplingParams.defaults().withSeed(6L).withRepetitionPenalty(2.0);
    double[] counts = new double[4];
    int draws = 20_000;
    for (int i = 0; i < draws; i++) {
      // A fresh copy of the state's tokens each draw: the drawn token would otherwise join the penalised set.
      counts[sampler.sample(logits, drawing, SequenceState.create(drawing.withSeed((long) i), new int[] {0, 2})).token()]++;
    }
    for (int i = 0; i < 4; i++) {
      counts[i] /= draws;
    }
    assertMatches(softmax(new float[] {1.0f, 1.9f, -2.0f, -1.1f}, 1), counts, draws);
  }

  @Test
  void theDrawnTokenJoinsTheSequence() {
    SamplingParams greedy = SamplingParams.greedy();
    SequenceState state = SequenceState.create(greedy, new int[] {3, 3, 1});
    sampler.sample(new float[] {0f, 0f, 9f, 0f}, greedy, state);
    assertEquals(4, state.length());
    assertArrayEquals(new int[] {3, 1, 2}, state.distinctTokens());
  }

  @Test
  void refusesSequenceTokensNoVocabularyHas() {
    SamplingParams params = SamplingParams.defaults();
    InvalidArgumentException huge = assertThrows(InvalidArgumentException.class,
        () -> SequenceState.create(params, new int[] {5, Integer.MAX_VALUE}));
    assertTrue(huge.getMessage().contains("token id 2147483647 is outside [0, 16777216)"), huge.getMessage());
    assertThrows(InvalidArgumentException.class, () -> SequenceState.create(params, new int[] {-1}));
    // A penalised token beyond the row's vocabulary is refused when sampling.
    SamplingParams penalised = SamplingParams.greedy().withRepetitionPenalty(1.5);
    InvalidArgumentException outside = assertThrows(InvalidArgumentException.class,
        () -> sampler.sample(new float[] {1f, 2f}, penalised, SequenceState.create(penalised, new int[] {7})));
    assertTrue(outside.getMessage().contains("token 7 of the sequence is outside the logits row of 2"), outside.getMessage());
  }

  @Test
  void reportsLogprobsOfTheModelsDistribution() {
    float[] logits = logitsOf(0.1, 0.6, 0.3);
    SamplingParams params = SamplingParams.greedy().withLogprobs(2).withRepetitionPenalty(1.5);
    Sample sample = sampler.sample(logits, params, SequenceState.create(params));
    assertEquals(1, sample.token());
    assertEquals(Math.log(0.6), sample.logprob(), 1e-5);
    assertEquals(List.of(1, 2), sample.top().stream().map(TopLogprob::token).toList());
    assertEquals(Math.log(0.6), sample.top().get(0).logprob(), 1e-5);
    assertEquals(Math.log(0.3), sample.top().get(1).logprob(), 1e-5);
    // Temperature changes what is drawn, not the reported log-probability.
    SamplingParams hot = SamplingParams.defaults().withTemperature(5).withSeed(1L);
    Sample drawn = sampler.sample(logits, hot, SequenceState.create(hot));
    assertEquals(Math.log(new double[] {0.1, 0.6, 0.3}[drawn.token()]), drawn.logprob(), 1e-5);
    assertEquals(List.of(), drawn.top());
  }

  @Test
  void samplesARowOfABatchInPlace() {
    float[] batch = {
      9f, 0f, 0f, 0f,
      0f, 0f, 0f, 9f,
      0f, 9f, 0f, 0f};
    FloatBuffer rows = FloatBuffer.wrap(batch);
    rows.position(3);
    SamplingParams greedy = SamplingParams.greedy();
    assertEquals(3, sampler.sample(rows, 4, 4, greedy, SequenceState.create(greedy)).token());
    assertEquals(1, sampler.sample(rows, 8, 4, greedy, SequenceState.create(greedy)).token());
    assertEquals(3, rows.position());
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
        () -> sampler.sample(rows, 10, 4, greedy, SequenceState.create(greedy)));
    assertTrue(e.getMessage().contains("[10, 14) does not fit the buffer of 12 logits"), e.getMessage());
  }

  @Test
  void topKFortyOnGpt2sVocabularyDrawsOnlyFromTheFortyBest() {
    SplittableRandom random = new SplittableRandom(12);
    float[] logits = new float[50_257];
    for (int i = 0; i < logits.length; i++) {
      logits[i] = (float) (random.nextGaussian() * 3);
    }
    float[] sorted = logits.clone();
    java.util.Arrays.sort(sorted); // the test may sort; the sampler does not
    float fortieth = sorted[sorted.length - 40];
    SamplingParams params = SamplingParams.defaults().withTopK(40).withSeed(1L).withTemperature(2.0);
    SequenceState state = SequenceState.create(params);
    java.util.Set<Integer> drawn = new java.util.HashSet<>();
    for (int i = 0; i < 2_000; i++) {
      int token = sampler.sample(logits, params, state).token();
      assertTrue(logits[token] >= fortieth, "token " + token + " is not among the 40 best");
      drawn.add(token);
    }
    assertTrue(drawn.size() > 30, "drew " + drawn.size() + " distinct tokens of the top 40");
  }

  @Test
  void refusesRowsWithoutADistribution() {
    SamplingParams greedy = SamplingParams.greedy();
    InvalidArgumentException nan = assertThrows(InvalidArgumentException.class,
        () -> sampler.sample(new float[] {0f, Float.NaN}, greedy, SequenceState.create(greedy)));
    assertTrue(nan.getMessage().contains("logit 1 is NaN"), nan.getMessage());
    assertThrows(InvalidArgumentException.class, () -> sampler.sample(
        new float[] {Float.NEGATIVE_INFINITY, Float.NEGATIVE_INFINITY}, greedy, SequenceState.create(greedy)));
  }
}
