package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The bridge's vector {@code exp} pass ({@link HostVectorMath#expSum}) against {@link Math#exp}, term by term, at
 * lengths that leave every tail a vector loop can have, with masked ({@code -inf}) and far-below values; and its
 * refusals of lengths that would read past an array.
 */
class HostVectorMathTest {
  private static final float BELOW_RANGE = -87.3f;

  @Test
  void expSumMatchesMathExpTermByTermAtEveryTailLength() {
    Random random = new Random(7);
    for (int n : new int[] {1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1023, 1031, 50_257}) {
      float[] values = new float[n + 5]; // longer than n: nothing past n may be read or written
      for (int i = 0; i < values.length; i++) {
        values[i] = (float) (random.nextGaussian() * 8);
      }
      if (n > 1) {
        values[random.nextInt(n)] = Float.NEGATIVE_INFINITY; // a masked token
      }
      if (n > 2) {
        values[random.nextInt(n)] = -500f; // far below the others, but finite
      }
      float max = Float.NEGATIVE_INFINITY;
      int best = 0;
      for (int i = 0; i < n; i++) {
        if (values[i] > max) {
          max = values[i];
          best = i;
        }
      }
      double[] terms = new double[n + 5];
      Arrays.fill(terms, -1);
      double sum = HostVectorMath.expSum(values, n, max, terms);
      double expected = 0;
      for (int i = 0; i < n; i++) {
        double exact = Math.exp(values[i] - max);
        float distance = values[i] - max;
        if (distance < BELOW_RANGE) {
          assertEquals(0.0, terms[i], "n=" + n + ": the term of " + values[i] + " (" + distance + " below the best)");
        } else {
          assertEquals(exact, terms[i], 2e-7 * exact + 1e-37, "n=" + n + ": e^(" + values[i] + " - " + max + ")");
          expected += exact;
        }
      }
      assertEquals(1.0, terms[best], "n=" + n + ": the best value's term is exactly e^0");
      assertEquals(expected, sum, 1e-6 * expected, "n=" + n + ": the sum");
      assertEquals(-1.0, terms[n], "n=" + n + ": nothing written past n");
      assertEquals(sum, HostVectorMath.expSum(values, n, max, null), 0.0, "n=" + n + ": the sum without terms");
    }
  }

  @Test
  void expSumOfNothingIsZeroAndLengthsPastAnArrayAreRefused() {
    assertEquals(0.0, HostVectorMath.expSum(new float[0], 0, 0f, null));
    InvalidArgumentException past = assertThrows(InvalidArgumentException.class,
        () -> HostVectorMath.expSum(new float[4], 5, 0f, null));
    assertTrue(past.getMessage().contains("5 values of an array of 4"), past.getMessage());
    InvalidArgumentException shortTerms = assertThrows(InvalidArgumentException.class,
        () -> HostVectorMath.expSum(new float[8], 8, 0f, new double[7]));
    assertTrue(shortTerms.getMessage().contains("into 7 terms"), shortTerms.getMessage());
    assertThrows(InvalidArgumentException.class, () -> HostVectorMath.expSum(new float[4], -1, 0f, null));
    assertThrows(InvalidArgumentException.class, () -> HostVectorMath.expSum(null, 0, 0f, null));
  }
}
