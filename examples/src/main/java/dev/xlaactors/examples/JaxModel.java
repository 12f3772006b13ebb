package dev.xlaactors.examples;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.graph.ImportedProgram;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * Serves a model exported from JAX (tools/jax_example_model.py wrote examples/models/mlp_with_callback.mlir)
 * whose hidden layer calls a Java callback through {@code jax.ffi.ffi_call}: the Java side registers
 * "calibrate" (here: clamp activations to a ceiling and count the clamped ones), then classifies a batch.
 */
public final class JaxModel {
  private JaxModel() {}

  public static void main(String[] args) throws Exception {
    ExampleArgs arguments = new ExampleArgs("examples/run.sh jax-model [model.mlir]", args, 1);
    Path model = Path.of(arguments.string(0, "examples/models/mlp_with_callback.mlir"));
    if (!java.nio.file.Files.isRegularFile(model)) {
      arguments.exit("no such file: " + model.toAbsolutePath());
    }
    ImportedProgram program = ImportedProgram.fromFile(model);
    System.out.println("model " + model + ": parameters " + program.parameterTypes());

    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "jax-model");
    try (XlaClient client = XlaClient.create();
        CallbackRuntime callbacks = CallbackRuntime.create(system, client);
        Executable exe = program.compile(client);
        Model jax = Model.of(exe)) {
      float ceiling = 1.5f;
      callbacks
          .register("calibrate", List.of(TensorType.of(DType.F32, 4, 16)), ceiling, (inputs, limit) -> {
            float[] hidden = inputs.get(0).toFloatArray();
            int clamped = 0;
            for (int i = 0; i < hidden.length; i++) {
              if (hidden[i] > (Float) limit) {
                hidden[i] = (Float) limit;
                clamped++;
              }
            }
            System.out.println("  [java] calibrate: clamped " + clamped + " of " + hidden.length + " activations");
            return List.of(HostTensor.ofFloats(hidden, 4, 16));
          })
          .toCompletableFuture()
          .join();

      float[] batch = new float[4 * 6];
      for (int i = 0; i < batch.length; i++) {
        batch[i] = (float) Math.sin(i * 0.7) * 2;
      }
      HostTensor probabilities = callbacks.run(jax, Argument.of(List.of(HostTensor.ofFloats(batch, 4, 6)))).get(0);
      float[] p = probabilities.toFloatArray();
      for (int row = 0; row < 4; row++) {
        float[] r = Arrays.copyOfRange(p, row * 3, row * 3 + 3);
        int best = r[0] >= r[1] && r[0] >= r[2] ? 0 : r[1] >= r[2] ? 1 : 2;
        System.out.println("  input " + row + " -> class " + best + "  probabilities " + Arrays.toString(r));
      }
    } finally {
      system.terminate();
    }
  }
}
