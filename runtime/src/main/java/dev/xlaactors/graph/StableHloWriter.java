package dev.xlaactors.graph;

import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.stream.Collectors;

/**
 * Text emission for the graph builder. Every operation is written in MLIR's generic form
 * ({@code %v = "stablehlo.op"(operands) ({regions}) {attributes} : (types) -> types}): it is one
 * regular syntax for all ops, and it is what the XLA CPU plugin's parser accepts for every StableHLO
 * version, unlike the per-op pretty forms.
 */
final class StableHloWriter {
  private StableHloWriter() {}

  /** One operation; {@code results} is the SSA name (with {@code :n} for several results) or null. */
  static String op(String results, String opName, List<Value> operands, List<String> regions, String attributes,
      List<TensorType> resultTypes) {
    return op(results, opName, operands, regions, attributes, resultTypes, Value::ssaName);
  }

  /** One operation whose operands are written with {@code namer} (segmentation renames stage inputs). */
  static String op(String results, String opName, List<Value> operands, List<String> regions, String attributes,
      List<TensorType> resultTypes, java.util.function.Function<Value, String> namer) {
    StringBuilder sb = new StringBuilder();
    if (results != null) {
      sb.append(results).append(" = ");
    }
    sb.append('"').append(opName).append("\"(")
        .append(operands.stream().map(namer).collect(Collectors.joining(", "))).append(')');
    if (!regions.isEmpty()) {
      sb.append(" (").append(String.join(", ", regions)).append(')');
    }
    if (attributes != null && !attributes.isEmpty()) {
      sb.append(" {").append(attributes).append('}');
    }
    sb.append(" : (").append(types(operands.stream().map(Value::type).toList())).append(") -> ");
    if (resultTypes.size() == 1) {
      sb.append(resultTypes.get(0).mlir());
    } else {
      sb.append('(').append(types(resultTypes)).append(')');
    }
    return sb.toString();
  }

  /** A terminator ({@code stablehlo.return} or {@code func.return}) of the given values. */
  static String terminator(String opName, List<Value> values) {
    return terminator(opName, values, Value::ssaName);
  }

  /** A terminator whose operands are written with {@code namer}. */
  static String terminator(String opName, List<Value> values, java.util.function.Function<Value, String> namer) {
    return '"' + opName + "\"(" + values.stream().map(namer).collect(Collectors.joining(", ")) + ") : ("
        + types(values.stream().map(Value::type).toList()) + ") -> ()";
  }

  /** A region: an optional entry block signature, then indented lines. */
  static String region(List<Value> blockArguments, String body, String indent) {
    StringBuilder sb = new StringBuilder("{\n");
    if (!blockArguments.isEmpty()) {
      sb.append(indent).append("^bb0(")
          .append(blockArguments.stream().map(v -> v.ssaName() + ": " + v.type().mlir()).collect(Collectors.joining(", ")))
          .append("):\n");
    }
    sb.append(body);
    return sb.append(indent).append('}').toString();
  }

  static String names(List<Value> values) {
    return values.stream().map(Value::ssaName).collect(Collectors.joining(", "));
  }

  static String types(List<TensorType> types) {
    return types.stream().map(TensorType::mlir).collect(Collectors.joining(", "));
  }

  /** {@code array<i64: 1, 2>}, or {@code array<i64>} when empty. */
  static String i64Array(long[] values) {
    if (values.length == 0) {
      return "array<i64>";
    }
    StringBuilder sb = new StringBuilder("array<i64: ");
    for (int i = 0; i < values.length; i++) {
      sb.append(i > 0 ? ", " : "").append(values[i]);
    }
    return sb.append('>').toString();
  }

  /** {@code [1, 2]}, the list syntax inside {@code #stablehlo.dot<...>}. */
  static String list(long[] values) {
    StringBuilder sb = new StringBuilder("[");
    for (int i = 0; i < values.length; i++) {
      sb.append(i > 0 ? ", " : "").append(values[i]);
    }
    return sb.append(']').toString();
  }

  /**
   * A dense elements attribute holding exactly the tensor's bytes. Scalars are written as readable
   * literals (floats by bit pattern, so NaN, infinities and every rounding survive); larger tensors as
   * the hex blob MLIR prints itself, which is exact for every dtype and needs no nesting by shape.
   */
  static String denseLiteral(HostTensor t) {
    TensorType type = t.type();
    if (type.shape().elementCount() == 0) {
      return "dense<> : " + type.mlir();
    }
    if (type.shape().rank() == 0) {
      return "dense<" + scalarLiteral(t) + "> : " + type.mlir();
    }
    if (type.dtype() == DType.PRED) {
      // MLIR's hex form packs i1 as bits, not bytes; a nested true/false literal avoids that format.
      StringBuilder sb = new StringBuilder("dense<");
      nestedBooleans(sb, t.toBooleanArray(), type.shape().dims(), 0, 0);
      return sb.append("> : ").append(type.mlir()).toString();
    }
    ByteBuffer data = t.data();
    StringBuilder sb = new StringBuilder("dense<\"0x");
    while (data.hasRemaining()) {
      sb.append(String.format("%02X", data.get() & 0xff));
    }
    return sb.append("\"> : ").append(type.mlir()).toString();
  }

  private static int nestedBooleans(StringBuilder sb, boolean[] values, long[] dims, int axis, int next) {
    if (axis == dims.length) {
      sb.append(values[next] ? "true" : "false");
      return next + 1;
    }
    sb.append('[');
    for (long i = 0; i < dims[axis]; i++) {
      sb.append(i > 0 ? ", " : "");
      next = nestedBooleans(sb, values, dims, axis + 1, next);
    }
    sb.append(']');
    return next;
  }

  private static String scalarLiteral(HostTensor t) {
    DType d = t.dtype();
    ByteBuffer b = t.data();
    if (d == DType.PRED) {
      return b.get(0) != 0 ? "true" : "false";
    }
    if (d.isInteger()) {
      long v = t.toLongArray()[0];
      return d == DType.U64 ? Long.toUnsignedString(v) : Long.toString(v);
    }
    return switch (d.byteSize()) {
      case 2 -> String.format("0x%04X", b.getShort(0) & 0xffff);
      case 4 -> String.format("0x%08X", b.getInt(0));
      default -> String.format("0x%016X", b.getLong(0));
    };
  }
}
