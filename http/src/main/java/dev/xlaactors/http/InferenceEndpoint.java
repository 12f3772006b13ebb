package dev.xlaactors.http;

import dev.xlaactors.actors.serve.BatchedModel;
import dev.xlaactors.actors.serve.ModelServer;
import dev.xlaactors.runtime.TensorType;
import java.util.List;
import org.apache.pekko.actor.typed.ActorRef;

/**
 * A model served at {@code POST /v1/models/<name>/infer}: its {@link ModelServer} and the per-request
 * input types requests are checked against (the model's inputs without the batch dimension).
 *
 * @param name the model's name in the URL
 * @param server the model server
 * @param inputNames the names of the per-request inputs, in order
 * @param inputTypes their types
 */
public record InferenceEndpoint(String name, ActorRef<ModelServer.Command> server, List<String> inputNames, List<TensorType> inputTypes) {
  public InferenceEndpoint {
    inputNames = List.copyOf(inputNames);
    inputTypes = List.copyOf(inputTypes);
    if (inputNames.size() != inputTypes.size()) {
      throw new IllegalArgumentException(inputNames.size() + " input names for " + inputTypes.size() + " input types");
    }
  }

  /** The endpoint of {@code model} (named as the model) served by {@code server}. */
  public static InferenceEndpoint of(BatchedModel model, ActorRef<ModelServer.Command> server) {
    return new InferenceEndpoint(model.name(), server, model.inputNames(), model.requestInputTypes());
  }
}
