package dev.xlaactors.runtime;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.Objects;

/** The element type and shape of a tensor, written {@code f32[2,3]} in messages. */
public record TensorType(DType dtype, Shape shape) {
  private static final java.util.regex.Pattern DIMENSION = java.util.regex.Pattern.compile("(\\d+|\\?)x");

  public TensorType {
    Objects.requireNonNull(dtype, "dtype");
    Objects.requireNonNull(shape, "shape");
    try {
      Math.multiplyExact(shape.elementCount(), (long) dtype.byteSize());
    } catch (ArithmeticException tooBig) {
      throw new InvalidArgumentException(
          dtype.shortName() + shape + " would take more than " + Long.MAX_VALUE + " bytes");
    }
  }

  public static TensorType of(DType dtype, long... dims) {
    return new TensorType(dtype, Shape.of(dims));
  }

  /** Size of a row-major tensor of this type, in bytes. */
  public long byteSize() {
    return shape.elementCount() * dtype.byteSize();
  }

  /** The StableHLO spelling, e.g. {@code tensor<2x3xf32>} or {@code tensor<f32>}. */
  public String mlir() {
    StringBuilder sb = new StringBuilder("tensor<");
    for (int i = 0; i < shape.rank(); i++) {
      sb.append(shape.dim(i)).append('x');
    }
    return sb.append(dtype.mlirName()).append('>').toString();
  }

  /** Parses the StableHLO spelling ({@code tensor<2x3xf32>}); dynamic dimensions are rejected. */
  public static TensorType parseMlir(String text) {
    String t = text.trim();
    if (!t.startsWith("tensor<") || !t.endsWith(">")) {
      throw new InvalidArgumentException("expected a ranked tensor type like tensor<2x3xf32>, got '" + text + "'");
    }
    String body = t.substring("tensor<".length(), t.length() - 1);
    int encoding = body.indexOf(',');
    if (encoding >= 0) {
      body = body.substring(0, encoding).trim();
    }
    // Dimensions are the leading "<digits>x" groups; what follows is the element type.
    java.util.List<Long> dims = new java.util.ArrayList<>();
    java.util.regex.Matcher m = DIMENSION.matcher(body);
    int at = 0;
    while (m.find(at) && m.start() == at) {
      if (m.group(1).equals("?")) {
        throw new InvalidArgumentException("dynamic dimensions are not supported: '" + text + "'");
      }
      dims.add(Long.parseLong(m.group(1)));
      at = m.end();
    }
    long[] shape = dims.stream().mapToLong(Long::longValue).toArray();
    return new TensorType(DType.fromMlirName(body.substring(at)), Shape.of(shape));
  }

  @Override
  public String toString() {
    return dtype.shortName() + shape;
  }
}
