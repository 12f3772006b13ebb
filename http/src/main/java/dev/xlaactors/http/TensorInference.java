package dev.xlaactors.http;

import dev.xlaactors.actors.serve.ModelServer;
import dev.xlaactors.runtime.HostTensor;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletionStage;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;

/**
 * Where the rows of a tensor inference request ({@code POST /v2/models/<m>/infer}) are computed. The routes
 * only check, split and answer requests; this computes each row. Two kinds exist: a {@link ModelServer} in
 * this JVM ({@link #of}: dynamic batching with everyone else's rows), and, for {@code bin/xla-actors serve
 * --cluster}, the node of a Pekko cluster that holds the model (the command line's cluster inference, over
 * Cluster Sharding): the routes cannot tell them apart, so the protocol is the same from every node.
 *
 * <p>Implementations are thread-safe: the routes call them from any thread.
 */
public interface TensorInference {
  /**
   * Computes one row: {@code row} holds one tensor per input, without the batch dimension (the caller keeps
   * it and closes it once the stage has completed). The stage completes with the row's outputs, owned by the
   * caller, or fails with an {@code XlaException} whose message names the model and what happened (the
   * routes map its code to the HTTP status). {@code requestId} names the row for {@link #cancel}; {@code
   * timeout} is its deadline (null: the model's {@code xla-actors.actors.serve} default). Never hangs past
   * the deadline by more than the implementation's own margin.
   */
  CompletionStage<ModelServer.Prediction> infer(String requestId, List<HostTensor> row, Duration timeout);

  /**
   * Gives up row {@code requestId}: its stage fails with {@code CANCELLED} unless it is answered already
   * (then nothing happens). Whether the computation itself stops depends on where it runs.
   */
  void cancel(String requestId, String reason);

  /**
   * Completes with null when rows can be computed now, else with why not (a short phrase such as {@code
   * "not accepting requests"}); completes within about {@code wait}.
   */
  CompletionStage<String> notReady(Duration wait);

  /**
   * Rows computed by {@code server}, a {@link ModelServer} of this JVM, asked on {@code system}'s scheduler
   * and watched from it: once the server has stopped, rows fail at once ({@code UNAVAILABLE}).
   */
  static TensorInference of(ActorRef<ModelServer.Command> server, ActorSystem<?> system) {
    return ModelServerInference.watching(server, system);
  }
}
