package dev.xlaactors.cluster;

import dev.xlaactors.actors.ActorsSettings;
import dev.xlaactors.actors.CallbackId;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostFunction;
import dev.xlaactors.runtime.TensorType;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.pattern.StatusReply;

/**
 * Callbacks across nodes, the entry point of the cluster module for them. On a node that serves
 * callbacks: {@link #serve}. On a node that runs programs: {@link #callRemotely} registers, with the
 * node's {@link CallbackRuntime}, a {@link RemoteCallbackClient} that forwards the calls to the serving
 * nodes; programs are unchanged (they name callbacks, never nodes).
 *
 * <pre>{@code
 * // node B (role callbacks)
 * ClusterCallbacks.create(system).serve(HostCallback.of("score", template, null, (in, s) -> score(in)));
 * // node A (role compute)
 * ClusterCallbacks remote = ClusterCallbacks.create(system);
 * remote.callRemotely(runtime, graph.hostCallbacks()).toCompletableFuture().join();
 * remote.awaitServers("score", 1).toCompletableFuture().join();
 * List<HostTensor> out = runtime.run(graph, inputs);
 * }</pre>
 *
 * <p>Thread-safe. One client actor per callback name and instance.
 */
public final class ClusterCallbacks {
  private static final AtomicLong ACTOR_IDS = new AtomicLong();

  private final ActorSystem<?> system;
  private final ClusterSettings settings;
  private final ActorsSettings actors;
  private final CallbackSecret secret;
  private final Map<String, ActorRef<Object>> clients = new ConcurrentHashMap<>();

  private ClusterCallbacks(ActorSystem<?> system, ClusterSettings settings, ActorsSettings actors, CallbackSecret secret) {
    this.system = system;
    this.settings = settings;
    this.actors = actors;
    this.secret = secret;
  }

  /** Callbacks across the nodes of {@code system}'s cluster, with the settings of its config. */
  public static ClusterCallbacks create(ActorSystem<?> system) {
    return new ClusterCallbacks(system, ClusterSettings.create(system), ActorsSettings.create(system),
        ClusterSecuritySettings.create(system).callbackSecret());
  }

  /** The settings in use. */
  public ClusterSettings settings() {
    return settings;
  }

  /**
   * Serves {@code callback} to the programs of every node: its function runs here, on Pekko's
   * blocking-IO dispatcher, with its static argument. Several nodes may serve the same name. Only
   * members of the cluster are served, and with {@code xla-actors.cluster.security.callback-secret} set
   * only requests carrying it (see {@link RemoteCallbackServer#create(ClusterSettings, CallbackSecret,
   * String, List, Object, HostFunction)}).
   */
  public ActorRef<RemoteCallbackServer.Request> serve(HostCallback callback) {
    return serve(callback.name(), callback.outputTemplate(), callback.staticArgument(), callback.function());
  }

  /** Serves the callback {@code name} with {@code function}; see {@link #serve(HostCallback)}. */
  public ActorRef<RemoteCallbackServer.Request> serve(
      String name, List<TensorType> outputTemplate, Object staticArgument, HostFunction function) {
    return system.systemActorOf(
        RemoteCallbackServer.create(settings, secret, name, outputTemplate, staticArgument, function),
        "xla-callback-server-" + ACTOR_IDS.incrementAndGet(),
        Props.empty());
  }

  /** Makes {@code runtime}'s programs call {@code name} on the nodes that serve it. */
  public CompletionStage<CallbackId> callRemotely(CallbackRuntime runtime, String name, List<TensorType> outputTemplate) {
    return runtime.registerServer(name, outputTemplate, client(name).narrow());
  }

  /** Makes {@code runtime}'s programs call each of {@code callbacks} (their names and templates) remotely. */
  public CompletionStage<List<CallbackId>> callRemotely(CallbackRuntime runtime, List<HostCallback> callbacks) {
    List<CompletableFuture<CallbackId>> registrations =
        callbacks.stream().map(c -> callRemotely(runtime, c.name(), c.outputTemplate()).toCompletableFuture()).toList();
    return CompletableFuture.allOf(registrations.toArray(CompletableFuture[]::new))
        .thenApply(done -> registrations.stream().map(CompletableFuture::join).toList());
  }

  /**
   * Completes with the number of reachable nodes serving {@code name} once it is at least {@code count};
   * fails after {@code xla-actors.cluster.callbacks.await-timeout}.
   */
  public CompletionStage<Integer> awaitServers(String name, int count) {
    return AskPattern.askWithStatus(
        client(name),
        (ActorRef<StatusReply<Integer>> replyTo) -> new RemoteCallbackClient.AwaitServers(count, replyTo),
        settings.awaitTimeout(),
        system.scheduler());
  }

  private ActorRef<Object> client(String name) {
    return clients.computeIfAbsent(name, n -> system.systemActorOf(
        RemoteCallbackClient.create(settings, secret, actors, n), "xla-callback-client-" + ACTOR_IDS.incrementAndGet(), Props.empty()));
  }
}
