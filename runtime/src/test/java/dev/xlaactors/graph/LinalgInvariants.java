package dev.xlaactors.graph;

import static org.junit.jupiter.api.Assertions.fail;

import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Checks of linear-algebra results by the properties that define them, for results that are not unique:
 * a Schur form's diagonal order and phases, eigenvector and singular vector phases, QR signs. Two correct
 * LAPACKs (or one OpenBLAS on two CPUs, whose kernels round differently) may return different factors for
 * the same input, so these are compared with what makes them correct (Z unitary, Z T Z^H = A, ...), never
 * element by element with a fixture made on one machine.
 *
 * <p>Tolerances come from the dtype: a residual of a product of n x n factors may reach about n times the
 * unit roundoff times the input's norm; {@link #SLACK} more allows for the algorithms' own error growth.
 */
final class LinalgInvariants {
  /** How many times the textbook backward-error bound a residual may reach. */
  private static final double SLACK = 64;

  private final double eps;
  private final String what;

  private LinalgInvariants(double eps, String what) {
    this.eps = eps;
    this.what = what;
  }

  /** Checks for results of {@code dtype} (f32, f64, c64 or c128), naming {@code what} in failures. */
  static LinalgInvariants of(DType dtype, String what) {
    boolean single = dtype == DType.F32 || dtype == DType.C64;
    return new LinalgInvariants(single ? 0x1.0p-24 : 0x1.0p-53, what);
  }

  /** A dense complex matrix (real inputs have zero imaginary parts). */
  record Matrix(int rows, int cols, double[] re, double[] im) {
    static Matrix zeros(int rows, int cols) {
      return new Matrix(rows, cols, new double[rows * cols], new double[rows * cols]);
    }

    static Matrix identity(int n) {
      Matrix m = zeros(n, n);
      for (int i = 0; i < n; i++) {
        m.re[i * n + i] = 1;
      }
      return m;
    }

    double re(int i, int j) {
      return re[i * cols + j];
    }

    double im(int i, int j) {
      return im[i * cols + j];
    }

    double abs(int i, int j) {
      return Math.hypot(re(i, j), im(i, j));
    }

    Matrix times(Matrix o) {
      if (cols != o.rows) {
        throw new IllegalArgumentException(rows + "x" + cols + " times " + o.rows + "x" + o.cols);
      }
      Matrix p = zeros(rows, o.cols);
      for (int i = 0; i < rows; i++) {
        for (int k = 0; k < cols; k++) {
          double ar = re(i, k);
          double ai = im(i, k);
          for (int j = 0; j < o.cols; j++) {
            p.re[i * o.cols + j] += ar * o.re(k, j) - ai * o.im(k, j);
            p.im[i * o.cols + j] += ar * o.im(k, j) + ai * o.re(k, j);
          }
        }
      }
      return p;
    }

    /** The conjugate transpose. */
    Matrix adjoint() {
      Matrix t = zeros(cols, rows);
      for (int i = 0; i < rows; i++) {
        for (int j = 0; j < cols; j++) {
          t.re[j * rows + i] = re(i, j);
          t.im[j * rows + i] = -im(i, j);
        }
      }
      return t;
    }

    /** The first {@code n} columns. */
    Matrix leftColumns(int n) {
      Matrix c = zeros(rows, n);
      for (int i = 0; i < rows; i++) {
        for (int j = 0; j < n; j++) {
          c.re[i * n + j] = re(i, j);
          c.im[i * n + j] = im(i, j);
        }
      }
      return c;
    }

    /** The first {@code n} rows. */
    Matrix topRows(int n) {
      return new Matrix(n, cols, Arrays.copyOf(re, n * cols), Arrays.copyOf(im, n * cols));
    }

    /** Columns in the order {@code order} gives: column j of the result is column order[j] of this. */
    Matrix permuteColumns(long[] order) {
      Matrix c = zeros(rows, cols);
      for (int i = 0; i < rows; i++) {
        for (int j = 0; j < cols; j++) {
          c.re[i * cols + j] = re(i, (int) order[j]);
          c.im[i * cols + j] = im(i, (int) order[j]);
        }
      }
      return c;
    }

    /** This with column j scaled by {@code diagonal[j]} (complex, interleaved). */
    Matrix scaleColumns(double[] diagonal) {
      Matrix c = zeros(rows, cols);
      for (int i = 0; i < rows; i++) {
        for (int j = 0; j < cols; j++) {
          double dr = diagonal[2 * j];
          double di = diagonal[2 * j + 1];
          c.re[i * cols + j] = re(i, j) * dr - im(i, j) * di;
          c.im[i * cols + j] = re(i, j) * di + im(i, j) * dr;
        }
      }
      return c;
    }

    Matrix minus(Matrix o) {
      Matrix d = zeros(rows, cols);
      for (int i = 0; i < re.length; i++) {
        d.re[i] = re[i] - o.re[i];
        d.im[i] = im[i] - o.im[i];
      }
      return d;
    }

    double frobenius() {
      double s = 0;
      for (int i = 0; i < re.length; i++) {
        s += re[i] * re[i] + im[i] * im[i];
      }
      return Math.sqrt(s);
    }
  }

  /** The matrices of a [..., rows, cols] tensor of any float or complex dtype, batch dimensions flattened. */
  static List<Matrix> matrices(HostTensor t) {
    long[] dims = t.shape().dims();
    int rows = (int) dims[dims.length - 2];
    int cols = (int) dims[dims.length - 1];
    double[] values = complexValues(t);
    int size = rows * cols;
    List<Matrix> out = new ArrayList<>();
    for (int b = 0; b * size < values.length / 2; b++) {
      Matrix m = Matrix.zeros(rows, cols);
      for (int k = 0; k < size; k++) {
        m.re[k] = values[2 * (b * size + k)];
        m.im[k] = values[2 * (b * size + k) + 1];
      }
      out.add(m);
    }
    return out;
  }

  /** The vectors of a [..., n] tensor as interleaved complex values, batch dimensions flattened. */
  static List<double[]> vectors(HostTensor t) {
    long[] dims = t.shape().dims();
    int n = (int) dims[dims.length - 1];
    double[] values = complexValues(t);
    List<double[]> out = new ArrayList<>();
    for (int b = 0; b * 2 * n < values.length; b++) {
      out.add(Arrays.copyOfRange(values, b * 2 * n, (b + 1) * 2 * n));
    }
    return out;
  }

  /** The integer vectors of a [..., n] integer tensor, batch dimensions flattened. */
  static List<long[]> integerVectors(HostTensor t) {
    long[] dims = t.shape().dims();
    int n = (int) dims[dims.length - 1];
    long[] values = t.toLongArray();
    List<long[]> out = new ArrayList<>();
    for (int b = 0; b * n < values.length; b++) {
      out.add(Arrays.copyOfRange(values, b * n, (b + 1) * n));
    }
    return out;
  }

  private static double[] complexValues(HostTensor t) {
    DType dtype = t.dtype();
    if (dtype == DType.C128) {
      return t.toComplex128Array();
    }
    double[] out;
    if (dtype == DType.C64) {
      float[] f = t.toComplex64Array();
      out = new double[f.length];
      for (int i = 0; i < f.length; i++) {
        out[i] = f[i];
      }
      return out;
    }
    double[] real = dtype == DType.F32 ? toDoubles(t.toFloatArray()) : t.toDoubleArray();
    out = new double[2 * real.length];
    for (int i = 0; i < real.length; i++) {
      out[2 * i] = real[i];
    }
    return out;
  }

  private static double[] toDoubles(float[] f) {
    double[] d = new double[f.length];
    for (int i = 0; i < f.length; i++) {
      d[i] = f[i];
    }
    return d;
  }

  // ---- the invariants ------------------------------------------------------------------------------

  /** {@code product} equals {@code expected} up to the rounding of a product of {@code n}-wide factors. */
  void assertReconstructs(Matrix expected, Matrix product, int n, String how) {
    double residual = product.minus(expected).frobenius();
    double bound = SLACK * n * eps * Math.max(1, expected.frobenius());
    if (!(residual <= bound)) {
      fail(what + ": " + how + " does not give the input back: ||residual|| = " + residual + ", bound " + bound);
    }
  }

  /** The columns of {@code q} are orthonormal: Q^H Q = I. */
  void assertOrthonormalColumns(Matrix q, String name) {
    assertReconstructs(Matrix.identity(q.cols), q.adjoint().times(q), q.rows, name + "^H " + name + " = I");
  }

  /** The rows of {@code vh} are orthonormal: Vh Vh^H = I. */
  void assertOrthonormalRows(Matrix vh, String name) {
    assertReconstructs(Matrix.identity(vh.rows), vh.times(vh.adjoint()), vh.cols, name + " " + name + "^H = I");
  }

  /** Zero below the diagonal {@code below} places down (1: upper triangular, 2: upper Hessenberg). */
  void assertZeroBelow(Matrix m, int below, String name, double scale) {
    double bound = SLACK * eps * Math.max(1, scale);
    for (int i = 0; i < m.rows; i++) {
      for (int j = 0; j < Math.min(m.cols, i - below + 1); j++) {
        if (!(m.abs(i, j) <= bound)) {
          fail(what + ": " + name + "[" + i + "," + j + "] = " + m.abs(i, j) + " should be 0 (bound " + bound + ")");
        }
      }
    }
  }

  /**
   * A real Schur form: upper triangular but for 2x2 diagonal blocks (complex conjugate eigenvalue pairs),
   * so no two consecutive subdiagonal entries are nonzero.
   */
  void assertQuasiUpperTriangular(Matrix t, double scale) {
    assertZeroBelow(t, 2, "T", scale);
    double bound = SLACK * eps * Math.max(1, scale);
    for (int i = 1; i + 1 < t.rows; i++) {
      if (t.abs(i, i - 1) > bound && t.abs(i + 1, i) > bound) {
        fail(what + ": T has two consecutive nonzero subdiagonal entries at " + i + ": not a real Schur form");
      }
    }
  }

  /**
   * The eigenvalues of a Schur factor, interleaved complex: its diagonal, but for the 2x2 blocks of a
   * real Schur form ({@code real}), whose eigenvalues are computed.
   */
  static double[] schurEigenvalues(Matrix t, boolean real) {
    int n = t.rows;
    double[] w = new double[2 * n];
    for (int i = 0; i < n; i++) {
      boolean block = real && i + 1 < n && t.re(i + 1, i) != 0;
      if (block) { // a real 2x2 block [[a b] [c d]]: (a+d)/2 +- sqrt(((a-d)/2)^2 + bc)
        double a = t.re(i, i), b = t.re(i, i + 1), c = t.re(i + 1, i), d = t.re(i + 1, i + 1);
        double mean = (a + d) / 2;
        double disc = ((a - d) / 2) * ((a - d) / 2) + b * c;
        double root = Math.sqrt(Math.abs(disc));
        if (disc >= 0) {
          w[2 * i] = mean + root;
          w[2 * i + 2] = mean - root;
        } else {
          w[2 * i] = mean;
          w[2 * i + 1] = root;
          w[2 * i + 2] = mean;
          w[2 * i + 3] = -root;
        }
        i++;
      } else {
        w[2 * i] = t.re(i, i);
        w[2 * i + 1] = t.im(i, i);
      }
    }
    return w;
  }

  /**
   * The same complex values in any order (eigenvalues as a multiset): each expected value is matched with
   * the nearest actual one not matched yet, within {@code SLACK} times the roundoff of the matrix's norm
   * amplified by {@code conditioning}.
   */
  void assertSameMultiset(double[] expected, double[] actual, double norm, double conditioning, String name) {
    if (expected.length != actual.length) {
      fail(what + ": " + name + ": expected " + expected.length / 2 + " values, got " + actual.length / 2);
    }
    int n = expected.length / 2;
    boolean[] used = new boolean[n];
    double bound = SLACK * n * eps * Math.max(1, norm) * conditioning;
    for (int i = 0; i < n; i++) {
      int best = -1;
      double bestDistance = Double.POSITIVE_INFINITY;
      for (int j = 0; j < n; j++) {
        double d = Math.hypot(expected[2 * i] - actual[2 * j], expected[2 * i + 1] - actual[2 * j + 1]);
        if (!used[j] && d < bestDistance) {
          best = j;
          bestDistance = d;
        }
      }
      if (!(bestDistance <= bound)) {
        fail(what + ": " + name + ": expected value " + expected[2 * i] + (expected[2 * i + 1] >= 0 ? "+" : "")
            + expected[2 * i + 1] + "i is not among " + Arrays.toString(actual) + " (bound " + bound + ")");
      }
      used[best] = true;
    }
  }

  /** Each column v_j of {@code v} is an eigenvector of {@code a} for w_j, of unit norm. */
  void assertEigenpairs(Matrix a, double[] w, Matrix v, String name) {
    assertReconstructs(a.times(v), v.scaleColumns(w), a.rows, "A V = V diag(w) (" + name + ")");
    for (int j = 0; j < v.cols; j++) {
      double norm = 0;
      for (int i = 0; i < v.rows; i++) {
        norm += v.abs(i, j) * v.abs(i, j);
      }
      if (!(Math.abs(Math.sqrt(norm) - 1) <= SLACK * v.rows * eps)) {
        fail(what + ": " + name + " column " + j + " has norm " + Math.sqrt(norm) + ", expected 1");
      }
    }
  }

  /** {@code order} is a permutation of 0..n-1. */
  void assertPermutation(long[] order, String name) {
    long[] sorted = order.clone();
    Arrays.sort(sorted);
    for (int i = 0; i < sorted.length; i++) {
      if (sorted[i] != i) {
        fail(what + ": " + name + " " + Arrays.toString(order) + " is not a permutation of 0.." + (sorted.length - 1));
      }
    }
  }

  /** |r_ii| does not grow along the diagonal, as column pivoting guarantees. */
  void assertNonIncreasingDiagonal(Matrix r, String name) {
    double bound = SLACK * eps * Math.max(1, r.frobenius());
    for (int i = 1; i < Math.min(r.rows, r.cols); i++) {
      if (r.abs(i, i) > r.abs(i - 1, i - 1) + bound) {
        fail(what + ": |" + name + "[" + i + "," + i + "]| = " + r.abs(i, i) + " > |" + name + "[" + (i - 1) + ","
            + (i - 1) + "]| = " + r.abs(i - 1, i - 1) + ": not what column pivoting gives");
      }
    }
  }

  /** |diag(r)| equals |diag(expected)|: R's diagonal is unique up to phase. */
  void assertSameDiagonalMagnitudes(Matrix expected, Matrix actual, String name) {
    double bound = SLACK * expected.rows * eps * Math.max(1, expected.frobenius());
    for (int i = 0; i < Math.min(expected.rows, expected.cols); i++) {
      if (!(Math.abs(expected.abs(i, i) - actual.abs(i, i)) <= bound)) {
        fail(what + ": |" + name + "[" + i + "," + i + "]| expected " + expected.abs(i, i) + ", got " + actual.abs(i, i));
      }
    }
  }
}
