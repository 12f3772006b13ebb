package dev.xlaactors.graph;

import dev.xlaactors.runtime.HostCallback;
import java.util.List;

/**
 * One recorded operation of a graph, kept next to its emitted text so that the graph can be cut into
 * stages and re-emitted ({@link Segmenter}). Package-private: the text is the public form.
 *
 * @param mlirOp the operation name, e.g. {@code stablehlo.add}
 * @param operands the operand values, in order
 * @param regions the nested regions (loop condition and body, branches, reducers), in order
 * @param attributes the attribute dictionary's contents, or null
 * @param results the values the operation defines
 * @param callback the host callback this op calls, or null when it is not a host call
 * @param equivalent for a host call, the graph equivalent of the callback (a region whose arguments are
 *     the call's inputs and whose results replace the call's), or null
 */
record Op(
    String mlirOp,
    List<Value> operands,
    List<Region> regions,
    String attributes,
    List<Value> results,
    HostCallback callback,
    Region equivalent) {

  /** A region: its block arguments, its operations and the values its terminator returns. */
  record Region(List<Value> arguments, List<Op> ops, List<Value> results) {}

  boolean isHostCall() {
    return callback != null;
  }
}
