package dev.xlaactors.http;

import dev.xlaactors.actors.serve.ModelServer;
import dev.xlaactors.runtime.HostTensor;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletionStage;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Scheduler;
import org.apache.pekko.actor.typed.javadsl.AskPattern;

/**
 * {@link TensorInference} by a {@link ModelServer} of this JVM: a row is one {@link ModelServer.Infer},
 * batched with other rows; {@link #cancel} is a {@link ModelServer.Cancel} (a queued row is never computed,
 * a running one loses its place in the answer); ready means the server answers its status and accepts.
 * The server is watched ({@link ModelServer#watch}): once it has stopped, rows fail at once with
 * {@code UNAVAILABLE} (503) instead of waiting out their ask.
 */
record ModelServerInference(ActorRef<ModelServer.Command> server, Scheduler scheduler, CompletionStage<Void> stopped)
    implements TensorInference {
  ModelServerInference {
    Objects.requireNonNull(server, "server");
    Objects.requireNonNull(scheduler, "scheduler");
    Objects.requireNonNull(stopped, "stopped");
  }

  /** Rows computed by {@code server}, watched from {@code system}. */
  static ModelServerInference watching(ActorRef<ModelServer.Command> server, ActorSystem<?> system) {
    return new ModelServerInference(server, system.scheduler(), ModelServer.watch(system, server));
  }

  @Override
  public CompletionStage<ModelServer.Prediction> infer(String requestId, List<HostTensor> row, Duration timeout) {
    return ModelServer.ask(server, requestId, row, timeout, scheduler, stopped);
  }

  @Override
  public void cancel(String requestId, String reason) {
    server.tell(new ModelServer.Cancel(requestId, reason));
  }

  @Override
  public CompletionStage<String> notReady(Duration wait) {
    return AskPattern.<ModelServer.Command, ModelServer.Status>ask(server, ModelServer.GetStatus::new, wait, scheduler)
        .thenApply(s -> s.accepting() ? (String) null : "not accepting requests")
        .exceptionally(t -> "no status within " + wait.toMillis() + " ms");
  }
}
