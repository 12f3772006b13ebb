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

  /**
   * The row sums of an f32[8,8]: a program with a reduce, which is what the ynn eltwise-and-reduce value
   * crashes xla-cpu-pjrt on (XlaFlagsTest, XlaOptionsTest).
   */
  static final String ROW_SUM_F32_8X8 =
      """
      func.func @main(%s: tensor<8x8xf32>) -> tensor<8xf32> {
        %zero = stablehlo.constant dense<0.0> : tensor<f32>
        %z = stablehlo.reduce(%s init: %zero) applies stablehlo.add across dimensions = [1] \
      : (tensor<8x8xf32>, tensor<f32>) -> tensor<8xf32>
        return %z : tensor<8xf32>
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

  /** The MLIR type {@code tensor<D0xD1x...xDTYPE>}, e.g. {@code tensorType("f32", 2, 3)} is {@code tensor<2x3xf32>}. */
  static String tensorType(String dtype, long... dims) {
    StringBuilder s = new StringBuilder("tensor<");
    for (long d : dims) {
      s.append(d).append('x');
    }
    return s.append(dtype).append('>').toString();
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
