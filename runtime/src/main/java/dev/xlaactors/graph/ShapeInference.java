package dev.xlaactors.graph;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Shape;
import dev.xlaactors.runtime.TensorType;
import java.util.Arrays;
import java.util.List;

/**
 * The shape and dtype rules of the graph builder's operations, as pure functions of operand types. Each
 * rule either returns the result type or throws an {@link InvalidArgumentException} whose message starts
 * with the op's name and shows the operands' types, so a bad graph fails at the line that builds the bad
 * node rather than later inside XLA's compiler.
 */
public final class ShapeInference {
  private ShapeInference() {}

  /** What element types an elementwise op accepts. */
  public enum DTypeClass {
    /** Every dtype, pred included. */
    ANY,
    /** Integers and floats. */
    NUMERIC,
    /** Signed integers and floats (abs, sign). */
    SIGNED,
    /** Floats only (exp, log, tanh, ...). */
    FLOATING,
    /** Pred and integers (and, or, not). */
    LOGICAL;

    boolean accepts(DType t) {
      return switch (this) {
        case ANY -> true;
        case NUMERIC -> t != DType.PRED;
        case SIGNED -> t.isSignedInteger() || t.isFloating();
        case FLOATING -> t.isFloating();
        case LOGICAL -> t == DType.PRED || t.isInteger();
      };
    }

    String description() {
      return switch (this) {
        case ANY -> "any dtype";
        case NUMERIC -> "an integer or floating dtype";
        case SIGNED -> "a signed integer or floating dtype";
        case FLOATING -> "a floating dtype";
        case LOGICAL -> "pred or an integer dtype";
      };
    }
  }

  /** Checks an operand's dtype against what {@code op} accepts. */
  public static void checkDType(String op, DTypeClass accepted, TensorType operand) {
    if (!accepted.accepts(operand.dtype())) {
      throw error(op, "needs " + accepted.description() + ", got " + operand);
    }
  }

  /**
   * NumPy broadcasting of two operand shapes (dims aligned from the right, each pair equal or one of
   * them 1); the dtypes must match exactly, since XLA has no implicit promotion.
   */
  public static TensorType broadcastBinary(String op, TensorType a, TensorType b) {
    if (a.dtype() != b.dtype()) {
      throw error(op, "operand types must match, got " + a + " and " + b);
    }
    return new TensorType(a.dtype(), broadcastShapes(op, a, b));
  }

  /** The NumPy broadcast of two shapes, or an exception naming the dimension that disagrees. */
  public static Shape broadcastShapes(String op, TensorType a, TensorType b) {
    int rank = Math.max(a.shape().rank(), b.shape().rank());
    long[] dims = new long[rank];
    for (int i = 0; i < rank; i++) {
      long da = dimFromRight(a.shape(), rank - 1 - i);
      long db = dimFromRight(b.shape(), rank - 1 - i);
      if (da != db && da != 1 && db != 1) {
        throw error(
            op,
            "operand shapes do not broadcast, got " + a + " and " + b + " (dimension " + i + " of the result: "
                + da + " vs " + db + ")");
      }
      dims[i] = da == 1 ? db : da;
    }
    return Shape.of(dims);
  }

  private static long dimFromRight(Shape s, int fromRight) {
    int axis = s.rank() - 1 - fromRight;
    return axis < 0 ? 1 : s.dim(axis);
  }

  /** NumPy broadcasting of one operand to a target shape: the dims {@code broadcast_in_dim} needs. */
  public static long[] broadcastToDims(String op, TensorType operand, Shape target) {
    int offset = target.rank() - operand.shape().rank();
    if (offset < 0) {
      throw error(op, "cannot broadcast " + operand + " to the lower-rank shape " + target);
    }
    long[] mapping = new long[operand.shape().rank()];
    for (int i = 0; i < mapping.length; i++) {
      long d = operand.shape().dim(i);
      if (d != 1 && d != target.dim(i + offset)) {
        throw error(op, "cannot broadcast " + operand + " to " + target + " (dimension " + i + ")");
      }
      mapping[i] = i + offset;
    }
    return mapping;
  }

  /** {@code broadcast_in_dim}: operand dim {@code i} maps to result dim {@code dims[i]}, sizes 1 or equal. */
  public static TensorType broadcastInDim(String op, TensorType operand, Shape target, long[] dims) {
    Shape s = operand.shape();
    if (dims.length != s.rank()) {
      throw error(op, "needs one result dimension per operand dimension: " + operand + " has rank " + s.rank()
          + ", got broadcast_dimensions " + Arrays.toString(dims));
    }
    boolean[] used = new boolean[target.rank()];
    for (int i = 0; i < dims.length; i++) {
      long d = dims[i];
      if (d < 0 || d >= target.rank()) {
        throw error(op, "broadcast dimension " + d + " is out of range for the result shape " + target);
      }
      if (used[(int) d]) {
        throw error(op, "broadcast dimension " + d + " is used twice in " + Arrays.toString(dims));
      }
      used[(int) d] = true;
      if (i > 0 && d <= dims[i - 1]) {
        throw error(op, "broadcast_dimensions must increase, got " + Arrays.toString(dims));
      }
      if (s.dim(i) != 1 && s.dim(i) != target.dim((int) d)) {
        throw error(op, "operand " + operand + " dimension " + i + " (size " + s.dim(i)
            + ") does not match result dimension " + d + " of " + target);
      }
    }
    return new TensorType(operand.dtype(), target);
  }

  /**
   * An axis in {@code [-rank, rank)}, negative counting from the end, as a non-negative axis; an
   * exception naming the op and operand otherwise.
   */
  public static int axis(String op, TensorType operand, long axis) {
    int rank = operand.shape().rank();
    long a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank) {
      throw error(op, "axis " + axis + " is out of range for " + operand + " (rank " + rank + ")");
    }
    return (int) a;
  }

  /** Distinct, normalised axes. */
  public static int[] axes(String op, TensorType operand, long... axes) {
    int[] out = new int[axes.length];
    boolean[] seen = new boolean[operand.shape().rank()];
    for (int i = 0; i < axes.length; i++) {
      out[i] = axis(op, operand, axes[i]);
      if (seen[out[i]]) {
        throw error(op, "axis " + axes[i] + " is given twice in " + Arrays.toString(axes) + " for " + operand);
      }
      seen[out[i]] = true;
    }
    return out;
  }

  /** The shape left after removing {@code axes}. */
  public static TensorType reduce(String op, TensorType operand, int[] axes) {
    Shape s = operand.shape();
    boolean[] drop = new boolean[s.rank()];
    for (int a : axes) {
      drop[a] = true;
    }
    long[] dims = new long[s.rank() - axes.length];
    int k = 0;
    for (int i = 0; i < s.rank(); i++) {
      if (!drop[i]) {
        dims[k++] = s.dim(i);
      }
    }
    return new TensorType(operand.dtype(), Shape.of(dims));
  }

  /** {@code reshape}: same element count; at most one {@code -1} dimension is inferred. */
  public static TensorType reshape(String op, TensorType operand, long[] dims) {
    long[] out = dims.clone();
    int inferred = -1;
    long known = 1;
    for (int i = 0; i < out.length; i++) {
      if (out[i] == -1) {
        if (inferred >= 0) {
          throw error(op, "only one dimension can be -1, got " + Arrays.toString(dims));
        }
        inferred = i;
      } else if (out[i] < 0) {
        throw error(op, "dimension " + i + " of " + Arrays.toString(dims) + " is negative");
      } else {
        known *= out[i];
      }
    }
    long count = operand.shape().elementCount();
    if (inferred >= 0) {
      if (known == 0 || count % known != 0) {
        throw error(op, "cannot infer the -1 dimension of " + Arrays.toString(dims) + " for " + operand);
      }
      out[inferred] = count / known;
      known *= out[inferred];
    }
    if (known != count) {
      throw error(op, "cannot reshape " + operand + " (" + count + " elements) to " + Arrays.toString(dims)
          + " (" + known + " elements)");
    }
    return new TensorType(operand.dtype(), Shape.of(out));
  }

  /** {@code transpose}: {@code permutation} is a permutation of the operand's axes. */
  public static TensorType transpose(String op, TensorType operand, long[] permutation) {
    Shape s = operand.shape();
    if (permutation.length != s.rank()) {
      throw error(op, "permutation " + Arrays.toString(permutation) + " has length " + permutation.length
          + " but " + operand + " has rank " + s.rank());
    }
    long[] dims = new long[s.rank()];
    boolean[] seen = new boolean[s.rank()];
    for (int i = 0; i < permutation.length; i++) {
      long p = permutation[i];
      if (p < 0 || p >= s.rank() || seen[(int) p]) {
        throw error(op, Arrays.toString(permutation) + " is not a permutation of the axes of " + operand);
      }
      seen[(int) p] = true;
      dims[i] = s.dim((int) p);
    }
    return new TensorType(operand.dtype(), Shape.of(dims));
  }

  /** {@code slice}: {@code 0 <= start <= limit <= dim}, strides at least 1. */
  public static TensorType slice(String op, TensorType operand, long[] start, long[] limit, long[] strides) {
    Shape s = operand.shape();
    if (start.length != s.rank() || limit.length != s.rank() || strides.length != s.rank()) {
      throw error(op, "needs " + s.rank() + " start, limit and stride values for " + operand + ", got "
          + Arrays.toString(start) + ", " + Arrays.toString(limit) + ", " + Arrays.toString(strides));
    }
    long[] dims = new long[s.rank()];
    for (int i = 0; i < dims.length; i++) {
      if (start[i] < 0 || start[i] > limit[i] || limit[i] > s.dim(i) || strides[i] < 1) {
        throw error(op, "dimension " + i + " of " + operand + ": need 0 <= start <= limit <= " + s.dim(i)
            + " and stride >= 1, got start " + start[i] + ", limit " + limit[i] + ", stride " + strides[i]);
      }
      dims[i] = (limit[i] - start[i] + strides[i] - 1) / strides[i];
    }
    return new TensorType(operand.dtype(), Shape.of(dims));
  }

  /** Start indices of dynamic slices: one integer scalar per operand axis, all of one dtype. */
  public static void checkStartIndices(String op, TensorType operand, List<TensorType> starts) {
    if (starts.size() != operand.shape().rank()) {
      throw error(op, "needs " + operand.shape().rank() + " start indices for " + operand + ", got " + starts.size());
    }
    for (int i = 0; i < starts.size(); i++) {
      TensorType t = starts.get(i);
      if (t.shape().rank() != 0 || !t.dtype().isInteger()) {
        throw error(op, "start index " + i + " must be an integer scalar, got " + t);
      }
      if (t.dtype() != starts.get(0).dtype()) {
        throw error(op, "start indices must share one dtype, got " + starts.get(0) + " and " + t);
      }
    }
  }

  /** {@code dynamic_slice}: sizes within the operand's dims. */
  public static TensorType dynamicSlice(String op, TensorType operand, List<TensorType> starts, long[] sizes) {
    checkStartIndices(op, operand, starts);
    Shape s = operand.shape();
    if (sizes.length != s.rank()) {
      throw error(op, "needs " + s.rank() + " slice sizes for " + operand + ", got " + Arrays.toString(sizes));
    }
    for (int i = 0; i < sizes.length; i++) {
      if (sizes[i] < 0 || sizes[i] > s.dim(i)) {
        throw error(op, "slice size " + sizes[i] + " of dimension " + i + " does not fit in " + operand);
      }
    }
    return new TensorType(operand.dtype(), Shape.of(sizes));
  }

  /** {@code dynamic_update_slice}: an update of the same rank and dtype that fits in the operand. */
  public static TensorType dynamicUpdateSlice(String op, TensorType operand, TensorType update, List<TensorType> starts) {
    checkStartIndices(op, operand, starts);
    if (update.dtype() != operand.dtype() || update.shape().rank() != operand.shape().rank()) {
      throw error(op, "update must have the operand's dtype and rank, got " + operand + " and update " + update);
    }
    for (int i = 0; i < update.shape().rank(); i++) {
      if (update.shape().dim(i) > operand.shape().dim(i)) {
        throw error(op, "update " + update + " does not fit in " + operand + " (dimension " + i + ")");
      }
    }
    return operand;
  }

  /** {@code concatenate}: same dtype and rank, equal sizes except along {@code axis}. */
  public static TensorType concatenate(String op, List<TensorType> operands, int axis) {
    if (operands.isEmpty()) {
      throw error(op, "needs at least one operand");
    }
    TensorType first = operands.get(0);
    long[] dims = first.shape().dims();
    for (int k = 1; k < operands.size(); k++) {
      TensorType t = operands.get(k);
      if (t.dtype() != first.dtype() || t.shape().rank() != first.shape().rank()) {
        throw error(op, "operands must share dtype and rank, got " + first + " and " + t);
      }
      for (int i = 0; i < dims.length; i++) {
        if (i == axis) {
          dims[i] += t.shape().dim(i);
        } else if (t.shape().dim(i) != first.shape().dim(i)) {
          throw error(op, "operands must match outside axis " + axis + ", got " + first + " and " + t);
        }
      }
    }
    return new TensorType(first.dtype(), Shape.of(dims));
  }

  /** {@code pad}: low/high may be negative (cropping), interior at least 0, results non-negative. */
  public static TensorType pad(String op, TensorType operand, TensorType padValue, long[] low, long[] high, long[] interior) {
    Shape s = operand.shape();
    if (padValue.shape().rank() != 0 || padValue.dtype() != operand.dtype()) {
      throw error(op, "padding value must be a scalar of the operand's dtype, got " + operand + " and " + padValue);
    }
    if (low.length != s.rank() || high.length != s.rank() || interior.length != s.rank()) {
      throw error(op, "needs " + s.rank() + " low, high and interior values for " + operand);
    }
    long[] dims = new long[s.rank()];
    for (int i = 0; i < dims.length; i++) {
      if (interior[i] < 0) {
        throw error(op, "interior padding must be >= 0, got " + interior[i] + " in dimension " + i);
      }
      dims[i] = low[i] + high[i] + s.dim(i) + Math.max(s.dim(i) - 1, 0) * interior[i];
      if (dims[i] < 0) {
        throw error(op, "dimension " + i + " of " + operand + " would have negative size " + dims[i]);
      }
    }
    return new TensorType(operand.dtype(), Shape.of(dims));
  }

  /** The dimension numbers of a {@code dot_general}. */
  public record DotDimensions(long[] lhsBatch, long[] rhsBatch, long[] lhsContracting, long[] rhsContracting) {}

  /**
   * {@code dot_general}: batch and contracting dims pair up with equal sizes; the result is batch dims,
   * then the lhs's free dims, then the rhs's free dims.
   */
  public static TensorType dotGeneral(String op, TensorType lhs, TensorType rhs, DotDimensions d) {
    if (lhs.dtype() != rhs.dtype()) {
      throw error(op, "operand types must match, got " + lhs + " and " + rhs);
    }
    if (d.lhsBatch().length != d.rhsBatch().length || d.lhsContracting().length != d.rhsContracting().length) {
      throw error(op, "lhs and rhs need as many batch and contracting dimensions, got " + describe(d));
    }
    boolean[] lhsUsed = new boolean[lhs.shape().rank()];
    boolean[] rhsUsed = new boolean[rhs.shape().rank()];
    // Each batch pair appears once in the result; each contracting pair disappears.
    long[] dims = new long[lhs.shape().rank() + rhs.shape().rank() - d.lhsBatch().length - 2 * d.lhsContracting().length];
    int k = 0;
    for (int i = 0; i < d.lhsBatch().length; i++) {
      long size = pairedDim(op, lhs, rhs, d.lhsBatch()[i], d.rhsBatch()[i], lhsUsed, rhsUsed, "batch");
      dims[k++] = size;
    }
    for (int i = 0; i < d.lhsContracting().length; i++) {
      pairedDim(op, lhs, rhs, d.lhsContracting()[i], d.rhsContracting()[i], lhsUsed, rhsUsed, "contracting");
    }
    for (int i = 0; i < lhsUsed.length; i++) {
      if (!lhsUsed[i]) {
        dims[k++] = lhs.shape().dim(i);
      }
    }
    for (int i = 0; i < rhsUsed.length; i++) {
      if (!rhsUsed[i]) {
        dims[k++] = rhs.shape().dim(i);
      }
    }
    return new TensorType(lhs.dtype(), Shape.of(dims));
  }

  private static long pairedDim(String op, TensorType lhs, TensorType rhs, long l, long r, boolean[] lhsUsed,
      boolean[] rhsUsed, String kind) {
    if (l < 0 || l >= lhsUsed.length || lhsUsed[(int) l]) {
      throw error(op, "lhs " + kind + " dimension " + l + " is out of range or repeated for " + lhs);
    }
    if (r < 0 || r >= rhsUsed.length || rhsUsed[(int) r]) {
      throw error(op, "rhs " + kind + " dimension " + r + " is out of range or repeated for " + rhs);
    }
    lhsUsed[(int) l] = true;
    rhsUsed[(int) r] = true;
    long a = lhs.shape().dim((int) l);
    long b = rhs.shape().dim((int) r);
    if (a != b) {
      throw error(op, kind + " dimensions differ: " + lhs + " dimension " + l + " is " + a + " but " + rhs
          + " dimension " + r + " is " + b);
    }
    return a;
  }

  static String describe(DotDimensions d) {
    return "lhs batch " + Arrays.toString(d.lhsBatch()) + ", rhs batch " + Arrays.toString(d.rhsBatch())
        + ", lhs contracting " + Arrays.toString(d.lhsContracting()) + ", rhs contracting "
        + Arrays.toString(d.rhsContracting());
  }

  /** The exception every rule throws: {@code "op: detail"}. */
  static InvalidArgumentException error(String op, String detail) {
    return new InvalidArgumentException(op + ": " + detail);
  }
}
