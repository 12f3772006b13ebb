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
import java.util.List;
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
 * <p>Decompositions that are unique only up to sign or phase (QR, SVD and eigenvectors) are compared
 * element by element: the same LAPACK routines make the same choices as the LAPACK JAX calls.
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
      assertEquals(fixture.outputs().size(), actual.size(), name + " outputs");
      for (int i = 0; i < actual.size(); i++) {
        assertMatches(fixture.outputs().get(i), actual.get(i), rtol, atol, name + " " + names.get(i));
      }
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
        List<HostTensor> actual = run.get(60, java.util.concurrent.TimeUnit.SECONDS);
        for (int i = 0; i < actual.size(); i++) {
          assertMatches(fixture.outputs().get(i), actual.get(i), 1e-9, 1e-11, name + " (concurrent) " + names.get(i));
        }
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
