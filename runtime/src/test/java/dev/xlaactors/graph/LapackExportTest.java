package dev.xlaactors.graph;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.LapackLibrary;
import dev.xlaactors.runtime.XlaClient;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * JAX exports of {@code jnp.linalg} and {@code jax.scipy.linalg} (jax 0.10.2, tools/jax_linalg_fixtures.py),
 * whose CPU lowerings call the {@code lapack_*_ffi} custom calls, run on the real plugin with the bridge's
 * LAPACK handlers and compared with JAX's own outputs, for f32, f64, c64 and c128.
 *
 * <p>Programs: {@code square} (Cholesky, solve, inv, det, slogdet, LU with pivots and permutation, eigh,
 * eigvalsh, eig, eigvals, three triangular solves; batched [2,3,3]), {@code rect} (reduced and complete QR,
 * full and thin SVD, singular values, pinv, matrix_rank, lstsq; batched [2,4,3]), {@code singular}
 * (exactly singular solve, inv, det, slogdet and SVD, Cholesky and eigvalsh of an indefinite matrix: the
 * NaNs, infinities and zeros JAX gives must come back), {@code orthogonal} (the orthogonal initializer) and
 * {@code more} (SVD by QR iteration, pivoted QR, Hessenberg and tridiagonal reduction, tridiagonal solve)
 * and {@code schur_ormqr} (Schur decomposition; products with Householder reflectors on both sides).
 *
 * <p>Results that are unique are compared with JAX's element by element. Results that are not (a Schur
 * form's eigenvalue order and phases, eigenvector and singular-vector phases, QR signs, the pivot order of
 * equal columns) differ between two correct LAPACK runs, and between CPUs whose OpenBLAS kernels round
 * differently: a fixture made on one machine must not decide them. They are checked by the properties that
 * define them ({@link LinalgInvariants}), and compared with JAX's only where they are unique (eigenvalues
 * as a multiset, |diag R|).
 */
class LapackExportTest {
  private static XlaClient client;

  @BeforeAll
  static void open() {
    client = XlaClient.create();
  }

  @AfterAll
  static void close() {
    client.close();
  }

  @Test
  void openBlasIsLoadedForTheHandlers() {
    assertTrue(LapackLibrary.isLoaded(), LapackLibrary.description());
    assertTrue(LapackLibrary.description().startsWith("OpenBLAS 0.3.31"), LapackLibrary.description());
  }

  @ParameterizedTest(name = "{0}_{1}")
  @CsvSource({
    "square, f32", "square, f64", "square, c64", "square, c128",
    "rect, f32", "rect, f64", "rect, c64", "rect, c128",
    "singular, f32", "singular, f64", "singular, c64", "singular, c128",
    "orthogonal, f32", "orthogonal, f64", "orthogonal, c64", "orthogonal, c128",
    "more, f32", "more, f64", "more, c64", "more, c128",
    "schur_ormqr, f32", "schur_ormqr, f64", "schur_ormqr, c64", "schur_ormqr, c128",
  })
  void jaxLinalgExportMatchesJax(String program, String dtype) {
    String name = program + "_" + dtype;
    String text = JaxFixture.resource("linalg/" + name + ".mlir.gz");
    assertTrue(text.contains("lapack_"), name + " should call LAPACK custom calls");
    ImportedProgram imported = ImportedProgram.fromText(name + ".mlir", text);
    JaxFixture fixture = JaxFixture.load("linalg/" + name);
    List<String> names = outputNames(name);
    assertEquals(fixture.inputs().stream().map(HostTensor::type).toList(), imported.parameterTypes());
    boolean single = dtype.equals("f32") || dtype.equals("c64");
    double rtol = single ? 2e-4 : 1e-9;
    double atol = single ? 2e-5 : 1e-11;
    try (Executable exe = imported.compile(client)) {
      List<HostTensor> actual = exe.run(fixture.inputs().toArray(HostTensor[]::new));
      assertLikeJax(name, fixture, names, actual, rtol, atol);
    }
  }

  /**
   * The unique outputs equal JAX's within {@code rtol}/{@code atol}; the others have the properties that
   * define them.
   */
  private static void assertLikeJax(
      String name, JaxFixture fixture, List<String> names, List<HostTensor> actual, double rtol, double atol) {
    assertEquals(fixture.outputs().size(), actual.size(), name + " outputs");
    Map<String, HostTensor> expectedByName = new HashMap<>();
    Map<String, HostTensor> actualByName = new HashMap<>();
    for (int i = 0; i < actual.size(); i++) {
      assertEquals(fixture.outputs().get(i).type(), actual.get(i).type(), name + " " + names.get(i));
      expectedByName.put(names.get(i), fixture.outputs().get(i));
      actualByName.put(names.get(i), actual.get(i));
      if (!NOT_UNIQUE.contains(names.get(i))) {
        assertMatches(fixture.outputs().get(i), actual.get(i), rtol, atol, name + " " + names.get(i));
      }
    }
    DType precision = java.util.stream.Stream.concat(fixture.inputs().stream(), fixture.outputs().stream())
        .map(HostTensor::dtype)
        .filter(d -> d == DType.F32 || d == DType.F64 || d == DType.C64 || d == DType.C128)
        .findFirst()
        .orElseThrow();
    checkNotUnique(fixture.inputs(), expectedByName, actualByName, LinalgInvariants.of(precision, name));
  }

  /** Outputs that two correct runs may give differently; checked by {@link #checkNotUnique}. */
  private static final Set<String> NOT_UNIQUE = Set.of(
      "eigh_v", "eig_w", "eig_v", "eigvals",
      "qr_q", "qr_r", "qr_complete_q", "qr_complete_r",
      "svd_u", "svd_vh", "svd_thin_u", "svd_thin_vh", "svd_qr_u", "svd_qr_vh", "svd_qr_thin_u", "svd_qr_thin_vh",
      "qr_pivoting_q", "qr_pivoting_r", "qr_pivoting_p",
      "hessenberg_h", "hessenberg_q",
      "schur_t", "schur_z");

  /**
   * How much the eigenvalues of the random non-symmetric inputs may move for a backward error of one
   * roundoff: their condition numbers, with room to spare (these are 3x3 and 4x4 Gaussian matrices).
   */
  private static final double EIGENVALUE_CONDITIONING = 100;

  /**
   * Checks the non-unique outputs of whichever program made them by their defining properties, on the
   * program's inputs (see tools/jax_linalg_fixtures.py for which input each output is computed from).
   */
  private static void checkNotUnique(
      List<HostTensor> inputs, Map<String, HostTensor> expected, Map<String, HostTensor> actual, LinalgInvariants check) {
    if (actual.containsKey("orthogonal")) { // orthogonal(key): unique (QR made sign-definite), and orthonormal
      for (LinalgInvariants.Matrix q : LinalgInvariants.matrices(actual.get("orthogonal"))) {
        check.assertOrthonormalColumns(q, "orthogonal");
      }
      return;
    }
    List<LinalgInvariants.Matrix> first = LinalgInvariants.matrices(inputs.get(0));
    if (actual.containsKey("eigh_v")) { // square(a, s, b, a4)
      List<LinalgInvariants.Matrix> s = LinalgInvariants.matrices(inputs.get(1));
      List<double[]> w = LinalgInvariants.vectors(actual.get("eigh_w"));
      List<LinalgInvariants.Matrix> v = LinalgInvariants.matrices(actual.get("eigh_v"));
      List<double[]> eigW = LinalgInvariants.vectors(actual.get("eig_w"));
      List<LinalgInvariants.Matrix> eigV = LinalgInvariants.matrices(actual.get("eig_v"));
      for (int b = 0; b < first.size(); b++) {
        check.assertEigenpairs(s.get(b), w.get(b), v.get(b), "eigh_v");
        check.assertOrthonormalColumns(v.get(b), "eigh_v");
        check.assertEigenpairs(first.get(b), eigW.get(b), eigV.get(b), "eig_v");
        double norm = first.get(b).frobenius();
        for (String values : List.of("eig_w", "eigvals")) {
          check.assertSameMultiset(LinalgInvariants.vectors(expected.get(values)).get(b),
              LinalgInvariants.vectors(actual.get(values)).get(b), norm, EIGENVALUE_CONDITIONING, values);
        }
      }
    }
    if (actual.containsKey("qr_q")) { // rect(m, w, y)
      checkQr(first, expected, actual, "qr_q", "qr_r", check);
      checkQr(first, expected, actual, "qr_complete_q", "qr_complete_r", check);
      checkSvd(first, actual, "svd_u", "svd_s", "svd_vh", check);
      checkSvd(first, actual, "svd_thin_u", "svd_thin_s", "svd_thin_vh", check);
    }
    if (actual.containsKey("svd_qr_u")) { // more(m, sq, h, dl, d, du, b)
      checkSvd(first, actual, "svd_qr_u", "svd_qr_s", "svd_qr_vh", check);
      checkSvd(first, actual, "svd_qr_thin_u", "svd_qr_thin_s", "svd_qr_thin_vh", check);
      List<LinalgInvariants.Matrix> q = LinalgInvariants.matrices(actual.get("qr_pivoting_q"));
      List<LinalgInvariants.Matrix> r = LinalgInvariants.matrices(actual.get("qr_pivoting_r"));
      List<long[]> p = LinalgInvariants.integerVectors(actual.get("qr_pivoting_p"));
      List<LinalgInvariants.Matrix> sq = LinalgInvariants.matrices(inputs.get(1));
      List<LinalgInvariants.Matrix> h = LinalgInvariants.matrices(actual.get("hessenberg_h"));
      List<LinalgInvariants.Matrix> hq = LinalgInvariants.matrices(actual.get("hessenberg_q"));
      for (int b = 0; b < first.size(); b++) {
        LinalgInvariants.Matrix m = first.get(b);
        check.assertPermutation(p.get(b), "qr_pivoting_p");
        check.assertOrthonormalColumns(q.get(b), "qr_pivoting_q");
        check.assertZeroBelow(r.get(b), 1, "qr_pivoting_r", m.frobenius());
        check.assertNonIncreasingDiagonal(r.get(b), "qr_pivoting_r");
        check.assertReconstructs(m.permuteColumns(p.get(b)), q.get(b).times(r.get(b)), m.rows(), "A[:, P] = Q R");
        check.assertOrthonormalColumns(hq.get(b), "hessenberg_q");
        check.assertZeroBelow(h.get(b), 2, "hessenberg_h", sq.get(b).frobenius());
        check.assertReconstructs(sq.get(b), hq.get(b).times(h.get(b)).times(hq.get(b).adjoint()), sq.get(b).rows(),
            "Q H Q^H");
      }
    }
    if (actual.containsKey("schur_t")) { // schur_ormqr(sq, reflectors, taus, c_left, c_right)
      boolean real = !inputs.get(0).dtype().isComplex();
      List<LinalgInvariants.Matrix> t = LinalgInvariants.matrices(actual.get("schur_t"));
      List<LinalgInvariants.Matrix> z = LinalgInvariants.matrices(actual.get("schur_z"));
      List<LinalgInvariants.Matrix> jaxT = LinalgInvariants.matrices(expected.get("schur_t"));
      for (int b = 0; b < first.size(); b++) {
        LinalgInvariants.Matrix a = first.get(b);
        check.assertOrthonormalColumns(z.get(b), "Z");
        if (real) {
          check.assertQuasiUpperTriangular(t.get(b), a.frobenius());
        } else {
          check.assertZeroBelow(t.get(b), 1, "T", a.frobenius());
        }
        check.assertReconstructs(a, z.get(b).times(t.get(b)).times(z.get(b).adjoint()), a.rows(), "Z T Z^H");
        check.assertSameMultiset(LinalgInvariants.schurEigenvalues(jaxT.get(b), real),
            LinalgInvariants.schurEigenvalues(t.get(b), real), a.frobenius(), EIGENVALUE_CONDITIONING,
            "eigenvalues of T");
      }
    }
  }

  /** Q has orthonormal columns, R is upper triangular, Q R = A, and |diag R| is JAX's. */
  private static void checkQr(List<LinalgInvariants.Matrix> a, Map<String, HostTensor> expected,
      Map<String, HostTensor> actual, String qName, String rName, LinalgInvariants check) {
    List<LinalgInvariants.Matrix> q = LinalgInvariants.matrices(actual.get(qName));
    List<LinalgInvariants.Matrix> r = LinalgInvariants.matrices(actual.get(rName));
    List<LinalgInvariants.Matrix> jaxR = LinalgInvariants.matrices(expected.get(rName));
    for (int b = 0; b < a.size(); b++) {
      check.assertOrthonormalColumns(q.get(b), qName);
      check.assertZeroBelow(r.get(b), 1, rName, a.get(b).frobenius());
      check.assertReconstructs(a.get(b), q.get(b).times(r.get(b)), a.get(b).cols(), qName + " " + rName);
      check.assertSameDiagonalMagnitudes(jaxR.get(b), r.get(b), rName);
    }
  }

  /**
   * U has orthonormal columns, Vh orthonormal rows, and U[:, :k] diag(s) Vh = A (s itself is unique and
   * compared with JAX's elsewhere).
   */
  private static void checkSvd(List<LinalgInvariants.Matrix> a, Map<String, HostTensor> actual,
      String uName, String sName, String vhName, LinalgInvariants check) {
    List<LinalgInvariants.Matrix> u = LinalgInvariants.matrices(actual.get(uName));
    List<double[]> s = LinalgInvariants.vectors(actual.get(sName));
    List<LinalgInvariants.Matrix> vh = LinalgInvariants.matrices(actual.get(vhName));
    for (int b = 0; b < a.size(); b++) {
      int k = s.get(b).length / 2;
      check.assertOrthonormalColumns(u.get(b), uName);
      check.assertOrthonormalRows(vh.get(b), vhName);
      LinalgInvariants.Matrix product = u.get(b).leftColumns(k).scaleColumns(s.get(b)).times(vh.get(b).topRows(k));
      check.assertReconstructs(a.get(b), product, k, uName + " diag(" + sName + ") " + vhName);
    }
  }

  /** XLA may call the handlers from several threads at once; each call has its own workspaces. */
  @Test
  void concurrentRunsGiveJaxsResults() throws Exception {
    String name = "square_f64";
    ImportedProgram imported = ImportedProgram.fromText(name + ".mlir", JaxFixture.resource("linalg/" + name + ".mlir.gz"));
    JaxFixture fixture = JaxFixture.load("linalg/" + name);
    List<String> names = outputNames(name);
    java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(4);
    try (Executable exe = imported.compile(client)) {
      List<java.util.concurrent.Future<List<HostTensor>>> runs = new java.util.ArrayList<>();
      for (int i = 0; i < 16; i++) {
        runs.add(pool.submit(() -> exe.run(fixture.inputs().toArray(HostTensor[]::new))));
      }
      for (java.util.concurrent.Future<List<HostTensor>> run : runs) {
        assertLikeJax(name + " (concurrent)", fixture, names, run.get(60, java.util.concurrent.TimeUnit.SECONDS), 1e-9, 1e-11);
      }
    } finally {
      pool.shutdownNow();
    }
  }

  private static void assertMatches(HostTensor expected, HostTensor actual, double rtol, double atol, String what) {
    assertEquals(expected.type(), actual.type(), what);
    DType dtype = expected.dtype();
    if (dtype == DType.F32) {
      Reference.assertClose(expected.toFloatArray(), actual.toFloatArray(), rtol, atol, what);
    } else if (dtype == DType.C64) {
      Reference.assertClose(expected.toComplex64Array(), actual.toComplex64Array(), rtol, atol, what);
    } else if (dtype == DType.F64) {
      Reference.assertClose(expected.toDoubleArray(), actual.toDoubleArray(), rtol, atol, what);
    } else if (dtype == DType.C128) {
      Reference.assertClose(expected.toComplex128Array(), actual.toComplex128Array(), rtol, atol, what);
    } else {
      assertArrayEquals(expected.toLongArray(), actual.toLongArray(), what);
    }
  }

  /** The names the fixture's {@code # names:} line gives the outputs, in order. */
  private static List<String> outputNames(String name) {
    return JaxFixture.resource("linalg/" + name + ".txt").lines()
        .filter(l -> l.startsWith("# names:"))
        .findFirst()
        .map(l -> Arrays.asList(l.substring("# names:".length()).trim().split(" ")))
        .orElseThrow(() -> new AssertionError(name + ".txt has no '# names:' line"));
  }
}
