package dev.xlaactors.graph;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.CompileException;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.ProgramSignature;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

/** Modules exported by {@code jax.jit(f).lower(...).as_text()} (jax 0.10.2), run here and checked against JAX. */
class JaxExportTest {
  static XlaClient client;

  @BeforeAll
  static void open() {
    client = XlaClient.create();
  }

  @AfterAll
  static void close() {
    client.close();
  }

  @ParameterizedTest
  @ValueSource(strings = {"mlp", "attention", "loop_sum_squares", "cond_scale", "argmax_one_hot"})
  void exportedModuleRunsAndMatchesJax(String name) {
    ImportedProgram program = ImportedProgram.fromText(name + ".mlir", JaxFixture.resource(name + ".mlir"));
    JaxFixture fixture = JaxFixture.load(name);
    assertEquals(fixture.inputs().stream().map(HostTensor::type).toList(), program.parameterTypes());
    try (Executable exe = program.compile(client)) {
      fixture.check(exe.run(fixture.inputs().toArray(HostTensor[]::new)), 1e-5, 1e-6, name + ".mlir");
    }
  }

  @Test
  void signatureIgnoresArgumentAttributesAndLocations() {
    String text = """
        module @jit_f attributes {mhlo.num_partitions = 1 : i32} {
          func.func public @main(%arg0: tensor<2x3xf32> {mhlo.sharding = "{replicated}", jax.arg_info = "x"} loc("x"), %arg1: tensor<i32> loc(#loc2)) -> (tensor<2x3xf32> {jax.result_info = "result"}) {
            return %arg0 : tensor<2x3xf32>
          }
        }
        """;
    assertEquals(java.util.List.of(TensorType.of(dev.xlaactors.runtime.DType.F32, 2, 3),
        TensorType.of(dev.xlaactors.runtime.DType.S32)), ProgramSignature.parse(text).parameters());
  }

  @Test
  void textThatDoesNotParseIsACompileExceptionNamingTheProgram() {
    CompileException noMain = assertThrows(CompileException.class,
        () -> ImportedProgram.fromText("broken.mlir", "module { func.func @helper() { return } }"));
    assertTrue(noMain.getMessage().contains("broken.mlir") && noMain.getMessage().contains("@main"), noMain.getMessage());
    assertThrows(CompileException.class, () -> ImportedProgram.fromText("empty.mlir", "  "));
    ImportedProgram garbage = ImportedProgram.fromText("garbage.mlir",
        "func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> { %0 = stablehlo.frobnicate %a : tensor<2xf32>\n return %0 : tensor<2xf32> }");
    CompileException e = assertThrows(CompileException.class, () -> garbage.compile(client));
    System.out.println("plugin parse error for an unknown op: " + e.getMessage());
    assertTrue(e.getMessage().startsWith("imported program garbage.mlir does not compile"), e.getMessage());
  }
}
