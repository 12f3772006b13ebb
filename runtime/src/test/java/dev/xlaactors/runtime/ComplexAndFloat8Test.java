package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Complex (c64, c128) and float8 values cross the program boundary: parameters, outputs, real programs. */
class ComplexAndFloat8Test {
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
  void aComplexOutputComesBackInterleaved() {
    String program =
        """
        func.func @main(%re: tensor<3xf32>, %im: tensor<3xf32>) -> tensor<3xcomplex<f32>> {
          %0 = stablehlo.complex %re, %im : tensor<3xcomplex<f32>>
          return %0 : tensor<3xcomplex<f32>>
        }
        """;
    try (Executable exe = client.compile(program)) {
      assertEquals(List.of(TensorType.of(DType.C64, 3)), exe.outputTypes());
      HostTensor z = exe.run(HostTensor.ofFloats(new float[] {1, 2, 3}), HostTensor.ofFloats(new float[] {-1, 0, 5})).get(0);
      assertArrayEquals(new float[] {1, -1, 2, 0, 3, 5}, z.toComplex64Array(), 0f);
    }
  }

  @Test
  void aComplexParameterRunsThroughAnFft() {
    // FFT of (1, 0, 0, 0) is (1, 1, 1, 1); of (0, 1, 0, 0) it is (1, -i, -1, i).
    String program =
        """
        func.func @main(%z: tensor<2x4xcomplex<f64>>) -> tensor<2x4xcomplex<f64>> {
          %0 = stablehlo.fft %z, type = FFT, length = [4] : (tensor<2x4xcomplex<f64>>) -> tensor<2x4xcomplex<f64>>
          return %0 : tensor<2x4xcomplex<f64>>
        }
        """;
    HostTensor impulses = HostTensor.ofComplex128(new double[] {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0}, 2, 4);
    try (Executable exe = client.compile(program)) {
      double[] out = exe.run(impulses).get(0).toComplex128Array();
      assertArrayEquals(new double[] {1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 0, -1, -1, 0, 0, 1}, out, 1e-12);
    }
  }

  @Test
  void float8ValuesConvertAsXlaDoes() {
    // 1.5 and -2 are exact in both formats; f8E4M3FN 0x3c = 1.5, 0xc0 = -2; f8E5M2 0x3e = 1.5, 0xc0 = -2.
    for (DType dtype : List.of(DType.F8E4M3FN, DType.F8E5M2)) {
      String program =
          """
          func.func @main(%x: tensor<2xf32>) -> tensor<2xT> {
            %0 = stablehlo.convert %x : (tensor<2xf32>) -> tensor<2xT>
            return %0 : tensor<2xT>
          }
          """
              .replace("T", dtype.mlirName());
      try (Executable exe = client.compile(program)) {
        byte[] bytes = exe.run(HostTensor.ofFloats(new float[] {1.5f, -2f})).get(0).toByteArray();
        byte[] expected = dtype == DType.F8E4M3FN ? new byte[] {0x3c, (byte) 0xc0} : new byte[] {0x3e, (byte) 0xc0};
        assertArrayEquals(expected, bytes, dtype.toString());
      }
    }
  }

  @Test
  void complexValuesComeInPairs() {
    InvalidArgumentException e =
        assertThrows(InvalidArgumentException.class, () -> HostTensor.ofComplex64(new float[] {1, 2, 3}));
    assertTrue(e.getMessage().contains("(real, imaginary) pairs"), e.getMessage());
    assertThrows(InvalidArgumentException.class, () -> HostTensor.ofFloats(new float[] {1}).toComplex64Array());
  }
}
