package dev.xlaactors.examples;

import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.RunContext;
import dev.xlaactors.runtime.XlaClient;
import java.util.Arrays;
import java.util.List;

/**
 * The quick start: loads the real XLA CPU plugin, compiles a StableHLO program, runs it from Java, then
 * runs a program whose middle step is a native XLA FFI handler that reads per-run data.
 */
public final class Quickstart {
  private static final String MLP_LAYER =
      """
      func.func @main(%x: tensor<2x3xf32>, %w: tensor<3x2xf32>, %b: tensor<2xf32>) -> tensor<2x2xf32> {
        %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
        %1 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<2xf32>) -> tensor<2x2xf32>
        %2 = stablehlo.add %0, %1 : tensor<2x2xf32>
        %3 = stablehlo.tanh %2 : tensor<2x2xf32>
        return %3 : tensor<2x2xf32>
      }
      """;

  private static final String WITH_FFI_STEP =
      """
      func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
        %0 = stablehlo.multiply %x, %x : tensor<2x3xf32>
        %1 = stablehlo.custom_call @xla_actors.scale_add(%0) {api_version = 4 : i32,
               backend_config = {addend = 1.0 : f32}, has_side_effect = true} : (tensor<2x3xf32>) -> tensor<2x3xf32>
        return %1 : tensor<2x3xf32>
      }
      """;

  private Quickstart() {}

  public static void main(String[] args) {
    try (XlaClient client = XlaClient.create()) {
      System.out.println("client: " + client);
      try (Executable layer = client.compile(MLP_LAYER)) {
        List<HostTensor> out =
            layer.run(
                HostTensor.ofFloats(new float[] {1, 2, 3, 4, 5, 6}, 2, 3),
                HostTensor.ofFloats(new float[] {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f}, 3, 2),
                HostTensor.ofFloats(new float[] {0.01f, -0.01f}, 2));
        System.out.println("tanh(x @ w + b) = " + Arrays.toString(out.get(0).toFloatArray()));
      }
      try (Executable program = client.compile(WITH_FFI_STEP)) {
        for (int run = 1; run <= 2; run++) {
          try (RunContext context = RunContext.create(client.plugin(), run, 10f * run)) {
            HostTensor out =
                program.run(List.of(HostTensor.ofFloats(new float[] {1, 2, 3, 4, 5, 6}, 2, 3)), context).get(0);
            System.out.println(
                "run " + run + ": x*x * " + (10 * run) + " + 1 = " + Arrays.toString(out.toFloatArray()));
          }
        }
      }
    }
  }
}
