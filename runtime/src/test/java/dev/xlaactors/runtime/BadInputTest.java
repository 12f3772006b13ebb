package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.CompileException;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import java.nio.ByteBuffer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Every bad input is a clear Java exception, raised before the plugin could abort the process. */
class BadInputTest {
  private static XlaClient client;
  private static Executable add;

  @BeforeAll
  static void start() {
    client = XlaClient.create();
    add = client.compile(TestPrograms.ADD_F32_4);
  }

  @AfterAll
  static void stop() {
    add.close();
    client.close();
  }

  @Test
  void malformedProgramCarriesXlasDiagnostic() {
    String program =
        """
        func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
          %0 = stablehlo.frobnicate %a : tensor<4xf32>
          return %0 : tensor<4xf32>
        }
        """;
    CompileException e = assertThrows(CompileException.class, () -> client.compile(program));
    assertTrue(e.getMessage().contains("frobnicate"), e.getMessage());
    assertEquals(dev.xlaactors.error.ErrorCode.INVALID_ARGUMENT, e.code(), "text that does not parse is a bad argument: " + e.getMessage());
  }

  @Test
  void mainIsFoundByItsDefinitionNotInsideAComment() {
    String program =
        """
        // func.func @main(%unused: tensor<2xf32>) -> tensor<2xf32>, the old signature
        func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> { // "quoted // text" stays
          %0 = stablehlo.add %a, %a : tensor<4xf32>
          return %0 : tensor<4xf32>
        }
        """;
    try (Executable twice = client.compile(program)) {
      assertArrayEquals(new float[] {2, 4, 6, 8}, twice.run(HostTensor.ofFloats(new float[] {1, 2, 3, 4})).get(0).toFloatArray(), 0f);
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> twice.run(HostTensor.ofFloats(new float[] {1, 2})));
      assertTrue(e.getMessage().contains("expected f32[4], got f32[2]"), e.getMessage());
    }
  }

  @Test
  void typeErrorInsideProgramCarriesXlasDiagnostic() {
    String program =
        """
        func.func @main(%a: tensor<4xf32>, %b: tensor<3xf32>) -> tensor<4xf32> {
          %0 = stablehlo.add %a, %b : (tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32>
          return %0 : tensor<4xf32>
        }
        """;
    CompileException e = assertThrows(CompileException.class, () -> client.compile(program));
    assertTrue(e.getMessage().contains("XLA compilation failed"), e.getMessage());
  }

  @Test
  void programWithoutMainIsRefused() {
    CompileException e = assertThrows(CompileException.class, () -> client.compile("module {}"));
    assertTrue(e.getMessage().contains("@main"), e.getMessage());
  }

  @Test
  void garbageIsRefused() {
    assertThrows(CompileException.class, () -> client.compile("func.func @main( this is not MLIR"));
  }

  @Test
  void wrongArgumentCount() {
    InvalidArgumentException e =
        assertThrows(InvalidArgumentException.class, () -> add.run(HostTensor.ofFloats(new float[4])));
    assertTrue(e.getMessage().contains("takes 2 argument(s)"), e.getMessage());
    assertTrue(e.getMessage().contains("got 1"), e.getMessage());
  }

  @Test
  void wrongShapeSaysExpectedAndGot() {
    InvalidArgumentException e =
        assertThrows(
            InvalidArgumentException.class,
            () -> add.run(HostTensor.ofFloats(new float[4]), HostTensor.ofFloats(new float[6], 2, 3)));
    assertTrue(e.getMessage().contains("argument 1 of @main: expected f32[4], got f32[2,3]"), e.getMessage());
  }

  @Test
  void wrongDtypeSaysExpectedAndGot() {
    try (DeviceBuffer ints = client.upload(HostTensor.ofInts(new int[4]));
        DeviceBuffer floats = client.upload(HostTensor.ofFloats(new float[4]))) {
      InvalidArgumentException e =
          assertThrows(InvalidArgumentException.class, () -> add.execute(ints, floats));
      assertTrue(e.getMessage().contains("expected f32[4], got s32[4]"), e.getMessage());
    }
  }

  @Test
  void unsupportedDtypeInProgramIsRefusedBeforeCompiling() {
    String program =
        """
        func.func @main(%a: tensor<2xf8E4M3B11FNUZ>) -> tensor<2xf8E4M3B11FNUZ> {
          return %a : tensor<2xf8E4M3B11FNUZ>
        }
        """;
    CompileException e = assertThrows(CompileException.class, () -> client.compile(program));
    assertTrue(e.getMessage().contains("not supported"), e.getMessage());
  }

  @Test
  void unsupportedOutputDtypeIsRefused() {
    String program =
        """
        func.func @main(%a: tensor<2xf32>) -> tensor<2xf8E4M3B11FNUZ> {
          %0 = stablehlo.convert %a : (tensor<2xf32>) -> tensor<2xf8E4M3B11FNUZ>
          return %0 : tensor<2xf8E4M3B11FNUZ>
        }
        """;
    XlaException e = assertThrows(XlaException.class, () -> client.compile(program));
    assertTrue(e.getMessage().contains("not supported"), e.getMessage());
  }

  @Test
  void tensorDataOfTheWrongSizeIsRefused() {
    InvalidArgumentException e =
        assertThrows(
            InvalidArgumentException.class,
            () -> HostTensor.of(TensorType.of(DType.F32, 2, 2), ByteBuffer.allocateDirect(12)));
    assertTrue(e.getMessage().contains("needs 16 bytes"), e.getMessage());
    assertThrows(InvalidArgumentException.class, () -> HostTensor.ofFloats(new float[5], 2, 3));
    assertThrows(InvalidArgumentException.class, () -> Shape.of(2, -1));
    assertThrows(InvalidArgumentException.class, () -> HostTensor.ofLongs(DType.U8, new long[] {256}));
    assertThrows(InvalidArgumentException.class, () -> HostTensor.ofLongs(DType.S8, new long[] {-129}));
  }

  @Test
  void bufferFromAnotherClientIsRefused() {
    try (XlaClient other = XlaClient.create();
        DeviceBuffer foreign = other.upload(HostTensor.ofFloats(new float[4]));
        DeviceBuffer local = client.upload(HostTensor.ofFloats(new float[4]))) {
      InvalidArgumentException e =
          assertThrows(InvalidArgumentException.class, () -> add.execute(local, foreign));
      assertTrue(e.getMessage().contains("another client"), e.getMessage());
    }
  }
}
