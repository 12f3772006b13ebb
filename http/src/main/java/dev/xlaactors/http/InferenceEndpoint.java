package dev.xlaactors.http;

import dev.xlaactors.actors.serve.BatchedModel;
import dev.xlaactors.runtime.TensorType;
import java.util.List;
import java.util.Objects;

/**
 * A model served at {@code POST /v2/models/<name>/infer} (the Open Inference Protocol): where its rows
 * are computed ({@link TensorInference}: a model server of this JVM, or the cluster node holding the model),
 * the per-request input types requests are checked against (the model's inputs without the batch
 * dimension), and what is known of its outputs.
 *
 * @param name the model's name in the URL
 * @param inference where its rows are computed
 * @param inputNames the names of the per-request inputs, in order (a {@code jax.export} artifact's input
 *     paths, or plain names)
 * @param inputTypes their types
 * @param outputTypes the types of a request's outputs (without the batch dimension); empty when not known
 * @param outputPaths the outputs' paths in the exported function's result ({@code [0]}, {@code ['y']}, the
 *     empty string for a single array), one per output; empty when not known (then outputs are named by
 *     position). {@link OpenInferenceNames} makes the protocol's names of both.
 */
public record InferenceEndpoint(String name, TensorInference inference, List<String> inputNames, List<TensorType> inputTypes,
    List<TensorType> outputTypes, List<String> outputPaths) {
  public InferenceEndpoint {
    Objects.requireNonNull(inference, "inference");
    inputNames = List.copyOf(inputNames);
    inputTypes = List.copyOf(inputTypes);
    outputTypes = List.copyOf(outputTypes);
    outputPaths = List.copyOf(outputPaths);
    if (inputNames.size() != inputTypes.size()) {
      throw new IllegalArgumentException(inputNames.size() + " input names for " + inputTypes.size() + " input types");
    }
    if (!outputPaths.isEmpty() && outputPaths.size() != outputTypes.size()) {
      throw new IllegalArgumentException("model '" + name + "': " + outputPaths.size() + " output paths " + outputPaths + " for "
          + outputTypes.size() + " outputs");
    }
  }

  /** An endpoint whose outputs are not known in advance (named by position). */
  public InferenceEndpoint(String name, TensorInference inference, List<String> inputNames, List<TensorType> inputTypes) {
    this(name, inference, inputNames, inputTypes, List.of(), List.of());
  }

  /**
   * The endpoint of {@code model} (named as the model) computed by {@code inference} (usually {@link
   * TensorInference#of} its model server); outputs named by position.
   */
  public static InferenceEndpoint of(BatchedModel model, TensorInference inference) {
    return new InferenceEndpoint(model.name(), inference, model.inputNames(), model.requestInputTypes(), model.requestOutputTypes(), List.of());
  }

  /**
   * This endpoint with its outputs known by {@code paths} (a {@code jax.export} artifact's {@code
   * outputPaths()}, one per output): the Open Inference Protocol names them after these.
   */
  public InferenceEndpoint withOutputPaths(List<String> paths) {
    return new InferenceEndpoint(name, inference, inputNames, inputTypes, outputTypes, paths);
  }
}
