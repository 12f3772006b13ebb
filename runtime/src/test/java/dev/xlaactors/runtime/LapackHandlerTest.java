package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.ExecutionFailedException;
import java.io.File;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The bridge's {@code lapack_*_ffi} handlers called directly by hand-written custom calls: calls that do
 * not fit jaxlib's conventions fail with an error naming the target and the problem (never reaching LAPACK,
 * whose argument checks would print and misbehave), edge cases (empty matrices, non-finite input to geev),
 * matrices large enough for OpenBLAS's blocked code paths, and a JVM without OpenBLAS. The JAX exports
 * themselves are checked in {@code dev.xlaactors.graph.LapackExportTest}.
 */
class LapackHandlerTest {
  private static final String CHILD_DONE = "CHILD DONE";
  private static XlaClient client;

  @BeforeAll
  static void start() {
    client = XlaClient.create();
  }

  @AfterAll
  static void stop() {
    client.close();
  }

  /** A potrf call on {@code type} with the given attribute dictionary and result types. */
  private static String potrf(String type, String attributes, String factorType, String infoType) {
    return """
        func.func @main(%a: TYPE) -> (FACTOR, INFO) {
          %0:2 = stablehlo.custom_call @lapack_spotrf_ffi(%a) {api_version = 4 : i32, \
        backend_config = {ATTRS}} : (TYPE) -> (FACTOR, INFO)
          return %0#0, %0#1 : FACTOR, INFO
        }
        """
        .replace("TYPE", type).replace("ATTRS", attributes).replace("FACTOR", factorType).replace("INFO", infoType);
  }

  private static ExecutionFailedException failure(String program, HostTensor... inputs) {
    try (Executable exe = client.compile(program)) {
      return assertThrows(ExecutionFailedException.class, () -> exe.run(inputs));
    }
  }

  @Test
  void callsThatDoNotFitJaxlibsConventionsFailWithTheReason() {
    HostTensor square = HostTensor.ofFloats(new float[] {4, 1, 1, 3}, 2, 2);
    String message = failure(potrf("tensor<3x2xf32>", "uplo = 76 : ui8", "tensor<3x2xf32>", "tensor<i32>"),
        HostTensor.ofFloats(new float[6], 3, 2)).getMessage();
    assertTrue(message.contains("lapack_spotrf_ffi: the matrix must be square, got [3,2]"), message);

    message = failure(potrf("tensor<2x2xf32>", "", "tensor<2x2xf32>", "tensor<i32>"), square).getMessage();
    assertTrue(message.contains("lapack_spotrf_ffi: missing attribute 'uplo'"), message);

    message = failure(potrf("tensor<2x2xf32>", "uplo = 88 : ui8", "tensor<2x2xf32>", "tensor<i32>"), square).getMessage();
    assertTrue(message.contains("attribute 'uplo' is 88, expected one of 'LU'"), message);

    message = failure(potrf("tensor<2x2xf32>", "uplo = 76 : ui8", "tensor<2x2xf32>", "tensor<3xi32>"), square).getMessage();
    assertTrue(message.contains("info has 3 elements [3], expected 1"), message);

    message = failure(potrf("tensor<2x2xf32>", "uplo = 76 : ui8", "tensor<2x2xf32>", "tensor<f32>"), square).getMessage();
    assertTrue(message.contains("info must be s32, got f32"), message);

    // orgqr needs rows >= columns >= reflectors; LAPACK would reject it in xerbla.
    String orgqr = """
        func.func @main(%a: tensor<3x2xf32>, %tau: tensor<3xf32>) -> tensor<3x2xf32> {
          %0 = stablehlo.custom_call @lapack_sorgqr_ffi(%a, %tau) {api_version = 4 : i32} \
        : (tensor<3x2xf32>, tensor<3xf32>) -> tensor<3x2xf32>
          return %0 : tensor<3x2xf32>
        }
        """;
    message = failure(orgqr, HostTensor.ofFloats(new float[6], 3, 2), HostTensor.ofFloats(new float[3], 3)).getMessage();
    assertTrue(message.contains("lapack_sorgqr_ffi: needs rows >= columns >= reflectors"), message);

    // The client is unharmed: a well-formed call still runs.
    try (Executable exe = client.compile(potrf("tensor<2x2xf32>", "uplo = 76 : ui8", "tensor<2x2xf32>", "tensor<i32>"))) {
      List<HostTensor> out = exe.run(square);
      assertEquals(0, out.get(1).toIntArray()[0]);
      assertEquals(2f, out.get(0).toFloatArray()[0], 1e-6f);
    }
  }

  @Test
  void infoReportsAMatrixThatIsNotPositiveDefinite() {
    try (Executable exe = client.compile(potrf("tensor<3x3xf32>", "uplo = 76 : ui8", "tensor<3x3xf32>", "tensor<i32>"))) {
      // The leading 2x2 minor is indefinite: potrf stops at column 2.
      List<HostTensor> out = exe.run(HostTensor.ofFloats(new float[] {1, 2, 0, 2, 1, 0, 0, 0, 3}, 3, 3));
      assertEquals(2, out.get(1).toIntArray()[0]);
    }
  }

  @Test
  void geevOfANonFiniteMatrixReportsInfoMinusFourAsJaxlibDoes() {
    String geev = """
        func.func @main(%a: tensor<2x2x2xf64>) -> (tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x2x2xcomplex<f64>>, \
        tensor<2x2x2xcomplex<f64>>, tensor<2xi32>) {
          %0:5 = stablehlo.custom_call @lapack_dgeev_ffi(%a) {api_version = 4 : i32, \
        backend_config = {compute_left = 78 : ui8, compute_right = 86 : ui8}} : (tensor<2x2x2xf64>) -> \
        (tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x2x2xcomplex<f64>>, tensor<2x2x2xcomplex<f64>>, tensor<2xi32>)
          return %0#0, %0#1, %0#2, %0#3, %0#4 : tensor<2x2xf64>, tensor<2x2xf64>, tensor<2x2x2xcomplex<f64>>, \
        tensor<2x2x2xcomplex<f64>>, tensor<2xi32>
        }
        """;
    try (Executable exe = client.compile(geev)) {
      // First matrix: a rotation (eigenvalues +-i); second: a NaN entry.
      List<HostTensor> out = exe.run(HostTensor.ofDoubles(new double[] {0, -1, 1, 0, 1, Double.NaN, 0, 1}, 2, 2, 2));
      assertArrayEquals(new int[] {0, -4}, out.get(4).toIntArray());
      double[] re = out.get(0).toDoubleArray();
      double[] im = out.get(1).toDoubleArray();
      assertEquals(0, re[0], 1e-12);
      assertEquals(1, Math.abs(im[0]), 1e-12);
      assertEquals(-im[0], im[1], 1e-12);
    }
  }

  @Test
  void emptyMatricesAreNoWork() {
    String program = """
        func.func @main(%a: tensor<2x0x0xf64>, %b: tensor<0x3xc64>) -> (tensor<2x0x0xf64>, tensor<2xi32>, \
        tensor<0x3xc64>, tensor<0xcomplex<f32>>) {
          %0:2 = stablehlo.custom_call @lapack_dpotrf_ffi(%a) {api_version = 4 : i32, \
        backend_config = {uplo = 76 : ui8}} : (tensor<2x0x0xf64>) -> (tensor<2x0x0xf64>, tensor<2xi32>)
          %1:2 = stablehlo.custom_call @lapack_cgeqrf_ffi(%b) {api_version = 4 : i32} \
        : (tensor<0x3xc64>) -> (tensor<0x3xc64>, tensor<0xcomplex<f32>>)
          return %0#0, %0#1, %1#0, %1#1 : tensor<2x0x0xf64>, tensor<2xi32>, tensor<0x3xc64>, tensor<0xcomplex<f32>>
        }
        """.replace("c64>", "complex<f32>>");
    try (Executable exe = client.compile(program)) {
      List<HostTensor> out = exe.run(HostTensor.zeros(TensorType.of(DType.F64, 2, 0, 0)),
          HostTensor.zeros(TensorType.of(DType.C64, 0, 3)));
      assertArrayEquals(new int[] {0, 0}, out.get(1).toIntArray());
      assertEquals(0, out.get(2).toComplex64Array().length);
    }
  }

  /** 96x96 Cholesky and a 96x64 QR go through OpenBLAS's blocked paths; checked by reconstruction. */
  @Test
  void largerMatricesReconstruct() {
    int n = 96;
    int cols = 64;
    Random random = new Random(13);
    double[] b = new double[n * n];
    for (int i = 0; i < b.length; i++) {
      b[i] = random.nextGaussian();
    }
    double[] spd = new double[n * n];  // b b^T + n I, row-major
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < n; j++) {
        double sum = i == j ? n : 0;
        for (int k = 0; k < n; k++) {
          sum += b[i * n + k] * b[j * n + k];
        }
        spd[i * n + j] = sum;
      }
    }
    // Column-major operand and result layouts, as JAX writes them; XLA transposes from row-major.
    String program = """
        func.func @main(%a: tensor<NxNxf64>, %m: tensor<NxCxf64>) -> (tensor<NxNxf64>, tensor<i32>, tensor<NxCxf64>) {
          %0:2 = stablehlo.custom_call @lapack_dpotrf_ffi(%a) {api_version = 4 : i32, \
        backend_config = {uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], \
        result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]} \
        : (tensor<NxNxf64>) -> (tensor<NxNxf64>, tensor<i32>)
          %1:2 = stablehlo.custom_call @lapack_dgeqrf_ffi(%m) {api_version = 4 : i32, \
        operand_layouts = [dense<[0, 1]> : tensor<2xindex>], \
        result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>]} \
        : (tensor<NxCxf64>) -> (tensor<NxCxf64>, tensor<Cxf64>)
          %2 = stablehlo.custom_call @lapack_dorgqr_ffi(%1#0, %1#1) {api_version = 4 : i32, \
        operand_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>], \
        result_layouts = [dense<[0, 1]> : tensor<2xindex>]} : (tensor<NxCxf64>, tensor<Cxf64>) -> tensor<NxCxf64>
          return %0#0, %0#1, %2 : tensor<NxNxf64>, tensor<i32>, tensor<NxCxf64>
        }
        """.replace("N", Integer.toString(n)).replace("C", Integer.toString(cols));
    double[] m = Arrays.copyOf(b, n * cols);
    try (Executable exe = client.compile(program)) {
      List<HostTensor> out = exe.run(HostTensor.ofDoubles(spd, n, n), HostTensor.ofDoubles(m, n, cols));
      assertEquals(0, out.get(1).toIntArray()[0]);
      double[] l = out.get(0).toDoubleArray();
      double worst = 0;
      for (int i = 0; i < n; i++) {
        for (int j = 0; j <= i; j++) {  // potrf leaves the strict upper triangle as it was
          double sum = 0;
          for (int k = 0; k <= j; k++) {
            sum += l[i * n + k] * l[j * n + k];
          }
          worst = Math.max(worst, Math.abs(sum - spd[i * n + j]) / n);
        }
      }
      assertTrue(worst < 1e-12, "L L^T differs from A by up to " + worst);
      double[] q = out.get(2).toDoubleArray();
      worst = 0;
      for (int i = 0; i < cols; i++) {
        for (int j = 0; j < cols; j++) {
          double dot = 0;
          for (int k = 0; k < n; k++) {
            dot += q[k * cols + i] * q[k * cols + j];
          }
          worst = Math.max(worst, Math.abs(dot - (i == j ? 1 : 0)));
        }
      }
      assertTrue(worst < 1e-12, "Q^T Q differs from I by up to " + worst);
    }
  }

  @Test
  void withoutOpenBlasTheHandlersFailNamingTheRoutineAndTheReason() throws Exception {
    String classPath = Arrays.stream(System.getProperty("java.class.path").split(File.pathSeparator))
        .filter(entry -> !entry.contains("openblas"))
        .collect(Collectors.joining(File.pathSeparator));
    ChildJvm.Result result = ChildJvm.runWithClassPath(LapackHandlerTest.class, classPath);
    assertEquals(0, result.exitCode(), result.output());
    assertTrue(result.output().contains(CHILD_DONE), result.output());
    assertTrue(result.output().contains("loaded=false"), result.output());
    assertTrue(result.output().contains("lapack_spotrf_ffi: LAPACK is not available: OpenBLAS "
        + "(org.bytedeco:openblas with the linux-x86_64 classifier) could not be loaded"), result.output());
  }

  /** Entry point of the child JVM that has no OpenBLAS on its class path. */
  public static void main(String[] args) {
    try (XlaClient child = XlaClient.create();
        Executable exe = child.compile(potrf("tensor<2x2xf32>", "uplo = 76 : ui8", "tensor<2x2xf32>", "tensor<i32>"))) {
      System.out.println("loaded=" + LapackLibrary.isLoaded());
      try {
        exe.run(HostTensor.ofFloats(new float[] {4, 1, 1, 3}, 2, 2));
        System.out.println("UNEXPECTED: the call ran");
      } catch (ExecutionFailedException e) {
        System.out.println("failure: " + e.getMessage());
      }
      assertFalse(LapackLibrary.isLoaded());
    }
    System.out.println(CHILD_DONE);
  }
}
