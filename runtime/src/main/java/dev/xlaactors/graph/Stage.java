package dev.xlaactors.graph;

import dev.xlaactors.runtime.TensorType;
import java.util.List;

/**
 * One pure stage of a segmented graph: a callback-free StableHLO program that takes exactly the values
 * it needs (graph parameters, outputs of earlier stages, callback results, loop-carried values) and
 * returns exactly the values that later stages, callbacks, loop conditions or the graph's outputs use.
 *
 * @param index the stage's number, in program order (nested stages of loops and branches included)
 * @param where where the stage sits, e.g. {@code top} or {@code while#0.body}
 * @param inputTypes the types of the stage's parameters
 * @param outputTypes the types of its results
 * @param stablehlo the program text
 */
public record Stage(int index, String where, List<TensorType> inputTypes, List<TensorType> outputTypes,
    String stablehlo) {
  public Stage {
    inputTypes = List.copyOf(inputTypes);
    outputTypes = List.copyOf(outputTypes);
  }

  @Override
  public String toString() {
    return "stage " + index + " (" + where + "): " + inputTypes + " -> " + outputTypes;
  }
}
