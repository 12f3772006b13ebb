package dev.xlaactors.graph;

import java.util.List;

/**
 * The operations of a built {@link Graph}, recorded as the builder emitted them: what segmentation cuts
 * into stages. Opaque outside this package.
 */
public final class GraphBody {
  private final List<Value> parameters;
  private final List<Op> ops;
  private final List<Value> outputs;

  GraphBody(List<Value> parameters, List<Op> ops, List<Value> outputs) {
    this.parameters = parameters;
    this.ops = ops;
    this.outputs = outputs;
  }

  List<Value> parameters() {
    return parameters;
  }

  List<Op> ops() {
    return ops;
  }

  List<Value> outputs() {
    return outputs;
  }

  /** The number of top-level operations. */
  public int size() {
    return ops.size();
  }

  @Override
  public String toString() {
    return "GraphBody(" + ops.size() + " ops)";
  }
}
