package dev.xlaactors.lm.sampling;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Arrays;
import java.util.Comparator;
import java.util.SplittableRandom;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** The partial selections the sampler relies on, against a full sort (which only the test does). */
class SelectorsTest {

  /** Ids by value descending, then id ascending. */
  private static int[] sortedIds(float[] values) {
    return IntStream.range(0, values.length).boxed()
        .sorted(Comparator.<Integer>comparingDouble(i -> -values[i]).thenComparingInt(i -> i))
        .mapToInt(Integer::intValue).toArray();
  }

  private static float[] row(SplittableRandom random, int n, boolean ties) {
    float[] values = new float[n];
    for (int i = 0; i < n; i++) {
      values[i] = ties ? (float) Math.floor(random.nextDouble() * 20) : (float) (random.nextGaussian() * 3);
    }
    return values;
  }

  @Test
  void topKMatchesTheSortedPrefix() {
    SplittableRandom random = new SplittableRandom(3);
    TopKSelector selector = new TopKSelector();
    for (int trial = 0; trial < 50; trial++) {
      float[] values = row(random, 1 + random.nextInt(3000), trial % 2 == 0);
      values[random.nextInt(values.length)] = Float.NEGATIVE_INFINITY;
      int k = 1 + random.nextInt(100);
      int[] out = new int[values.length];
      int count = selector.select(values, values.length, k, out);
      int[] expected = Arrays.copyOf(sortedIds(values), Math.min(k, values.length));
      assertArrayEquals(expected, Arrays.copyOf(out, count), "trial " + trial);
    }
  }

  @Test
  void topKOrdersSignedZerosAndInfinitiesAsItsRankDoes() {
    float[] special = {0.0f, -0.0f, Float.NEGATIVE_INFINITY, Float.POSITIVE_INFINITY, Float.MIN_VALUE, -Float.MIN_VALUE,
        Float.MAX_VALUE, -Float.MAX_VALUE, 1.5f, -1.5f};
    for (float v : special) {
      assertEquals(Float.floatToIntBits(v), Float.floatToIntBits(TopKSelector.valueOf(TopKSelector.rank(v, 7))),
          "the value back from the rank of " + v);
    }
    SplittableRandom random = new SplittableRandom(5);
    TopKSelector selector = new TopKSelector();
    for (int trial = 0; trial < 50; trial++) {
      // Rows of mostly zeros of either sign: the cut's fast skip compares floats, where -0.0 == 0.0, yet +0.0
      // ranks above -0.0 and must still displace it.
      float[] values = new float[1 + random.nextInt(200)];
      for (int i = 0; i < values.length; i++) {
        values[i] = special[random.nextInt(3) == 0 ? random.nextInt(special.length) : random.nextInt(2)];
      }
      int k = 1 + random.nextInt(20);
      int[] out = new int[values.length];
      int count = selector.select(values, values.length, k, out);
      assertArrayEquals(Arrays.copyOf(sortedIds(values), Math.min(k, values.length)), Arrays.copyOf(out, count),
          "trial " + trial + ": " + Arrays.toString(values));
    }
  }

  @Test
  void nucleusMatchesTheSortedDefinition() {
    SplittableRandom random = new SplittableRandom(4);
    NucleusSelector selector = new NucleusSelector();
    for (int trial = 0; trial < 200; trial++) {
      float[] values = row(random, 1 + random.nextInt(5000), trial % 3 == 0);
      double[] weights = new double[values.length];
      double max = Arrays.stream(sortedIds(values)).limit(1).mapToDouble(i -> values[i]).sum();
      double total = 0;
      for (int i = 0; i < values.length; i++) {
        weights[i] = Math.exp(values[i] - max);
        total += weights[i];
      }
      double topP = random.nextDouble() * 0.999 + 0.001;
      // The definition: walk the sorted ids, keep each while the mass before it is below topP * total.
      int[] sorted = sortedIds(values);
      double before = 0;
      int size = 0;
      while (size < sorted.length && before < topP * total) {
        before += weights[sorted[size++]];
      }
      int[] expected = Arrays.copyOf(sorted, size);
      Arrays.sort(expected);
      int[] out = new int[values.length];
      int count = selector.select(values, weights, values.length, topP * total, out);
      int[] actual = Arrays.copyOf(out, count);
      Arrays.sort(actual);
      assertEquals(expected.length, actual.length, "trial " + trial + ": nucleus size for top-p " + topP);
      assertArrayEquals(expected, actual, "trial " + trial);
    }
  }
}
