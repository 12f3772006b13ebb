package dev.xlaactors.runtime;

import static dev.xlaactors.nativebridge.pjrt.global.Pjrt.XlaActors_ExpSum;

import dev.xlaactors.error.InvalidArgumentException;

/**
 * Loops over host arrays that HotSpot's JIT does not vectorise, run by the bridge in vectors of the
 * instruction set its matmul kernels use (see {@link MatmulKernels#isa()}). A language model's sampler takes an
 * {@code exp} of every logit of a row to normalise it: 50,257 calls of {@link Math#exp} took 360-600 us per row
 * on a 2-core AVX2 machine, the bridge's vector pass about a tenth of that. The arrays are pinned for the call,
 * not copied. Thread-safe.
 */
public final class HostVectorMath {
  static {
    NativeLibrary.load();
  }

  private HostVectorMath() {}

  /**
   * The sum of {@code e^(values[i] - shift)} over {@code i} in {@code [0, n)}, in double. Each term is computed
   * in f32 to a few units in its last place (within 2e-7 of {@link Math#exp}'s, relative); a term whose
   * {@code values[i] - shift} is below -87.3 ({@code -inf} among them) is exactly 0. With {@code shift} the
   * row's maximum every term is at most 1, and {@code shift + log(sum)} is the row's log-normaliser. When
   * {@code terms} is not null, {@code terms[i]} gets each term. NaN values give a NaN sum: check them first.
   *
   * @throws InvalidArgumentException when {@code n} is negative or larger than {@code values} (or {@code terms})
   */
  public static double expSum(float[] values, int n, float shift, double[] terms) {
    if (values == null || n < 0 || n > values.length || (terms != null && n > terms.length)) {
      throw new InvalidArgumentException("expSum over " + n + " values of an array of "
          + (values == null ? "null" : String.valueOf(values.length)) + (terms == null ? "" : " into " + terms.length
          + " terms") + ": expected 0 <= n <= the length of each array");
    }
    if (n == 0) {
      return 0;
    }
    return XlaActors_ExpSum(values, n, shift, terms);
  }
}
