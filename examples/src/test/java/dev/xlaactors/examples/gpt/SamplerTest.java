package dev.xlaactors.examples.gpt;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/** The sampler's invariants, checked with seeded RNGs over many draws. */
class SamplerTest {
  private static final float[] LOGITS = {1f, 3f, 0.5f, 2.9f, -1f, 2.5f, 0f, 3f};

  private static int[] draws(SamplingSettings s, float[] logits, int n) {
    Sampler sampler = new Sampler(s);
    int[] counts = new int[logits.length];
    for (int i = 0; i < n; i++) {
      counts[sampler.sample(logits, 1, logits.length)[0]]++;
    }
    return counts;
  }

  private static Set<Integer> drawn(int[] counts) {
    Set<Integer> s = new TreeSet<>();
    for (int i = 0; i < counts.length; i++) {
      if (counts[i] > 0) {
        s.add(i);
      }
    }
    return s;
  }

  @Test
  void greedyTakesTheHighestLogitAndTheLowestIdOnATie() {
    Sampler greedy = new Sampler(SamplingSettings.greedy());
    assertArrayEquals(new int[] {1}, greedy.sample(LOGITS, 1, 8)); // 1 and 7 tie at 3.0
    float[] twoRows = {0, 1, 5, 2, /* row 1 */ 9, 1, 1, 1};
    assertArrayEquals(new int[] {2, 0}, greedy.sample(twoRows, 2, 4));
  }

  @Test
  void topKDrawsOnlyFromTheKHighest() {
    int[] counts = draws(new SamplingSettings(1.0, 3, 1.0, Set.of(), 11), LOGITS, 4000);
    assertEquals(Set.of(1, 3, 7), drawn(counts)); // 3.0, 2.9, 3.0: each of them, nothing else
  }

  @Test
  void topPDrawsFromTheSmallestSetReachingP() {
    // probabilities ~ 0.5, 0.3, 0.15, 0.05
    float[] logits = {(float) Math.log(0.5), (float) Math.log(0.3), (float) Math.log(0.15), (float) Math.log(0.05)};
    assertEquals(Set.of(0, 1), drawn(draws(new SamplingSettings(1.0, 0, 0.79, Set.of(), 3), logits, 3000)));
    assertEquals(Set.of(0, 1, 2), drawn(draws(new SamplingSettings(1.0, 0, 0.81, Set.of(), 3), logits, 3000)));
    assertEquals(Set.of(0), drawn(draws(new SamplingSettings(1.0, 0, 0.1, Set.of(), 3), logits, 1000)));
    int[] all = draws(new SamplingSettings(1.0, 0, 1.0, Set.of(), 3), logits, 20000);
    assertEquals(Set.of(0, 1, 2, 3), drawn(all));
    assertEquals(0.5, all[0] / 20000.0, 0.02, "token 0 is drawn with its probability");
  }

  @Test
  void temperatureSharpensAndFlattens() {
    float[] logits = {2f, 1f, 0f};
    int cold = draws(new SamplingSettings(0.25, 0, 1.0, Set.of(), 5), logits, 5000)[0];
    int warm = draws(new SamplingSettings(1.0, 0, 1.0, Set.of(), 5), logits, 5000)[0];
    int hot = draws(new SamplingSettings(4.0, 0, 1.0, Set.of(), 5), logits, 5000)[0];
    assertTrue(cold > warm && warm > hot, "top-token count must fall as temperature rises: " + cold + ", " + warm + ", " + hot);
    assertEquals(Math.exp(2) / (Math.exp(2) + Math.exp(1) + 1), warm / 5000.0, 0.03);
  }

  @Test
  void theSameSeedDrawsTheSameTokens() {
    SamplingSettings s = new SamplingSettings(1.0, 0, 1.0, Set.of(), 42);
    Sampler a = new Sampler(s);
    Sampler b = new Sampler(s);
    Sampler c = new Sampler(new SamplingSettings(1.0, 0, 1.0, Set.of(), 43));
    int[] ra = new int[64];
    int[] rb = new int[64];
    int[] rc = new int[64];
    for (int i = 0; i < 64; i++) {
      ra[i] = a.sample(LOGITS, 1, 8)[0];
      rb[i] = b.sample(LOGITS, 1, 8)[0];
      rc[i] = c.sample(LOGITS, 1, 8)[0];
    }
    assertArrayEquals(ra, rb);
    assertNotEquals(java.util.Arrays.toString(ra), java.util.Arrays.toString(rc));
  }

  @Test
  void badSettingsAndLogitsFailClearly() {
    assertTrue(assertThrows(InvalidArgumentException.class, () -> new SamplingSettings(-1, 0, 1, Set.of(), 0))
        .getMessage().contains("temperature must be a finite number >= 0"));
    assertThrows(InvalidArgumentException.class, () -> new SamplingSettings(Double.NaN, 0, 1, Set.of(), 0));
    assertThrows(InvalidArgumentException.class, () -> new SamplingSettings(Double.POSITIVE_INFINITY, 0, 1, Set.of(), 0));
    assertTrue(assertThrows(InvalidArgumentException.class, () -> new SamplingSettings(1, -1, 1, Set.of(), 0))
        .getMessage().contains("top-k must be >= 0"));
    assertTrue(assertThrows(InvalidArgumentException.class, () -> new SamplingSettings(1, 0, 0, Set.of(), 0))
        .getMessage().contains("top-p must be in (0, 1]"));
    assertThrows(InvalidArgumentException.class, () -> new SamplingSettings(1, 0, 1.5, Set.of(), 0));
    Sampler s = new Sampler(SamplingSettings.greedy());
    assertTrue(assertThrows(InvalidArgumentException.class, () -> s.sample(new float[5], 2, 3))
        .getMessage().contains("logits hold 5 values, expected batch 2 x vocab 3"));
    assertTrue(assertThrows(InvalidArgumentException.class, () -> s.sample(new float[] {0, Float.NaN}, 1, 2))
        .getMessage().contains("logit 1 is NaN"));
  }
}
