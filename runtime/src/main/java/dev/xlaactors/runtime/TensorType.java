package dev.xlaactors.runtime;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.Objects;

/** The element type and shape of a tensor, written {@code f32[2,3]} in messages. */
public record TensorType(DType dtype, Shape shape) {
  public TensorType {
    Objects.requireNonNull(dtype, "dtype");
    Objects.requireNonNull(shape, "shape");
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
    String[] parts = body.split("x");
    long[] dims = new long[parts.length - 1];
    for (int i = 0; i < dims.length; i++) {
      if (parts[i].equals("?")) {
        throw new InvalidArgumentException("dynamic dimensions are not supported: '" + text + "'");
      }
      try {
        dims[i] = Long.parseLong(parts[i]);
      } catch (NumberFormatException e) {
        throw new InvalidArgumentException("cannot read dimension '" + parts[i] + "' of '" + text + "'");
      }
    }
    return new TensorType(DType.fromMlirName(parts[parts.length - 1]), Shape.of(dims));
  }

  @Override
  public String toString() {
    return dtype.shortName() + shape;
  }
}
