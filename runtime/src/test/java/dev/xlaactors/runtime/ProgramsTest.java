package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Real programs on the real plugin, checked against Java references on fresh random inputs. */
class ProgramsTest {
  private static XlaClient client;
  private final Random random = new Random();

  @BeforeAll
  static void start() {
    client = XlaClient.create();
  }

  @AfterAll
  static void stop() {
    client.close();
  }

  @Test
  void elementwiseProgram() {
    String program =
        """
        func.func @main(%a: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
          %0 = stablehlo.multiply %a, %b : tensor<64xf32>
          %1 = stablehlo.exponential %a : tensor<64xf32>
          %2 = stablehlo.subtract %0, %1 : tensor<64xf32>
          return %2 : tensor<64xf32>
        }
        """;
    float[] a = FfiHandlerTest.randomFloats(64, random);
    float[] b = FfiHandlerTest.randomFloats(64, random);
    try (Executable exe = client.compile(program)) {
      float[] out = exe.run(HostTensor.ofFloats(a), HostTensor.ofFloats(b)).get(0).toFloatArray();
      for (int i = 0; i < 64; i++) {
        float expected = a[i] * b[i] - (float) Math.exp(a[i]);
        assertEquals(expected, out[i], 1e-5f * Math.max(1f, Math.abs(expected)), "element " + i);
      }
    }
  }

  @Test
  void matmulMatchesJavaReference() {
    int m = 17;
    int k = 33;
    int n = 9;
    String program =
        """
        func.func @main(%x: tensor<17x33xf32>, %w: tensor<33x9xf32>) -> tensor<17x9xf32> {
          %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<17x33xf32>, tensor<33x9xf32>) -> tensor<17x9xf32>
          return %0 : tensor<17x9xf32>
        }
        """;
    float[] x = FfiHandlerTest.randomFloats(m * k, random);
    float[] w = FfiHandlerTest.randomFloats(k * n, random);
    try (Executable exe = client.compile(program)) {
      HostTensor out = exe.run(HostTensor.ofFloats(x, m, k), HostTensor.ofFloats(w, k, n)).get(0);
      assertEquals(TensorType.of(DType.F32, m, n), out.type());
      float[] got = out.toFloatArray();
      for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
          double sum = 0;
          for (int p = 0; p < k; p++) {
            sum += (double) x[i * k + p] * w[p * n + j];
          }
          assertEquals(sum, got[i * n + j], 1e-3 * Math.max(1, Math.abs(sum)), "[" + i + "," + j + "]");
        }
      }
    }
  }

  @Test
  void reductionSumsRows() {
    String program =
        """
        func.func @main(%x: tensor<5x7xf64>) -> tensor<5xf64> {
          %zero = stablehlo.constant dense<0.0> : tensor<f64>
          %0 = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<5x7xf64>, tensor<f64>) -> tensor<5xf64>
          return %0 : tensor<5xf64>
        }
        """;
    double[] x = random.doubles(35).toArray();
    try (Executable exe = client.compile(program)) {
      double[] got = exe.run(HostTensor.ofDoubles(x, 5, 7)).get(0).toDoubleArray();
      for (int r = 0; r < 5; r++) {
        double sum = 0;
        for (int c = 0; c < 7; c++) {
          sum += x[r * 7 + c];
        }
        assertEquals(sum, got[r], 1e-12, "row " + r);
      }
    }
  }

  @Test
  void twoOutputProgramWithDifferentDtypes() {
    String program =
        """
        func.func @main(%x: tensor<6xi32>) -> (tensor<6xi32>, tensor<6xi1>) {
          %two = stablehlo.constant dense<2> : tensor<6xi32>
          %0 = stablehlo.multiply %x, %two : tensor<6xi32>
          %zero = stablehlo.constant dense<0> : tensor<6xi32>
          %1 = stablehlo.compare GT, %x, %zero : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
          return %0, %1 : tensor<6xi32>, tensor<6xi1>
        }
        """;
    try (Executable exe = client.compile(program)) {
      assertEquals(List.of(TensorType.of(DType.S32, 6), TensorType.of(DType.PRED, 6)), exe.outputTypes());
      List<HostTensor> out = exe.run(HostTensor.ofInts(new int[] {-3, -1, 0, 1, 5, 100}));
      assertArrayEquals(new int[] {-6, -2, 0, 2, 10, 200}, out.get(0).toIntArray());
      assertArrayEquals(
          new boolean[] {false, false, false, true, true, true}, out.get(1).toBooleanArray());
    }
  }

  @Test
  void outputsOfLayoutChangingOpsDownloadInRowMajorOrder() {
    String program =
        """
        func.func @main(%x: tensor<2x3xf32>) -> (tensor<3x2xf32>, tensor<2x2xf32>, tensor<3x2xf32>) {
          %t = stablehlo.transpose %x, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
          %s = stablehlo.slice %x [0:2, 1:3] : (tensor<2x3xf32>) -> tensor<2x2xf32>
          %r = stablehlo.reshape %x : (tensor<2x3xf32>) -> tensor<3x2xf32>
          return %t, %s, %r : tensor<3x2xf32>, tensor<2x2xf32>, tensor<3x2xf32>
        }
        """;
    try (Executable exe = client.compile(program)) {
      List<HostTensor> out = exe.run(HostTensor.ofFloats(new float[] {1, 2, 3, 4, 5, 6}, 2, 3));
      assertArrayEquals(new float[] {1, 4, 2, 5, 3, 6}, out.get(0).toFloatArray(), 0f);
      assertArrayEquals(new float[] {2, 3, 5, 6}, out.get(1).toFloatArray(), 0f);
      assertArrayEquals(new float[] {1, 2, 3, 4, 5, 6}, out.get(2).toFloatArray(), 0f);
    }
  }

  @Test
  void compileOnceRunMany() {
    try (Executable exe = client.compile(TestPrograms.ADD_F32_4)) {
      for (int i = 0; i < 200; i++) {
        float[] a = FfiHandlerTest.randomFloats(4, random);
        float[] b = FfiHandlerTest.randomFloats(4, random);
        float[] got = exe.run(HostTensor.ofFloats(a), HostTensor.ofFloats(b)).get(0).toFloatArray();
        for (int j = 0; j < 4; j++) {
          assertEquals(a[j] + b[j], got[j], 0f);
        }
      }
    }
  }

  @Test
  void executeOnDeviceBuffersChainsWithoutHostCopies() {
    try (Executable exe = client.compile(TestPrograms.ADD_F32_4);
        DeviceBuffer a = client.upload(HostTensor.ofFloats(new float[] {1, 2, 3, 4}))) {
      List<DeviceBuffer> once = exe.execute(a, a);
      List<DeviceBuffer> twice = exe.execute(once.get(0), once.get(0));
      assertArrayEquals(new float[] {4, 8, 12, 16}, twice.get(0).toHost().toFloatArray(), 0f);
      once.forEach(DeviceBuffer::close);
      twice.forEach(DeviceBuffer::close);
    }
  }

  @Test
  void compileCacheReusesTheExecutable() {
    String program = TestPrograms.identity(TensorType.of(DType.S16, 3, 3));
    long missesBefore = client.compileCacheStats().misses();
    long hitsBefore = client.compileCacheStats().hits();
    try (Executable first = client.compile(program);
        Executable second = client.compile(program)) {
      assertEquals(missesBefore + 1, client.compileCacheStats().misses());
      assertEquals(hitsBefore + 1, client.compileCacheStats().hits());
      first.close();
      HostTensor x = DTypeRoundTripTest.randomTensor(DType.S16, random, 3, 3);
      assertArrayEquals(x.toByteArray(), second.run(x).get(0).toByteArray(), "closing one view leaves the other usable");
    }
  }
}
