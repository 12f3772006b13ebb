package dev.xlaactors.graph;

import static dev.xlaactors.graph.ShapeInference.error;

import dev.xlaactors.graph.ShapeInference.DTypeClass;
import dev.xlaactors.graph.ShapeInference.DotDimensions;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.Shape;
import dev.xlaactors.runtime.TensorType;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.BiFunction;
import java.util.function.Function;

/**
 * Builds a StableHLO program one typed operation at a time. Every method checks its operands and infers
 * the result's dtype and shape at once ({@link ShapeInference}); a mismatch is an
 * {@link dev.xlaactors.error.InvalidArgumentException} thrown by the call that builds the bad node,
 * naming the op and the operands' types.
 *
 * <pre>{@code
 * GraphBuilder b = new GraphBuilder("affine");
 * Value x = b.parameter(TensorType.of(DType.F32, 2, 3));
 * Value y = b.add(b.multiply(x, b.constant(2f)), b.constant(1f));
 * Graph g = b.build(y);
 * try (Executable exe = g.compile(client)) { ... }
 * }</pre>
 *
 * <p>Elementwise binary ops, {@link #compare} and {@link #select} broadcast their operands NumPy-style
 * (dims aligned from the right, size-1 dims stretched) but never convert dtypes: XLA has no implicit
 * promotion, so {@code f32 + s32} is an error and {@link #convert} is explicit. Axes may be negative,
 * counting from the last.
 *
 * <p>Loop bodies and branches are built by lambdas that receive a nested builder (a region scope) and
 * build their ops on it; values of enclosing scopes can be used there directly. Not thread-safe.
 */
public final class GraphBuilder {
  private final String name;
  private final GraphBuilder parent;
  private final int[] counter;
  private final String indent;
  private final StringBuilder body = new StringBuilder();
  private final List<Value> parameters = new ArrayList<>();
  private final Map<String, HostCallback> hostCallbacks; // shared with region builders
  private final List<Op> ops = new ArrayList<>(); // the same operations as body, for segmentation
  private final List<Op.Region> closedRegions = new ArrayList<>(); // regions closed, waiting for their op
  private boolean closed;

  /** A builder for a program (an MLIR module) named {@code name}; its entry function is {@code @main}. */
  public GraphBuilder(String name) {
    if (name == null || !name.matches("[A-Za-z_][A-Za-z0-9_$.]*")) {
      throw new dev.xlaactors.error.InvalidArgumentException(
          "graph name must be an identifier (letters, digits, _ . $), got '" + name + "'");
    }
    this.name = name;
    this.parent = null;
    this.counter = new int[1];
    this.indent = "    ";
    this.hostCallbacks = new LinkedHashMap<>();
  }

  private GraphBuilder(GraphBuilder parent) {
    this.name = parent.name;
    this.parent = parent;
    this.counter = parent.counter;
    this.indent = parent.indent + "    ";
    this.hostCallbacks = parent.hostCallbacks;
  }

  /** The program's name. */
  public String name() {
    return name;
  }

  /** Whether this is a region scope (a loop body or branch) rather than the program's top level. */
  public boolean isRegion() {
    return parent != null;
  }

  // ---------------------------------------------------------------------------------------------
  // Parameters and constants

  /** Declares the next parameter of {@code @main}; only on the top-level builder. */
  public Value parameter(TensorType type) {
    checkOpen("parameter");
    if (parent != null) {
      throw error("parameter", "parameters belong to the top-level builder, not to a loop body or branch");
    }
    if (type == null) {
      throw error("parameter", "type is null");
    }
    Value v = new Value(this, "%arg" + parameters.size(), type);
    parameters.add(v);
    return v;
  }

  /** Shorthand for {@code parameter(TensorType.of(dtype, dims))}. */
  public Value parameter(DType dtype, long... dims) {
    return parameter(TensorType.of(dtype, dims));
  }

  /** The parameters declared so far, in order. */
  public List<Value> parameters() {
    return List.copyOf(parameters);
  }

  /** A constant holding exactly the tensor's elements (NaN and infinities included). */
  public Value constant(HostTensor value) {
    checkOpen("constant");
    if (value == null) {
      throw error("constant", "value is null");
    }
    String attributes = "value = " + StableHloWriter.denseLiteral(value);
    return emit("stablehlo.constant", List.of(), attributes, value.type());
  }

  /** An f32 scalar. */
  public Value constant(float value) {
    return constant(HostTensor.ofFloats(new float[] {value}));
  }

  /** An f64 scalar. */
  public Value constant(double value) {
    return constant(HostTensor.ofDoubles(new double[] {value}));
  }

  /** An s32 scalar. */
  public Value constant(int value) {
    return constant(HostTensor.ofInts(new int[] {value}));
  }

  /** An s64 scalar. */
  public Value constant(long value) {
    return constant(HostTensor.ofLongs(new long[] {value}));
  }

  /** A pred scalar. */
  public Value constant(boolean value) {
    return constant(HostTensor.ofBooleans(new boolean[] {value}));
  }

  /** An f32 array of the given shape (row-major values). */
  public Value constant(float[] values, long... dims) {
    return constant(HostTensor.ofFloats(values, dims));
  }

  /** A scalar of {@code dtype} holding {@code value} (truncated toward zero for integer dtypes). */
  public Value constant(DType dtype, double value) {
    return constant(scalarTensor(dtype, value));
  }

  /** A tensor of {@code type} with every element {@code value}. */
  public Value full(TensorType type, double value) {
    return broadcastInDim(constant(type.dtype(), value), type.shape());
  }

  static HostTensor scalarTensor(DType dtype, double value) {
    return switch (dtype) {
      case F32 -> HostTensor.ofFloats(new float[] {(float) value});
      case F64 -> HostTensor.ofDoubles(new double[] {value});
      case F16 -> HostTensor.ofHalfFloats(new float[] {(float) value});
      case BF16 -> HostTensor.ofBFloat16s(new float[] {(float) value});
      case PRED -> HostTensor.ofBooleans(new boolean[] {value != 0});
      default -> HostTensor.ofLongs(dtype, new long[] {(long) value});
    };
  }

  // ---------------------------------------------------------------------------------------------
  // Elementwise

  public Value add(Value a, Value b) {
    return binary("add", "stablehlo.add", DTypeClass.ANY, a, b);
  }

  public Value subtract(Value a, Value b) {
    return binary("subtract", "stablehlo.subtract", DTypeClass.NUMERIC, a, b);
  }

  public Value multiply(Value a, Value b) {
    return binary("multiply", "stablehlo.multiply", DTypeClass.ANY, a, b);
  }

  /** Division; for integers it rounds toward zero (C semantics, not Python floor division). */
  public Value divide(Value a, Value b) {
    return binary("divide", "stablehlo.divide", DTypeClass.NUMERIC, a, b);
  }

  /** Remainder with the sign of the dividend (C {@code fmod}/{@code %}), not Python's floor modulo. */
  public Value remainder(Value a, Value b) {
    return binary("remainder", "stablehlo.remainder", DTypeClass.NUMERIC, a, b);
  }

  public Value power(Value a, Value b) {
    return binary("power", "stablehlo.power", DTypeClass.NUMERIC, a, b);
  }

  /** Elementwise maximum; NaN wins for floats. */
  public Value max(Value a, Value b) {
    return binary("max", "stablehlo.maximum", DTypeClass.ANY, a, b);
  }

  /** Elementwise minimum; NaN wins for floats. */
  public Value min(Value a, Value b) {
    return binary("min", "stablehlo.minimum", DTypeClass.ANY, a, b);
  }

  /** Logical and for pred, bitwise for integers. */
  public Value and(Value a, Value b) {
    return binary("and", "stablehlo.and", DTypeClass.LOGICAL, a, b);
  }

  /** Logical or for pred, bitwise for integers. */
  public Value or(Value a, Value b) {
    return binary("or", "stablehlo.or", DTypeClass.LOGICAL, a, b);
  }

  /** Logical not for pred, bitwise for integers. */
  public Value not(Value x) {
    return unary("not", "stablehlo.not", DTypeClass.LOGICAL, x);
  }

  public Value negate(Value x) {
    return unary("negate", "stablehlo.negate", DTypeClass.NUMERIC, x);
  }

  public Value abs(Value x) {
    return unary("abs", "stablehlo.abs", DTypeClass.SIGNED, x);
  }

  /** -1, 0 or 1 (and NaN for NaN). */
  public Value sign(Value x) {
    return unary("sign", "stablehlo.sign", DTypeClass.SIGNED, x);
  }

  public Value exp(Value x) {
    return unary("exp", "stablehlo.exponential", DTypeClass.FLOATING, x);
  }

  public Value log(Value x) {
    return unary("log", "stablehlo.log", DTypeClass.FLOATING, x);
  }

  /** {@code log(1 + x)}, accurate near zero. */
  public Value log1p(Value x) {
    return unary("log1p", "stablehlo.log_plus_one", DTypeClass.FLOATING, x);
  }

  public Value tanh(Value x) {
    return unary("tanh", "stablehlo.tanh", DTypeClass.FLOATING, x);
  }

  /** The sigmoid {@code 1 / (1 + exp(-x))}. */
  public Value logistic(Value x) {
    return unary("logistic", "stablehlo.logistic", DTypeClass.FLOATING, x);
  }

  public Value sqrt(Value x) {
    return unary("sqrt", "stablehlo.sqrt", DTypeClass.FLOATING, x);
  }

  /** {@code 1 / sqrt(x)}. */
  public Value rsqrt(Value x) {
    return unary("rsqrt", "stablehlo.rsqrt", DTypeClass.FLOATING, x);
  }

  public Value floor(Value x) {
    return unary("floor", "stablehlo.floor", DTypeClass.FLOATING, x);
  }

  public Value ceil(Value x) {
    return unary("ceil", "stablehlo.ceil", DTypeClass.FLOATING, x);
  }

  /** Rounds half away from zero ({@code 2.5 -> 3}, {@code -2.5 -> -3}), like {@link Math#round} for positives. */
  public Value round(Value x) {
    return unary("round", "stablehlo.round_nearest_afz", DTypeClass.FLOATING, x);
  }

  /** Rounds half to even ({@code 2.5 -> 2}), like {@link Math#rint} and NumPy's {@code round}. */
  public Value roundNearestEven(Value x) {
    return unary("round_nearest_even", "stablehlo.round_nearest_even", DTypeClass.FLOATING, x);
  }

  /** Elementwise comparison (broadcasting), giving pred; floats compare by IEEE rules (NaN unequal). */
  public Value compare(Value a, ComparisonDirection direction, Value b) {
    String op = "compare";
    use(op, a, "lhs");
    use(op, b, "rhs");
    if (direction == null) {
      throw error(op, "comparison direction is null");
    }
    TensorType operands = ShapeInference.broadcastBinary(op + " " + direction, a.type(), b.type());
    DType d = operands.dtype();
    String compareType = d.isFloating() ? "FLOAT" : d.isSignedInteger() ? "SIGNED" : "UNSIGNED";
    String attributes = "comparison_direction = #stablehlo<comparison_direction " + direction
        + ">, compare_type = #stablehlo<comparison_type " + compareType + ">";
    return emit("stablehlo.compare",
        List.of(broadcastTo(a, operands.shape()), broadcastTo(b, operands.shape())),
        attributes, new TensorType(DType.PRED, operands.shape()));
  }

  public Value equal(Value a, Value b) {
    return compare(a, ComparisonDirection.EQ, b);
  }

  public Value notEqual(Value a, Value b) {
    return compare(a, ComparisonDirection.NE, b);
  }

  public Value less(Value a, Value b) {
    return compare(a, ComparisonDirection.LT, b);
  }

  public Value lessEqual(Value a, Value b) {
    return compare(a, ComparisonDirection.LE, b);
  }

  public Value greater(Value a, Value b) {
    return compare(a, ComparisonDirection.GT, b);
  }

  public Value greaterEqual(Value a, Value b) {
    return compare(a, ComparisonDirection.GE, b);
  }

  /** {@code predicate ? onTrue : onFalse} elementwise; the three operands broadcast together. */
  public Value select(Value predicate, Value onTrue, Value onFalse) {
    String op = "select";
    use(op, predicate, "predicate");
    use(op, onTrue, "on-true operand");
    use(op, onFalse, "on-false operand");
    if (predicate.dtype() != DType.PRED) {
      throw error(op, "predicate must be pred, got " + predicate.type() + " (with " + onTrue.type() + " and "
          + onFalse.type() + ")");
    }
    TensorType values = ShapeInference.broadcastBinary(op, onTrue.type(), onFalse.type());
    Shape shape = ShapeInference.broadcastShapes(op, predicate.type(), values);
    return emit("stablehlo.select",
        List.of(broadcastTo(predicate, shape), broadcastTo(onTrue, shape), broadcastTo(onFalse, shape)),
        null, new TensorType(values.dtype(), shape));
  }

  /** Converts elements to {@code dtype} (floats to integers truncate toward zero; nonzero to pred is true). */
  public Value convert(Value x, DType dtype) {
    use("convert", x, "operand");
    if (dtype == null) {
      throw error("convert", "target dtype is null for " + x.type());
    }
    if (dtype == x.dtype()) {
      return x;
    }
    return emit("stablehlo.convert", List.of(x), null, new TensorType(dtype, x.shape()));
  }

  // ---------------------------------------------------------------------------------------------
  // Shape manipulation

  /**
   * {@code broadcast_in_dim}: operand dimension {@code i} becomes result dimension {@code dims[i]}
   * (size 1 stretches); the result has {@code shape}.
   */
  public Value broadcastInDim(Value x, Shape shape, long... dims) {
    use("broadcast_in_dim", x, "operand");
    TensorType t = ShapeInference.broadcastInDim("broadcast_in_dim", x.type(), shape, dims);
    return emit("stablehlo.broadcast_in_dim", List.of(x),
        "broadcast_dimensions = " + StableHloWriter.i64Array(dims), t);
  }

  /** NumPy-style broadcast of {@code x} to {@code shape}; returns {@code x} when it already has that shape. */
  public Value broadcastTo(Value x, Shape shape) {
    use("broadcast", x, "operand");
    if (x.shape().equals(shape)) {
      return x;
    }
    long[] dims = ShapeInference.broadcastToDims("broadcast", x.type(), shape);
    return broadcastInDim(x, shape, dims);
  }

  /** Same elements, new dimensions (row-major); one dimension may be {@code -1}, inferred. */
  public Value reshape(Value x, long... dims) {
    use("reshape", x, "operand");
    TensorType t = ShapeInference.reshape("reshape", x.type(), dims);
    if (t.equals(x.type())) {
      return x;
    }
    return emit("stablehlo.reshape", List.of(x), null, t);
  }

  /** Result dimension {@code i} is operand dimension {@code permutation[i]}. */
  public Value transpose(Value x, long... permutation) {
    use("transpose", x, "operand");
    TensorType t = ShapeInference.transpose("transpose", x.type(), permutation);
    return emit("stablehlo.transpose", List.of(x), "permutation = " + StableHloWriter.i64Array(permutation), t);
  }

  /** A strided static slice: {@code [start, limit)} with step {@code strides} in every dimension. */
  public Value slice(Value x, long[] start, long[] limit, long[] strides) {
    use("slice", x, "operand");
    TensorType t = ShapeInference.slice("slice", x.type(), start, limit, strides);
    return emit("stablehlo.slice", List.of(x),
        "start_indices = " + StableHloWriter.i64Array(start) + ", limit_indices = " + StableHloWriter.i64Array(limit)
            + ", strides = " + StableHloWriter.i64Array(strides), t);
  }

  /** A static slice with unit strides. */
  public Value slice(Value x, long[] start, long[] limit) {
    long[] strides = new long[start.length];
    Arrays.fill(strides, 1);
    return slice(x, start, limit, strides);
  }

  /** {@code [start, limit)} along one axis, everything along the others. */
  public Value sliceAxis(Value x, long axis, long start, long limit) {
    use("slice", x, "operand");
    int a = ShapeInference.axis("slice", x.type(), axis);
    long[] starts = new long[x.rank()];
    long[] limits = x.shape().dims();
    starts[a] = start;
    limits[a] = limit;
    return slice(x, starts, limits);
  }

  /**
   * A slice of static {@code sizes} at run-time start indices (integer scalars, one per axis). Like XLA,
   * starts are clamped so the slice stays inside the operand.
   */
  public Value dynamicSlice(Value x, List<Value> startIndices, long... sizes) {
    String op = "dynamic_slice";
    use(op, x, "operand");
    useAll(op, startIndices);
    TensorType t = ShapeInference.dynamicSlice(op, x.type(), types(startIndices), sizes);
    List<Value> operands = new ArrayList<>();
    operands.add(x);
    operands.addAll(startIndices);
    return emit("stablehlo.dynamic_slice", operands, "slice_sizes = " + StableHloWriter.i64Array(sizes), t);
  }

  /** {@code x} with {@code update} written at run-time start indices (clamped to fit, as in XLA). */
  public Value dynamicUpdateSlice(Value x, Value update, List<Value> startIndices) {
    String op = "dynamic_update_slice";
    use(op, x, "operand");
    use(op, update, "update");
    useAll(op, startIndices);
    TensorType t = ShapeInference.dynamicUpdateSlice(op, x.type(), update.type(), types(startIndices));
    List<Value> operands = new ArrayList<>();
    operands.add(x);
    operands.add(update);
    operands.addAll(startIndices);
    return emit("stablehlo.dynamic_update_slice", operands, null, t);
  }

  /** Joins tensors along {@code axis}. */
  public Value concatenate(long axis, Value... xs) {
    String op = "concatenate";
    List<Value> list = Arrays.asList(xs);
    useAll(op, list);
    if (list.isEmpty()) {
      throw error(op, "needs at least one operand");
    }
    int a = ShapeInference.axis(op, xs[0].type(), axis);
    TensorType t = ShapeInference.concatenate(op, types(list), a);
    return emit("stablehlo.concatenate", list, "dimension = " + a + " : i64", t);
  }

  /** Pads with {@code padValue} (a scalar): {@code low}/{@code high} at the edges (negative crops), {@code interior} between elements. */
  public Value pad(Value x, Value padValue, long[] low, long[] high, long[] interior) {
    String op = "pad";
    use(op, x, "operand");
    use(op, padValue, "padding value");
    TensorType t = ShapeInference.pad(op, x.type(), padValue.type(), low, high, interior);
    return emit("stablehlo.pad", List.of(x, padValue),
        "edge_padding_low = " + StableHloWriter.i64Array(low) + ", edge_padding_high = " + StableHloWriter.i64Array(high)
            + ", interior_padding = " + StableHloWriter.i64Array(interior), t);
  }

  /** A tensor of {@code type} whose elements are their index along {@code axis}. */
  public Value iota(TensorType type, long axis) {
    checkOpen("iota");
    if (type == null || type.dtype() == DType.PRED) {
      throw error("iota", "needs a numeric tensor type, got " + type);
    }
    int a = ShapeInference.axis("iota", type, axis);
    return emit("stablehlo.iota", List.of(), "iota_dimension = " + a + " : i64", type);
  }

  // ---------------------------------------------------------------------------------------------
  // Contractions and reductions

  /** General tensor contraction; see {@link ShapeInference#dotGeneral} for the result's layout. */
  public Value dotGeneral(Value lhs, Value rhs, DotDimensions dimensions) {
    String op = "dot_general";
    use(op, lhs, "lhs");
    use(op, rhs, "rhs");
    if (dimensions == null) {
      throw error(op, "dimension numbers are null");
    }
    TensorType t = ShapeInference.dotGeneral(op, lhs.type(), rhs.type(), dimensions);
    StringBuilder dn = new StringBuilder("dot_dimension_numbers = #stablehlo.dot<");
    List<String> parts = new ArrayList<>();
    if (dimensions.lhsBatch().length > 0) {
      parts.add("lhs_batching_dimensions = " + StableHloWriter.list(dimensions.lhsBatch()));
      parts.add("rhs_batching_dimensions = " + StableHloWriter.list(dimensions.rhsBatch()));
    }
    parts.add("lhs_contracting_dimensions = " + StableHloWriter.list(dimensions.lhsContracting()));
    parts.add("rhs_contracting_dimensions = " + StableHloWriter.list(dimensions.rhsContracting()));
    dn.append(String.join(", ", parts)).append('>');
    return emit("stablehlo.dot_general", List.of(lhs, rhs), dn.toString(), t);
  }

  /**
   * Matrix product. With a rank-1 or rank-2 {@code rhs}, contracts the last axis of {@code lhs} (any rank
   * from 1) with the first of {@code rhs}; with {@code lhs} and {@code rhs} of equal rank 3 or more, the
   * leading axes are batch axes (equal sizes) and each batch is a matrix product.
   */
  public Value matmul(Value lhs, Value rhs) {
    String op = "matmul";
    use(op, lhs, "lhs");
    use(op, rhs, "rhs");
    int l = lhs.rank();
    int r = rhs.rank();
    if (l >= 1 && (r == 1 || r == 2)) {
      return dotGeneralAs(op, lhs, rhs, new DotDimensions(new long[0], new long[0], new long[] {l - 1}, new long[] {0}));
    }
    if (l == r && l >= 3) {
      long[] batch = new long[l - 2];
      for (int i = 0; i < batch.length; i++) {
        batch[i] = i;
      }
      return dotGeneralAs(op, lhs, rhs, new DotDimensions(batch, batch, new long[] {l - 1}, new long[] {r - 2}));
    }
    throw error(op, "needs lhs of rank >= 1 with rhs of rank 1 or 2, or lhs and rhs of equal rank >= 3; got "
        + lhs.type() + " and " + rhs.type());
  }

  private Value dotGeneralAs(String op, Value lhs, Value rhs, DotDimensions d) {
    // Re-run the rule under the caller's op name so errors say "matmul", not "dot_general".
    ShapeInference.dotGeneral(op, lhs.type(), rhs.type(), d);
    return dotGeneral(lhs, rhs, d);
  }

  /** Sums over {@code axes} (all axes when none are given), removing them. */
  public Value reduceSum(Value x, long... axes) {
    return reduce(x, ReduceKind.SUM, axes);
  }

  /** Maximum over {@code axes} (all when none given); with NaNs the result is XLA CPU's choice. Empty reductions give -inf / the type's minimum. */
  public Value reduceMax(Value x, long... axes) {
    return reduce(x, ReduceKind.MAX, axes);
  }

  /** Minimum over {@code axes} (all when none given); with NaNs the result is XLA CPU's choice. Empty reductions give +inf / the type's maximum. */
  public Value reduceMin(Value x, long... axes) {
    return reduce(x, ReduceKind.MIN, axes);
  }

  /** Reduces over {@code axes} (all axes when none are given) with {@code kind}, removing them. */
  public Value reduce(Value x, ReduceKind kind, long... axes) {
    String op = "reduce_" + (kind == null ? "?" : kind.name().toLowerCase(java.util.Locale.ROOT));
    use(op, x, "operand");
    if (kind == null) {
      throw error(op, "reduce kind is null");
    }
    if (axes.length == 0) {
      axes = new long[x.rank()];
      for (int i = 0; i < axes.length; i++) {
        axes[i] = i;
      }
    }
    int[] normalized = ShapeInference.axes(op, x.type(), axes);
    int[] sorted = normalized.clone();
    Arrays.sort(sorted);
    TensorType t = ShapeInference.reduce(op, x.type(), sorted);
    Value init = constant(reduceIdentity(kind, x.dtype()));
    TensorType scalar = new TensorType(x.dtype(), Shape.scalar());
    GraphBuilder region = new GraphBuilder(this);
    Value acc = region.blockArgument(scalar);
    Value next = region.blockArgument(scalar);
    Value combined = region.emit(kind.mlirOp(), List.of(acc, next), null, scalar);
    String regionText = region.closeRegion(List.of(acc, next), List.of(combined));
    long[] dims = Arrays.stream(sorted).asLongStream().toArray();
    return emitWithRegions("stablehlo.reduce", List.of(x, init), List.of(regionText),
        "dimensions = " + StableHloWriter.i64Array(dims), List.of(t)).get(0);
  }

  private static HostTensor reduceIdentity(ReduceKind kind, DType d) {
    if (kind == ReduceKind.SUM) {
      return scalarTensor(d, 0);
    }
    boolean max = kind == ReduceKind.MAX;
    if (d.isFloating()) {
      return scalarTensor(d, max ? Double.NEGATIVE_INFINITY : Double.POSITIVE_INFINITY);
    }
    if (d == DType.PRED) {
      return scalarTensor(d, max ? 0 : 1);
    }
    if (d.isUnsignedInteger()) {
      return HostTensor.ofLongs(d, new long[] {max ? 0 : -1L >>> (64 - 8 * d.byteSize())});
    }
    int bits = 8 * d.byteSize();
    long lowest = -(1L << (bits - 1));
    return HostTensor.ofLongs(d, new long[] {max ? lowest : -(lowest + 1)});
  }

  /**
   * Index (s32) of the largest element along {@code axis}, the first one on ties; NaN counts as the
   * largest, as in NumPy and JAX.
   */
  public Value argmax(Value x, long axis) {
    String op = "argmax";
    use(op, x, "operand");
    ShapeInference.checkDType(op, DTypeClass.NUMERIC, x.type());
    int a = ShapeInference.axis(op, x.type(), axis);
    if (x.shape().dim(a) == 0) {
      throw error(op, "axis " + axis + " of " + x.type() + " is empty");
    }
    // A variadic reduce over (value, index) pairs, as JAX lowers argmax: XLA's CPU max reduction does
    // not reliably propagate NaN, so NaN-wins and first-index-on-ties are spelled out in the combiner.
    TensorType valueScalar = new TensorType(x.dtype(), Shape.scalar());
    TensorType indexScalar = new TensorType(DType.S32, Shape.scalar());
    Value index = iota(new TensorType(DType.S32, x.shape()), a);
    Value initValue = constant(reduceIdentity(ReduceKind.MAX, x.dtype()));
    Value initIndex = constant(0);
    GraphBuilder r = new GraphBuilder(this);
    Value accValue = r.blockArgument(valueScalar);
    Value accIndex = r.blockArgument(indexScalar);
    Value opValue = r.blockArgument(valueScalar);
    Value opIndex = r.blockArgument(indexScalar);
    Value pickValue = r.greater(opValue, accValue);
    Value same = r.equal(opValue, accValue);
    if (x.dtype().isFloating()) {
      Value opNaN = r.notEqual(opValue, opValue);
      Value accNaN = r.notEqual(accValue, accValue);
      pickValue = r.or(pickValue, r.and(opNaN, r.not(accNaN)));
      same = r.or(same, r.and(opNaN, accNaN));
    }
    Value pickIndex = r.or(pickValue, r.and(same, r.less(opIndex, accIndex)));
    List<Value> combined = List.of(r.select(pickValue, opValue, accValue), r.select(pickIndex, opIndex, accIndex));
    String regionText = r.closeRegion(List.of(accValue, accIndex, opValue, opIndex), combined);
    TensorType reduced = ShapeInference.reduce(op, x.type(), new int[] {a});
    List<Value> results = emitWithRegions("stablehlo.reduce", List.of(x, index, initValue, initIndex),
        List.of(regionText), "dimensions = " + StableHloWriter.i64Array(new long[] {a}),
        List.of(reduced, new TensorType(DType.S32, reduced.shape())));
    return results.get(1);
  }

  // ---------------------------------------------------------------------------------------------
  // Control flow

  /**
   * A while loop over carried values. {@code condition} gets a region builder and the carried values and
   * returns a pred scalar; {@code body} returns the next carried values, which must keep their types.
   * Returns the values after the last iteration.
   */
  public List<Value> whileLoop(List<Value> initial,
      BiFunction<GraphBuilder, List<Value>, Value> condition,
      BiFunction<GraphBuilder, List<Value>, List<Value>> body) {
    String op = "while";
    checkOpen(op);
    useAll(op, initial);
    if (initial.isEmpty() || condition == null || body == null) {
      throw error(op, "needs at least one carried value, a condition and a body");
    }
    List<TensorType> carried = types(initial);

    GraphBuilder condRegion = new GraphBuilder(this);
    List<Value> condArgs = condRegion.blockArguments(carried);
    Value predicate = condition.apply(condRegion, condArgs);
    condRegion.use(op, predicate, "condition result");
    if (predicate.dtype() != DType.PRED || predicate.rank() != 0) {
      throw error(op, "condition must return a pred scalar, got " + predicate.type());
    }
    String condText = condRegion.closeRegion(condArgs, List.of(predicate));

    GraphBuilder bodyRegion = new GraphBuilder(this);
    List<Value> bodyArgs = bodyRegion.blockArguments(carried);
    List<Value> next = body.apply(bodyRegion, bodyArgs);
    if (next == null || next.size() != carried.size()) {
      throw error(op, "body must return " + carried.size() + " value(s) " + carried + ", got "
          + (next == null ? "null" : next.size() + " " + types(next)));
    }
    bodyRegion.useAll(op, next);
    for (int i = 0; i < carried.size(); i++) {
      if (!next.get(i).type().equals(carried.get(i))) {
        throw error(op, "body result " + i + " has type " + next.get(i).type() + " but the carried value has type "
            + carried.get(i) + "; a loop must keep the types of its carried values");
      }
    }
    String bodyText = bodyRegion.closeRegion(bodyArgs, next);
    return emitWithRegions("stablehlo.while", initial, List.of(condText, bodyText), null, carried);
  }

  /**
   * A conditional: runs {@code onTrue} or {@code onFalse} (each given a region builder) depending on the
   * pred scalar {@code predicate}; both branches must return values of the same types.
   */
  public List<Value> ifThenElse(Value predicate, Function<GraphBuilder, List<Value>> onTrue,
      Function<GraphBuilder, List<Value>> onFalse) {
    String op = "if";
    use(op, predicate, "predicate");
    if (predicate.dtype() != DType.PRED || predicate.rank() != 0) {
      throw error(op, "predicate must be a pred scalar, got " + predicate.type());
    }
    if (onTrue == null || onFalse == null) {
      throw error(op, "needs both branches");
    }
    GraphBuilder trueRegion = new GraphBuilder(this);
    List<Value> trueResults = trueRegion.branchResults(op, "true branch", onTrue.apply(trueRegion));
    GraphBuilder falseRegion = new GraphBuilder(this);
    List<Value> falseResults = falseRegion.branchResults(op, "false branch", onFalse.apply(falseRegion));
    if (!types(trueResults).equals(types(falseResults))) {
      throw error(op, "branches must return the same types, got " + types(trueResults) + " and "
          + types(falseResults));
    }
    String trueText = trueRegion.closeRegion(List.of(), trueResults);
    String falseText = falseRegion.closeRegion(List.of(), falseResults);
    return emitWithRegions("stablehlo.if", List.of(predicate), List.of(trueText, falseText), null,
        types(trueResults));
  }

  private List<Value> branchResults(String op, String branch, List<Value> results) {
    if (results == null || results.isEmpty()) {
      throw error(op, branch + " must return at least one value");
    }
    useAll(op, results);
    return results;
  }

  // ---------------------------------------------------------------------------------------------
  // Host callbacks

  /**
   * Calls Java in the middle of the program: {@code callback}'s function gets the values of {@code
   * inputs} (none is fine) and its static argument, and returns tensors of its output template, which
   * become this node's results. The call is effectful: it always runs, in program order, even when its
   * results are unused.
   */
  public List<Value> hostCall(HostCallback callback, Value... inputs) {
    return hostCall(callback, true, Arrays.asList(inputs));
  }

  /**
   * Like {@link #hostCall}, but in place: for each entry {@code i -> o} of {@code inputOutputAliases},
   * output {@code o} is written over input {@code i}'s buffer (XLA's {@code output_operand_aliases}, as
   * {@code jax.ffi.ffi_call}'s {@code input_output_aliases}). XLA then gives that output no buffer of its
   * own, and a value carried through a loop needs no copy per call; where the input is still used after
   * the call, XLA copies it first, so the program computes the same values either way. An input and the
   * output it becomes must have the same type. The callback's function does not change: it returns its
   * outputs, and returning a borrowed input ({@code CallbackOptions.withBorrowedInputs}) as the output
   * written over it moves no bytes.
   */
  public List<Value> hostCallInPlace(HostCallback callback, Map<Integer, Integer> inputOutputAliases, Value... inputs) {
    String op = "host_call_in_place";
    if (callback == null || inputOutputAliases == null || inputOutputAliases.isEmpty()) {
      throw error(op, "needs a callback and at least one input -> output alias, got " + inputOutputAliases);
    }
    List<TensorType> outputs = callback.outputTemplate();
    Map<Integer, Integer> inputOf = new TreeMap<>(); // output -> input
    for (Map.Entry<Integer, Integer> alias : new TreeMap<>(inputOutputAliases).entrySet()) {
      int in = alias.getKey();
      Integer out = alias.getValue();
      if (in < 0 || in >= inputs.length || out == null || out < 0 || out >= outputs.size()) {
        throw error(op, "alias " + in + " -> " + out + " needs an input index below " + inputs.length
            + " and an output index below " + outputs.size() + " (callback '" + callback.name() + "')");
      }
      Integer other = inputOf.putIfAbsent(out, in);
      if (other != null) {
        throw error(op, "output " + out + " of callback '" + callback.name() + "' is aliased to inputs " + other
            + " and " + in + "; an output can be written over one input only");
      }
      TensorType inType = inputs[in] == null ? null : inputs[in].type();
      if (!outputs.get(out).equals(inType)) {
        throw error(op, "input " + in + " is " + inType + " but output " + out + " of callback '" + callback.name()
            + "', written over it, is " + outputs.get(out) + "; an input and its output must have the same type");
      }
    }
    StringBuilder aliases = new StringBuilder();
    for (Map.Entry<Integer, Integer> alias : inputOf.entrySet()) {
      aliases.append(aliases.length() == 0 ? "" : ", ")
          .append("#stablehlo.output_operand_alias<output_tuple_indices = [")
          .append(outputs.size() == 1 ? "" : alias.getKey())
          .append("], operand_index = ").append(alias.getValue()).append(", operand_tuple_indices = []>");
    }
    return hostCall(callback, true, Arrays.asList(inputs), null, "output_operand_aliases = [" + aliases + "]");
  }

  /**
   * Like {@link #hostCall}, but pure, as {@code jax.pure_callback}: XLA may drop the call when its
   * results are unused, or merge identical calls.
   */
  public List<Value> pureHostCall(HostCallback callback, Value... inputs) {
    return hostCall(callback, false, Arrays.asList(inputs));
  }

  /**
   * A pure host call that carries its graph equivalent: {@code graphEquivalent} builds, on a region
   * builder given the call's inputs, the values the callback computes. The compiled program calls Java as
   * {@link #pureHostCall} does; a segmented run asked to inline callbacks ({@code
   * SegmentationOptions.inlineCallbacks}) computes the equivalent on the device instead, and the stage
   * boundary disappears. The equivalent must return values of the callback's output template.
   */
  public List<Value> pureHostCall(HostCallback callback,
      BiFunction<GraphBuilder, List<Value>, List<Value>> graphEquivalent, Value... inputs) {
    String op = "host_call";
    if (callback == null || graphEquivalent == null) {
      throw error(op, "callback and graph equivalent must not be null");
    }
    List<Value> in = Arrays.asList(inputs);
    useAll(op, in);
    GraphBuilder region = new GraphBuilder(this);
    List<Value> args = region.blockArguments(types(in));
    List<Value> results = graphEquivalent.apply(region, args);
    if (results == null || !types(results).equals(callback.outputTemplate())) {
      throw error(op, "the graph equivalent of callback '" + callback.name() + "' must return "
          + callback.outputTemplate() + ", got " + (results == null ? "null" : types(results)));
    }
    region.useAll(op, results);
    region.closed = true;
    Op.Region equivalent = new Op.Region(List.copyOf(args), List.copyOf(region.ops), List.copyOf(results));
    return hostCall(callback, false, in, equivalent);
  }

  private List<Value> hostCall(HostCallback callback, boolean effectful, List<Value> inputs) {
    return hostCall(callback, effectful, inputs, null);
  }

  private List<Value> hostCall(HostCallback callback, boolean effectful, List<Value> inputs, Op.Region equivalent) {
    return hostCall(callback, effectful, inputs, equivalent, null);
  }

  private List<Value> hostCall(HostCallback callback, boolean effectful, List<Value> inputs, Op.Region equivalent,
      String extraAttributes) {
    String op = "host_call";
    if (callback == null) {
      throw error(op, "callback is null");
    }
    useAll(op, inputs);
    HostCallback known = hostCallbacks.putIfAbsent(callback.name(), callback);
    if (known != null && !known.equals(callback)) {
      throw error(op, "the graph already calls another callback named '" + callback.name() + "'");
    }
    String attributes = "api_version = 4 : i32, backend_config = {callback = \"" + callback.name()
        + "\"}, call_target_name = \"" + HostCallback.TARGET + "\", has_side_effect = " + effectful
        + (extraAttributes == null ? "" : ", " + extraAttributes);
    return emitWithRegions("stablehlo.custom_call", inputs, List.of(), attributes, callback.outputTemplate(),
        callback, equivalent);
  }

  // ---------------------------------------------------------------------------------------------
  // Finishing

  /** The program returning {@code outputs} (several outputs become a tuple PJRT flattens). */
  public Graph build(Value... outputs) {
    return build(Arrays.asList(outputs));
  }

  /** The program returning {@code outputs}, in order. */
  public Graph build(List<Value> outputs) {
    String op = "build";
    if (parent != null) {
      throw error(op, "only the top-level builder builds a program; a region returns its values from its lambda");
    }
    if (outputs == null || outputs.isEmpty()) {
      throw error(op, "a program needs at least one output");
    }
    useAll(op, outputs);
    List<TensorType> outTypes = types(outputs);
    StringBuilder sb = new StringBuilder();
    sb.append("module @").append(name).append(" {\n");
    sb.append("  func.func public @main(");
    for (int i = 0; i < parameters.size(); i++) {
      Value p = parameters.get(i);
      sb.append(i > 0 ? ", " : "").append(p.ssaName()).append(": ").append(p.type().mlir());
    }
    sb.append(") -> (").append(StableHloWriter.types(outTypes)).append(") {\n");
    sb.append(body);
    sb.append(indent).append(StableHloWriter.terminator("func.return", outputs)).append('\n');
    sb.append("  }\n}\n");
    return new Graph(name, types(parameters), outTypes, sb.toString(), List.copyOf(hostCallbacks.values()),
        new GraphBody(List.copyOf(parameters), List.copyOf(ops), List.copyOf(outputs)));
  }

  // ---------------------------------------------------------------------------------------------
  // Internals

  private Value binary(String op, String mlirOp, DTypeClass accepted, Value a, Value b) {
    use(op, a, "lhs");
    use(op, b, "rhs");
    TensorType t = ShapeInference.broadcastBinary(op, a.type(), b.type());
    if (!accepted.accepts(t.dtype())) {
      throw error(op, "needs " + accepted.description() + ", got " + a.type() + " and " + b.type());
    }
    return emit(mlirOp, List.of(broadcastTo(a, t.shape()), broadcastTo(b, t.shape())), null, t);
  }

  private Value unary(String op, String mlirOp, DTypeClass accepted, Value x) {
    use(op, x, "operand");
    ShapeInference.checkDType(op, accepted, x.type());
    return emit(mlirOp, List.of(x), null, x.type());
  }

  private Value emit(String mlirOp, List<Value> operands, String attributes, TensorType result) {
    checkOpen(mlirOp);
    String ssa = fresh();
    body.append(indent).append(StableHloWriter.op(ssa, mlirOp, operands, List.of(), attributes, List.of(result)))
        .append('\n');
    Value v = new Value(this, ssa, result);
    ops.add(new Op(mlirOp, List.copyOf(operands), List.of(), attributes, List.of(v), null, null));
    return v;
  }

  private List<Value> emitWithRegions(String mlirOp, List<Value> operands, List<String> regions, String attributes,
      List<TensorType> results) {
    return emitWithRegions(mlirOp, operands, regions, attributes, results, null, null);
  }

  private List<Value> emitWithRegions(String mlirOp, List<Value> operands, List<String> regions, String attributes,
      List<TensorType> results, HostCallback callback, Op.Region equivalent) {
    checkOpen(mlirOp);
    String ssa = fresh();
    String declared = results.size() == 1 ? ssa : ssa + ":" + results.size();
    body.append(indent).append(StableHloWriter.op(declared, mlirOp, operands, regions, attributes, results))
        .append('\n');
    List<Value> out = new ArrayList<>(results.size());
    for (int i = 0; i < results.size(); i++) {
      out.add(new Value(this, results.size() == 1 ? ssa : ssa + "#" + i, results.get(i)));
    }
    List<Op.Region> recorded = List.copyOf(closedRegions);
    closedRegions.clear();
    ops.add(new Op(mlirOp, List.copyOf(operands), recorded, attributes, List.copyOf(out), callback, equivalent));
    return out;
  }

  private String fresh() {
    return "%v" + counter[0]++;
  }

  private Value blockArgument(TensorType type) {
    return new Value(this, fresh(), type);
  }

  private List<Value> blockArguments(List<TensorType> types) {
    List<Value> out = new ArrayList<>(types.size());
    for (TensorType t : types) {
      out.add(blockArgument(t));
    }
    return out;
  }

  /** Ends a region scope: its text, terminated by {@code stablehlo.return}; the scope takes no more ops. */
  private String closeRegion(List<Value> arguments, List<Value> results) {
    body.append(indent).append(StableHloWriter.terminator("stablehlo.return", results)).append('\n');
    closed = true;
    parent.closedRegions.add(new Op.Region(List.copyOf(arguments), List.copyOf(ops), List.copyOf(results)));
    return StableHloWriter.region(arguments, body.toString(), parent.indent + "  ");
  }

  private void checkOpen(String op) {
    if (closed) {
      throw error(op, "this region's builder is finished; build ops on the builder passed to the current lambda");
    }
  }

  /** Checks that {@code v} can be used here: not null, and from this scope or one enclosing it. */
  void use(String op, Value v, String what) {
    checkOpen(op);
    if (v == null) {
      throw error(op, what + " is null");
    }
    for (GraphBuilder s = this; s != null; s = s.parent) {
      if (v.scope() == s) {
        return;
      }
    }
    throw error(op, what + " " + v + " belongs to another graph, or to a loop body or branch that does not "
        + "enclose this scope");
  }

  private void useAll(String op, List<Value> values) {
    if (values == null) {
      throw error(op, "operand list is null");
    }
    for (int i = 0; i < values.size(); i++) {
      use(op, values.get(i), "operand " + i);
    }
  }

  private static List<TensorType> types(List<Value> values) {
    return values.stream().map(Value::type).toList();
  }
}
