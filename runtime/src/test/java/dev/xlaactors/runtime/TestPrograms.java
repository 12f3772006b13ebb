package dev.xlaactors.runtime;

/** StableHLO programs shared by the runtime tests. */
final class TestPrograms {
  private TestPrograms() {}

  static final String ADD_F32_4 =
      """
      func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
        %0 = stablehlo.add %a, %b : tensor<4xf32>
        return %0 : tensor<4xf32>
      }
      """;

  /** {@code out = in * (run's scale factor) + addend} through the bridge's FFI proof handler. */
  static String scaleAdd(String addend, String failWith) {
    String fail = failWith == null ? "" : ", fail_with = \"" + failWith + "\"";
    return """
        func.func @main(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
          %0 = stablehlo.custom_call @xla_actors.scale_add(%a) {api_version = 4 : i32, \
        backend_config = {addend = ADDEND : f32FAIL}, has_side_effect = true} : (tensor<2x3xf32>) -> tensor<2x3xf32>
          return %0 : tensor<2x3xf32>
        }
        """
        .replace("ADDEND", addend)
        .replace("FAIL", fail);
  }

  /** The identity function on one tensor type. */
  static String identity(TensorType type) {
    return """
        func.func @main(%a: TYPE) -> TYPE {
          return %a : TYPE
        }
        """
        .replace("TYPE", type.mlir());
  }
}
