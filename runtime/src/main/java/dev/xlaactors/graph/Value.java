package dev.xlaactors.graph;

import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Shape;
import dev.xlaactors.runtime.TensorType;

/**
 * An immutable node of a graph: the SSA value one operation produced, with its element type and shape
 * known from the moment it is built. A value belongs to the {@link GraphBuilder} scope that made it, and
 * can be used there and inside the regions (loop bodies, branches) nested in that scope.
 */
public final class Value {
  private final GraphBuilder scope;
  private final String ssaName;
  private final TensorType type;

  Value(GraphBuilder scope, String ssaName, TensorType type) {
    this.scope = scope;
    this.ssaName = ssaName;
    this.type = type;
  }

  /** The element type and shape. */
  public TensorType type() {
    return type;
  }

  public DType dtype() {
    return type.dtype();
  }

  public Shape shape() {
    return type.shape();
  }

  public int rank() {
    return type.shape().rank();
  }

  /** The builder scope this value was made in. */
  public GraphBuilder scope() {
    return scope;
  }

  /** The SSA name in the emitted text, e.g. {@code %v3} or {@code %v7#1}. */
  String ssaName() {
    return ssaName;
  }

  /** {@code %v3: f32[2,3]}. */
  @Override
  public String toString() {
    return ssaName + ": " + type;
  }
}
