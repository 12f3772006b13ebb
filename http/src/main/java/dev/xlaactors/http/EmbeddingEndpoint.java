package dev.xlaactors.http;

import dev.xlaactors.actors.serve.ModelServer;
import dev.xlaactors.actors.serve.ServeSettings;
import dev.xlaactors.lm.EmbeddingModel;
import java.util.Objects;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;

/**
 * An embedding model served at {@code POST /v1/embeddings}: the model (tokenizer, pooling) and where its
 * encoder runs, one sequence a request row ({@link TensorInference}: the model server of its {@code embed}
 * programs, the one {@code /v2} uses), so that embeddings are admitted, batched, timed out and cancelled as
 * every other row: at most {@code serve.queueCapacity()} sequences wait, each with the deadline
 * {@code serve.defaultTimeout()}.
 *
 * @param model the embedding model: its name, tokenizer and pooling
 * @param inference where its rows are computed
 * @param serve the settings of that server (queue capacity, default deadline), as the route checks against them
 */
public record EmbeddingEndpoint(EmbeddingModel model, TensorInference inference, ServeSettings.Model serve) {
  public EmbeddingEndpoint {
    Objects.requireNonNull(model, "model");
    Objects.requireNonNull(inference, "inference");
    Objects.requireNonNull(serve, "serve");
  }

  /**
   * The endpoint of {@code model} whose rows {@code server} computes (a {@link ModelServer} of {@code
   * model.loaded()}'s {@code embed} programs, spawned with {@code system}'s settings for the model's name).
   */
  public static EmbeddingEndpoint of(EmbeddingModel model, ActorRef<ModelServer.Command> server, ActorSystem<?> system) {
    return new EmbeddingEndpoint(model, TensorInference.of(server, system), ServeSettings.create(system).forModel(model.name()));
  }

  /** The model's name, as requests name it. */
  public String name() {
    return model.name();
  }
}
