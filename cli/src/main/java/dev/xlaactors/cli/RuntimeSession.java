package dev.xlaactors.cli;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.runtime.Device;
import dev.xlaactors.lm.LanguageModel;
import dev.xlaactors.runtime.XlaClient;
import java.time.Duration;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * What a command that runs a model holds: an actor system, the XLA client, the callback runtime over
 * them and the models it loaded. Closing it stops the actor system first (a generation server closes its
 * decoder when it stops), then closes the models, the runtime and the client.
 */
final class RuntimeSession implements AutoCloseable {
  private final ActorSystem<Void> system;
  private final XlaClient client;
  private final CallbackRuntime runtime;
  private final java.util.Deque<AutoCloseable> owned = new java.util.ArrayDeque<>();

  private RuntimeSession(ActorSystem<Void> system, XlaClient client, CallbackRuntime runtime) {
    this.system = system;
    this.client = client;
    this.runtime = runtime;
  }

  /** Starts an actor system named {@code name}, the XLA client and the callback runtime. */
  static RuntimeSession start(String name) {
    return start(ActorSystem.create(Behaviors.empty(), name));
  }

  /** Starts the XLA client and the callback runtime on {@code system} (a cluster node), which the session then owns. */
  static RuntimeSession start(ActorSystem<Void> system) {
    XlaClient client;
    try {
      client = XlaClient.create(LanguageModel.clientSettings());
    } catch (RuntimeException e) {
      system.terminate();
      throw e;
    }
    return new RuntimeSession(system, client, CallbackRuntime.create(system, client));
  }

  ActorSystem<Void> system() {
    return system;
  }

  /** The XLA client the models are loaded on. */
  XlaClient client() {
    return client;
  }

  CallbackRuntime runtime() {
    return runtime;
  }

  /** The device models are loaded on: the client's first. */
  Device device() {
    return client.devices().get(0);
  }

  /** Makes {@code resource} (a loaded model) closed by {@link #close()}, after the actors stop and before the client goes. */
  <T extends AutoCloseable> T own(T resource) {
    owned.push(resource);
    return resource;
  }

  @Override
  public void close() {
    system.terminate();
    try {
      system.getWhenTerminated().toCompletableFuture().get(Duration.ofSeconds(30).toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
    } catch (Exception e) {
      // the system did not stop in time: close the rest all the same
    }
    while (!owned.isEmpty()) {
      try {
        owned.pop().close();
      } catch (Exception e) {
        // closing a model frees memory only; go on with the rest
      }
    }
    runtime.close();
    client.close();
  }
}
