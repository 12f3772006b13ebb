package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.xlaactors.graph.ImportedProgram;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A program exported from JAX that calls a Java callback through {@code jax.ffi.ffi_call} (fixtures made
 * by tools/jax_ffi_call_fixture.py): f(x) = 2 * tokenize(sin(x)), and the same with the callback's output
 * written over its input ({@code input_output_aliases={0: 0}}).
 */
class JaxFfiCallTest {
  private static final ActorTestKit testKit = ActorTestKit.create();

  @AfterAll
  static void stop() {
    testKit.shutdownTestKit();
  }

  @ParameterizedTest
  @ValueSource(strings = {"jax_ffi_call", "jax_ffi_call_in_place"})
  void jaxProgramCallsTheJavaCallbackByName(String fixture) throws IOException {
    String text;
    try (InputStream in = getClass().getResourceAsStream("/fixtures/" + fixture + ".mlir")) {
      text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
    try (XlaClient client = XlaClient.create();
        CallbackRuntime callbacks = CallbackRuntime.create(testKit.system(), client)) {
      callbacks
          .register("tokenize", List.of(TensorType.of(DType.F32, 4)), null, (in, s) -> {
            float[] y = in.get(0).toFloatArray();
            for (int i = 0; i < y.length; i++) {
              y[i] = y[i] + 10; // the Java step
            }
            return List.of(HostTensor.ofFloats(y));
          })
          .toCompletableFuture()
          .join();
      float[] x = {0f, 0.5f, 1f, -2f};
      assertEquals(fixture.endsWith("in_place"), text.contains("output_operand_aliases"), fixture);
      try (Executable compiled = ImportedProgram.fromText(fixture, text).compile(client); Model exe = Model.of(compiled)) {
        float[] out = callbacks.run(exe, Argument.of(List.of(HostTensor.ofFloats(x)))).get(0).toFloatArray();
        for (int i = 0; i < x.length; i++) {
          assertEquals(2 * ((float) Math.sin(x[i]) + 10), out[i], 1e-5f, "element " + i);
        }
      }
    }
  }
}
