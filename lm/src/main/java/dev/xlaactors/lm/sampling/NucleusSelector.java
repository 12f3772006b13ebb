package dev.xlaactors.lm.sampling;

/**
 * The nucleus of top-p sampling without a top-k cut: the most likely tokens, each kept while the mass of
 * the tokens ranked above it is below a target, found without sorting the vocabulary.
 *
 * <p>A quickselect on probability mass: partition the remaining tokens around a pivot by rank (higher
 * value first, then lower index, as {@link TopKSelector#rank}); if the better side already holds the
 * mass still needed, the nucleus ends there, otherwise it holds all of it and the pivot, and the search
 * goes on below. Expected {@code O(n)}; only the last few tokens ({@value #SORT_BELOW} at most) are
 * sorted. The pivot is the median of three, so the result is deterministic (a seeded draw repeats).
 * Not thread-safe.
 */
final class NucleusSelector {
  /** Below this many tokens what is left is sorted. */
  static final int SORT_BELOW = 32;

  /**
   * Writes the nucleus of {@code values[0..n)} (ranked by value) to {@code out}, in no particular order,
   * and returns its size: each token kept while the sum of {@code weights} of the tokens ranked above it
   * is below {@code target} (so at least one token, for {@code target > 0}).
   */
  int select(float[] values, double[] weights, int n, double target, int[] out) {
    for (int i = 0; i < n; i++) {
      out[i] = i;
    }
    double need = target; // the token at lo is kept while need > 0
    int lo = 0;
    int hi = n;
    while (hi - lo > SORT_BELOW) {
      int pivotAt = medianOfThree(values, out, lo, (lo + hi) >>> 1, hi - 1);
      long pivot = TopKSelector.rank(values[out[pivotAt]], out[pivotAt]);
      swap(out, pivotAt, hi - 1);
      int better = lo;
      double betterMass = 0;
      for (int i = lo; i < hi - 1; i++) {
        if (TopKSelector.rank(values[out[i]], out[i]) < pivot) {
          betterMass += weights[out[i]];
          swap(out, i, better++);
        }
      }
      swap(out, better, hi - 1); // the pivot now follows every token better than it
      if (betterMass >= need) {
        hi = better; // the pivot's mass-before reaches the target: the nucleus ends among the better ones
      } else {
        need -= betterMass + weights[out[better]];
        lo = better + 1;
        if (need <= 0) {
          return lo;
        }
      }
    }
    sortByRank(values, out, lo, hi);
    int end = lo;
    while (end < hi && need > 0) {
      need -= weights[out[end++]];
    }
    return end;
  }

  private static int medianOfThree(float[] values, int[] c, int a, int b, int d) {
    long ra = TopKSelector.rank(values[c[a]], c[a]);
    long rb = TopKSelector.rank(values[c[b]], c[b]);
    long rd = TopKSelector.rank(values[c[d]], c[d]);
    if (ra < rb) {
      return rb < rd ? b : (ra < rd ? d : a);
    }
    return ra < rd ? a : (rb < rd ? d : b);
  }

  private static void sortByRank(float[] values, int[] c, int from, int to) {
    for (int i = from + 1; i < to; i++) {
      int id = c[i];
      long key = TopKSelector.rank(values[id], id);
      int j = i - 1;
      while (j >= from && TopKSelector.rank(values[c[j]], c[j]) > key) {
        c[j + 1] = c[j];
        j--;
      }
      c[j + 1] = id;
    }
  }

  private static void swap(int[] c, int i, int j) {
    int t = c[i];
    c[i] = c[j];
    c[j] = t;
  }
}
