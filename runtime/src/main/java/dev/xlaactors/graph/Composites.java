package dev.xlaactors.graph;

import static dev.xlaactors.graph.ShapeInference.error;

import dev.xlaactors.graph.ShapeInference.DTypeClass;
import dev.xlaactors.runtime.Shape;

/**
 * Neural-network building blocks composed from {@link GraphBuilder} ops, written to match what
 * {@code jax.nn} and {@code jax.numpy} compute. Each takes the builder to build on (the top level or a
 * region's) and floating-point operands.
 */
public final class Composites {
  private Composites() {}

  /** Mean over {@code axes} (all axes when none are given), removing them. */
  public static Value mean(GraphBuilder b, Value x, long... axes) {
    checkFloating(b, "mean", x);
    Value sum = b.reduceSum(x, axes);
    return b.divide(sum, b.constant(x.dtype(), reducedCount(x, axes)));
  }

  /** Population variance ({@code ddof = 0}, as {@code jnp.var}) over {@code axes}, removing them. */
  public static Value variance(GraphBuilder b, Value x, long... axes) {
    checkFloating(b, "variance", x);
    Value centered = b.subtract(x, keepDims(b, mean(b, x, axes), x, axes));
    return mean(b, b.multiply(centered, centered), axes);
  }

  /** {@code exp(x - max) / sum(exp(x - max))} along {@code axis}, stable for large inputs (as {@code jax.nn.softmax}). */
  public static Value softmax(GraphBuilder b, Value x, long axis) {
    checkFloating(b, "softmax", x);
    Value max = keepDims(b, b.reduceMax(x, axis), x, axis);
    Value e = b.exp(b.subtract(x, max));
    return b.divide(e, keepDims(b, b.reduceSum(e, axis), x, axis));
  }

  /**
   * Layer normalisation over the last axis: {@code (x - mean) / sqrt(var + epsilon) * scale + offset},
   * where {@code scale} and {@code offset} broadcast against {@code x} (usually shaped like its last axis).
   */
  public static Value layerNorm(GraphBuilder b, Value x, Value scale, Value offset, double epsilon) {
    checkFloating(b, "layer_norm", x);
    Value mean = keepDims(b, mean(b, x, -1), x, -1);
    Value centered = b.subtract(x, mean);
    Value var = keepDims(b, mean(b, b.multiply(centered, centered), -1), x, -1);
    Value normalized = b.multiply(centered, b.rsqrt(b.add(var, b.constant(x.dtype(), epsilon))));
    return b.add(b.multiply(normalized, scale), offset);
  }

  /**
   * GELU in the tanh form {@code x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))}, which is what
   * {@code jax.nn.gelu} computes by default ({@code approximate=True}). The exact erf form is not offered:
   * StableHLO has no erf op (JAX emits {@code chlo.erf}).
   */
  public static Value gelu(GraphBuilder b, Value x) {
    checkFloating(b, "gelu", x);
    Value cube = b.multiply(b.multiply(x, x), x);
    Value inner = b.multiply(b.constant(x.dtype(), Math.sqrt(2 / Math.PI)),
        b.add(x, b.multiply(b.constant(x.dtype(), 0.044715), cube)));
    Value half = b.multiply(b.constant(x.dtype(), 0.5), x);
    return b.multiply(half, b.add(b.constant(x.dtype(), 1), b.tanh(inner)));
  }

  /** {@code max(x, 0)}. */
  public static Value relu(GraphBuilder b, Value x) {
    b.use("relu", x, "operand");
    return b.max(x, b.constant(x.dtype(), 0));
  }

  /**
   * Broadcasts a reduction's result back to {@code like}'s shape, re-inserting the reduced {@code axes}
   * (all axes when none are given), for the {@code keepdims=True} arithmetic of normalisations.
   */
  public static Value keepDims(GraphBuilder b, Value reduced, Value like, long... axes) {
    boolean[] reducedAxis = new boolean[like.rank()];
    if (axes.length == 0) {
      java.util.Arrays.fill(reducedAxis, true);
    }
    for (int a : ShapeInference.axes("keep_dims", like.type(), axes)) {
      reducedAxis[a] = true;
    }
    long[] dims = new long[reduced.rank()];
    int k = 0;
    for (int i = 0; i < like.rank(); i++) {
      if (!reducedAxis[i]) {
        if (k == dims.length) {
          throw error("keep_dims", reduced.type() + " is not " + like.type() + " reduced over the given axes");
        }
        dims[k++] = i;
      }
    }
    if (k != dims.length) {
      throw error("keep_dims", reduced.type() + " is not " + like.type() + " reduced over the given axes");
    }
    return b.broadcastInDim(reduced, Shape.of(like.shape().dims()), dims);
  }

  private static long reducedCount(Value x, long... axes) {
    if (axes.length == 0) {
      return x.shape().elementCount();
    }
    long n = 1;
    for (int a : ShapeInference.axes("mean", x.type(), axes)) {
      n *= x.shape().dim(a);
    }
    return n;
  }

  private static void checkFloating(GraphBuilder b, String op, Value x) {
    b.use(op, x, "operand");
    ShapeInference.checkDType(op, DTypeClass.FLOATING, x.type());
  }
}
