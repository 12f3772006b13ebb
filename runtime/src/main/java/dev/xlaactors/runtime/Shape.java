package dev.xlaactors.runtime;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.Arrays;

/** An immutable list of non-negative dimension sizes, row-major; the empty shape is a scalar. */
public final class Shape {
  private static final Shape SCALAR = new Shape(new long[0]);
  private final long[] dims;

  private Shape(long[] dims) {
    this.dims = dims;
  }

  /** A shape with these dimensions; every dimension must be {@code >= 0}. */
  public static Shape of(long... dims) {
    if (dims.length == 0) {
      return SCALAR;
    }
    long elements = 1;
    for (int i = 0; i < dims.length; i++) {
      if (dims[i] < 0) {
        throw new InvalidArgumentException(
            "dimension " + i + " of shape " + Arrays.toString(dims) + " is negative");
      }
    }
    for (long d : dims) {
      try {
        elements = Math.multiplyExact(elements, d);
      } catch (ArithmeticException tooMany) {
        if (Arrays.stream(dims).anyMatch(x -> x == 0)) {
          break; // an empty tensor, however large its other dimensions
        }
        throw new InvalidArgumentException("shape " + Arrays.toString(dims) + " holds more than " + Long.MAX_VALUE + " elements");
      }
    }
    return new Shape(dims.clone());
  }

  /** The rank-0 shape. */
  public static Shape scalar() {
    return SCALAR;
  }

  public int rank() {
    return dims.length;
  }

  public long dim(int axis) {
    return dims[axis];
  }

  /** A copy of the dimensions. */
  public long[] dims() {
    return dims.clone();
  }

  /** The number of elements (1 for a scalar, 0 when any dimension is 0). */
  public long elementCount() {
    long n = 1;
    for (long d : dims) {
      n *= d;
    }
    return n;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Shape s && Arrays.equals(dims, s.dims);
  }

  @Override
  public int hashCode() {
    return Arrays.hashCode(dims);
  }

  /** {@code [2,3]}; {@code []} for a scalar. */
  @Override
  public String toString() {
    StringBuilder sb = new StringBuilder("[");
    for (int i = 0; i < dims.length; i++) {
      if (i > 0) {
        sb.append(',');
      }
      sb.append(dims[i]);
    }
    return sb.append(']').toString();
  }
}
