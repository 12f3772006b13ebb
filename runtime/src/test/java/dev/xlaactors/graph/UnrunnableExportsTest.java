package dev.xlaactors.graph;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.CompileException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.runtime.XlaClient;
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
  void aTokenParameterIsExplainedAndNeverReachesXla() {
    String text =
        """
        func.func public @main(%arg0: !stablehlo.token {jax.token = true}, %arg1: tensor<4xf32>)
            -> (!stablehlo.token {jax.token = true}, tensor<4xf32>) {
          return %arg0, %arg1 : !stablehlo.token, tensor<4xf32>
        }
        """;
    try (XlaClient client = XlaClient.create()) {
      CompileException e = assertThrows(CompileException.class, () -> client.compile(text));
      assertEquals(ErrorCode.UNIMPLEMENTED, e.code());
      assertTrue(e.getMessage().contains("parameter 0 of @main is a !stablehlo.token"), e.getMessage());
      assertTrue(e.getMessage().contains("without ordered effects"), e.getMessage());
    }
  }
}
