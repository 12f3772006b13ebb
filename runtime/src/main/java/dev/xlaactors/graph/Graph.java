package dev.xlaactors.graph;

import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.util.List;

/**
 * A finished program: StableHLO text whose {@code @main} takes {@link #parameterTypes()} and returns
 * {@link #outputTypes()} (several outputs come back as a flattened tuple).
 *
 * @param name the module name
 * @param parameterTypes the types of {@code @main}'s parameters, in declaration order
 * @param outputTypes the types of {@code @main}'s results, in order
 * @param stablehlo the program text, ready for {@link XlaClient#compile(String)}
 * @param hostCallbacks the host callbacks the program calls, to register before running it
 * @param body the recorded operations, which {@link Segmenter} cuts into stages (null for a graph made
 *     from text only, which cannot be segmented)
 */
public record Graph(
    String name,
    List<TensorType> parameterTypes,
    List<TensorType> outputTypes,
    String stablehlo,
    List<HostCallback> hostCallbacks,
    GraphBody body) {
  public Graph {
    parameterTypes = List.copyOf(parameterTypes);
    outputTypes = List.copyOf(outputTypes);
    hostCallbacks = List.copyOf(hostCallbacks);
  }

  /** A graph from text alone (no recorded operations: it runs fused only). */
  public Graph(String name, List<TensorType> parameterTypes, List<TensorType> outputTypes, String stablehlo,
      List<HostCallback> hostCallbacks) {
    this(name, parameterTypes, outputTypes, stablehlo, hostCallbacks, null);
  }

  /** Cuts the graph at its host calls into stages (see {@link Segmenter}). */
  public SegmentedGraph segment(SegmentationOptions options) {
    return Segmenter.segment(this, options);
  }

  /** Compiles the program on {@code client} (through its compile cache); the caller closes the result. */
  public Executable compile(XlaClient client) {
    return client.compile(stablehlo);
  }

  @Override
  public String toString() {
    return "Graph(" + name + ": " + parameterTypes + " -> " + outputTypes + ")";
  }
}
