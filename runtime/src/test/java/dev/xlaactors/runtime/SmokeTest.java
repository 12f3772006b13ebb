package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.*;

import java.util.List;
import org.junit.jupiter.api.Test;

class SmokeTest {
  @Test
  void addAndFfi() {
    try (XlaClient client = XlaClient.create()) {
      System.out.println(client + " api " + client.plugin().apiVersion() + " ffi " + client.plugin().hasFfiHandlers());
      String add = """
          func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
            %0 = stablehlo.add %a, %b : tensor<4xf32>
            return %0 : tensor<4xf32>
          }
          """;
      try (Executable e = client.compile(add)) {
        List<HostTensor> out = e.run(HostTensor.ofFloats(new float[] {1, 2, 3, 4}), HostTensor.ofFloats(new float[] {10, 20, 30, 40}));
        assertArrayEquals(new float[] {11, 22, 33, 44}, out.get(0).toFloatArray());
      }
      String ffi = """
          func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
            %0 = stablehlo.custom_call @xla_actors.scale_add(%a) {api_version = 4 : i32, backend_config = {addend = 0.5 : f32}, has_side_effect = true} : (tensor<4xf32>) -> tensor<4xf32>
            return %0 : tensor<4xf32>
          }
          """;
      try (Executable e = client.compile(ffi); RunContext ctx = RunContext.create(client.plugin(), 1, 3f)) {
        List<HostTensor> out = e.run(List.of(HostTensor.ofFloats(new float[] {1, 2, 3, 4})), ctx);
        assertArrayEquals(new float[] {3.5f, 6.5f, 9.5f, 12.5f}, out.get(0).toFloatArray());
        out = e.run(HostTensor.ofFloats(new float[] {1, 2, 3, 4}));
        assertArrayEquals(new float[] {1.5f, 2.5f, 3.5f, 4.5f}, out.get(0).toFloatArray());
      }
    }
  }
}
