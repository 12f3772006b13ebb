package dev.xlaactors.graph;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.CompileException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * JAX exports that cannot run from Java are refused at load, before XLA sees them, with a message that
 * says why and what to export instead. The fixtures are jax 0.10.2's own output
 * (tools/jax_unrunnable_fixtures.py).
 */
class UnrunnableExportsTest {
  private static CompileException refused(String fixture) {
    String text = JaxFixture.resource("unrunnable/" + fixture);
    return assertThrows(CompileException.class, () -> ImportedProgram.fromText(fixture, text));
  }

  @Test
  void aPythonCallbackIsRefusedNamingTheWayToAJavaCallback() {
    CompileException e = refused("python_callback.mlir");
    assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    assertTrue(e.getMessage().contains("@xla_ffi_python_cpu_callback"), e.getMessage());
    assertTrue(e.getMessage().contains("cannot cross to the JVM"), e.getMessage());
    assertTrue(e.getMessage().contains("jax.ffi.ffi_call(\"xla_actors.host_callback\""), e.getMessage());
  }

  @Test
  void jaxDebugPrintIsAPythonCallbackToo() {
    CompileException e = refused("ordered_effect.mlir");
    assertTrue(e.getMessage().contains("Python callback"), e.getMessage());
  }

  @Test
  void aSymbolicDimensionIsNamedWithHowToExportConcreteShapes() {
    CompileException e = refused("symbolic_batch.mlir");
    assertEquals(ErrorCode.UNIMPLEMENTED, e.code());
    assertTrue(e.getMessage().contains("parameter 0 of @main has a symbolic dimension (tensor<?x8xf32>)"), e.getMessage());
    assertTrue(e.getMessage().contains("export with concrete shapes"), e.getMessage());
  }

  @Test
  void tokenParametersAndResultsPassThroughAProgramThatIsOtherwiseRunnable() {
    // As JAX exports a function with ordered effects: a token in, effects ordered by it, a token out.
    String text =
        """
        module @jit_ordered attributes {mhlo.num_partitions = 1 : i32} {
          func.func public @main(%arg0: !stablehlo.token {jax.token = true}, %arg1: tensor<4xf32> loc("x"))
              -> (!stablehlo.token {jax.token = true}, tensor<4xf32> {jax.result_info = "result"}) {
            %t = stablehlo.after_all %arg0 : !stablehlo.token
            %two = stablehlo.constant dense<2.0> : tensor<4xf32>
            %y = stablehlo.multiply %arg1, %two : tensor<4xf32>
            return %t, %y : !stablehlo.token, tensor<4xf32>
          }
        }
        """;
    ImportedProgram program = ImportedProgram.fromText("ordered", text);
    assertEquals(List.of(TensorType.of(DType.F32, 4)), program.parameterTypes(), "the token is not an argument");
    try (XlaClient client = XlaClient.create();
        Executable exe = program.compile(client)) {
      assertEquals(List.of(TensorType.of(DType.F32, 4)), exe.outputTypes(), "the token is not an output");
      float[] out = exe.run(HostTensor.vector(1f, 2f, 3f, 4f)).get(0).toFloatArray();
      assertArrayEquals(new float[] {2f, 4f, 6f, 8f}, out);
    }
  }

  @Test
  void aTokenOnlyInTheMiddleOfTheParametersAndASingleTokenResult() {
    String text =
        """
        func.func @main(%a: tensor<2xi32>, %t: !stablehlo.token, %b: tensor<2xi32>) -> !stablehlo.token {
          %u = stablehlo.after_all %t : !stablehlo.token
          return %u : !stablehlo.token
        }
        """;
    try (XlaClient client = XlaClient.create();
        Executable exe = client.compile(text)) {
      assertEquals(List.of(TensorType.of(DType.S32, 2), TensorType.of(DType.S32, 2)), exe.parameterTypes());
      assertEquals(List.of(), exe.outputTypes());
      assertEquals(List.of(), exe.run(HostTensor.vector(1, 2), HostTensor.vector(3, 4)));
    }
  }
}
