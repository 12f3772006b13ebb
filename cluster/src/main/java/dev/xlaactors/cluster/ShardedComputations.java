package dev.xlaactors.cluster;

import dev.xlaactors.actors.ActorsSettings;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.jobs.ComputationActor;
import dev.xlaactors.actors.jobs.JobSettings;
import dev.xlaactors.actors.jobs.Program;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Model;
import dev.xlaactors.runtime.model.SegmentedModel;
import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.cluster.sharding.typed.ClusterShardingSettings;
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.Entity;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityContext;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey;
import org.apache.pekko.pattern.StatusReply;

/**
 * Compiled programs as Cluster Sharding entities, one per computation id, on the nodes with a given
 * role: each entity wraps a {@link ComputationActor}, which compiles its {@link Program} once (on the
 * node it lives on, with that node's {@link XlaClient}) and serves runs one at a time. A run requested on
 * any node ({@link #run}) goes to the node holding the entity and its outputs come back; inputs and
 * outputs cross JVMs through {@link ShardedComputationSerializer}, never Java serialization.
 *
 * <pre>{@code
 * // every node, with the same catalog; nodes without the role only send (client may be null there)
 * ComputationCatalog catalog = ComputationCatalog.of(Map.of("twice-plus-one", Program.of(graph)));
 * ShardedComputations computations = ShardedComputations.init(system, "compute", client, callbacks, catalog);
 * List<HostTensor> out = computations
 *     .run("twice-plus-one", List.of(HostTensor.vector(1.5f, -2f, 0.25f, 3f)), Duration.ofSeconds(10))
 *     .toCompletableFuture().join();
 * }</pre>
 *
 * <ul>
 *   <li>Every node knows the computations through a {@link ComputationCatalog} (id to program); an id
 *       not in it fails the run with {@code NOT_FOUND} naming the id and the catalog's ids: at once on a
 *       node that has the catalog, otherwise from the entity's node.
 *   <li>An id may also name a {@link Model} bound on each node ({@link ModelCatalog}): its weights are
 *       loaded and uploaded once per node, the first time an entity of it starts there (or at start,
 *       {@link ModelCatalog#loadAll}), and kept across entity restarts; a run carries only the model's
 *       per-request inputs. A model that fails to load fails the run with {@code FAILED_PRECONDITION}
 *       naming the model, the node and the cause; the next run tries to load it again.
 *   <li>The entity first answers {@link Accepted} (naming its node), then {@link Outputs} or {@link
 *       Failed}. A run not accepted yet is sent again every second (a run sent to a node that just died is
 *       lost otherwise); the entity runs each run once however many copies arrive. The requesting node
 *       watches the accepting node: when it becomes unreachable or leaves the cluster during the run,
 *       the run fails at once with {@code UNAVAILABLE} naming it, and is not sent again (the caller
 *       decides). A run with no answer within its timeout fails with {@code DEADLINE_EXCEEDED}.
 *   <li>When the node holding an entity is removed from the cluster (the downing provider decides when;
 *       see docs/cluster.md), its shards move to the other nodes of the role, and the next run of the id starts
 *       the entity there: it compiles the program again and serves the run. Computations keep no state
 *       between runs, so nothing is journaled or remembered.
 *   <li>An idle entity is passivated by sharding ({@code pekko.cluster.sharding.passivation}, 2 minutes
 *       idle by default), closing its executable; the next run compiles again.
 * </ul>
 *
 * <p>Thread-safe: {@link #run} may be called from any thread.
 */
public final class ShardedComputations {
  /** The entity type of computations. */
  public static final EntityTypeKey<Command> TYPE_KEY = EntityTypeKey.create(Command.class, "xla-computation");

  /** How much longer than a run's own timeout the ask waits for the requester's answer: a backstop only. */
  private static final Duration ASK_BACKSTOP = Duration.ofSeconds(5);
  private static final AtomicLong REQUESTERS = new AtomicLong();

  /** Marks the messages that cross nodes; bound to {@link ShardedComputationSerializer} in reference.conf. */
  public interface Message {}

  /** Messages of a computation entity. */
  public sealed interface Command {}

  /**
   * Runs the computation on {@code inputs}. {@code replyTo} gets {@link Accepted}, then {@link Outputs}
   * or {@link Failed}, each with {@code requestId}.
   */
  public record Run(long requestId, List<HostTensor> inputs, ActorRef<Reply> replyTo) implements Command, Message {
    public Run {
      inputs = List.copyOf(inputs);
      Objects.requireNonNull(replyTo, "replyTo");
    }
  }

  /** The computation actor of this entity stopped (a bug: failures of runs are replies). */
  private record ComputationStopped() implements Command {}

  /** A model of the catalog finished loading on this node (or failed to). */
  private record ModelLoaded(Behavior<ComputationActor.Command> computation, Throwable failure) implements Command {}

  /** What an entity answers to a {@link Run}. */
  public sealed interface Reply extends Message {
    /** The {@code requestId} of the run answered. */
    long requestId();
  }

  /** The run reached the entity on {@code node} (an address such as {@code pekko://xla-actors@10.0.0.5:25520}). */
  public record Accepted(long requestId, String node) implements Reply {}

  /** The run's outputs. */
  public record Outputs(long requestId, List<HostTensor> outputs) implements Reply {
    public Outputs {
      outputs = List.copyOf(outputs);
    }
  }

  /** The run failed: {@code message} names the computation, the node and what went wrong. */
  public record Failed(long requestId, ErrorCode code, String message) implements Reply {}

  /** The computations every node knows, by id. */
  public interface ComputationCatalog {
    /** The program of computation {@code id}, if there is one. */
    Optional<Program> program(String id);

    /** Every id of the catalog, for error messages. */
    Set<String> ids();

    /**
     * The model bound on this node under {@code id} (its weights on this node's device, loaded once),
     * if {@code id} names a model rather than a program; none by default. See {@link ModelCatalog}.
     */
    default Optional<Model> model(String id) {
      return Optional.empty();
    }

    /**
     * The segmented model (stages with host calls between them, weights bound once) on this node under
     * {@code id}, if {@code id} names one; none by default. See {@link ModelCatalog}.
     */
    default Optional<SegmentedModel> segmentedModel(String id) {
      return Optional.empty();
    }

    /** Whether {@code id} names a program or a model of this catalog. */
    default boolean contains(String id) {
      return ids().contains(id);
    }

    /** A catalog of the given programs (copied). */
    static ComputationCatalog of(Map<String, Program> programs) {
      Map<String, Program> copy = Map.copyOf(programs);
      Set<String> ids = Collections.unmodifiableSortedSet(new TreeSet<>(copy.keySet()));
      return new ComputationCatalog() {
        @Override
        public Optional<Program> program(String id) {
          return Optional.ofNullable(copy.get(id));
        }

        @Override
        public Set<String> ids() {
          return ids;
        }
      };
    }
  }

  private final ActorSystem<?> system;
  private final ComputationCatalog catalog;
  private final ActorRef<ShardingEnvelope<Command>> region;
  private final ActorRef<ComputationRequester.Command> requester;

  private ShardedComputations(ActorSystem<?> system, ComputationCatalog catalog, ActorRef<ShardingEnvelope<Command>> region,
      ActorRef<ComputationRequester.Command> requester) {
    this.system = system;
    this.catalog = catalog;
    this.region = region;
    this.requester = requester;
  }

  /**
   * Starts sharding of computations on this node. On a node with {@code role} the entities live here:
   * they compile with {@code client} and run programs with host callbacks through {@code callbacks}
   * (null when no program of the catalog calls the host). On a node without {@code role} it is a proxy:
   * {@code client} and {@code callbacks} may be null. {@code catalog} may be null on a proxy; then an
   * unknown id is only refused by the entity's node, one round trip later.
   *
   * <p>Call it once per node: sharding keeps the first entity factory of the type, so a second call on
   * the same node returns a new requester over the same region, whose entities use the first call's
   * client, callbacks and catalog (the second catalog only serves this node's check of unknown ids).
   * Needs a cluster node ({@code xla-actors.cluster.seed-nodes} set; a one-node cluster will do).
   */
  public static ShardedComputations init(
      ActorSystem<?> system, String role, XlaClient client, CallbackRuntime callbacks, ComputationCatalog catalog) {
    Objects.requireNonNull(role, "role");
    JobSettings settings = JobSettings.create(system);
    ActorRef<ShardingEnvelope<Command>> region = ClusterSharding.get(system).init(
        Entity.of(TYPE_KEY, entity -> ComputationEntity.create(entity, client, callbacks, catalog, settings))
            .withRole(role)
            .withSettings(ClusterShardingSettings.create(system).withRole(role)));
    ActorRef<ComputationRequester.Command> requester = system.systemActorOf(
        ComputationRequester.create(ClusterSharding.get(system)),
        "xla-computation-requester-" + REQUESTERS.incrementAndGet(),
        Props.empty());
    return new ShardedComputations(system, catalog, region, requester);
  }

  /**
   * Runs computation {@code id} on {@code inputs} on the node holding it, and completes with its
   * outputs. It fails with an {@link XlaException}: {@code NOT_FOUND} for an id not in the catalog;
   * {@code UNAVAILABLE} when the node running it becomes unreachable or leaves during the run; {@code
   * DEADLINE_EXCEEDED} with no answer within {@code timeout}; otherwise the run's own error (its code
   * and message, naming the node).
   */
  public CompletionStage<List<HostTensor>> run(String id, List<HostTensor> inputs, Duration timeout) {
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(inputs, "inputs");
    if (timeout.isNegative() || timeout.isZero()) {
      return CompletableFuture.failedFuture(new InvalidArgumentException(
          "the timeout of a run of computation '" + id + "' must be positive, got " + timeout.toMillis() + " ms"));
    }
    if (catalog != null && !catalog.contains(id)) {
      return CompletableFuture.failedFuture(unknown(id, catalog, XlaCluster.selfAddress(system)));
    }
    List<HostTensor> copy = List.copyOf(inputs);
    return AskPattern.askWithStatus(
        requester,
        (ActorRef<StatusReply<List<HostTensor>>> replyTo) -> new ComputationRequester.Submit(id, copy, timeout, replyTo),
        timeout.plus(ASK_BACKSTOP),
        system.scheduler());
  }

  /** The shard region (or proxy) of computations on this node. */
  public ActorRef<ShardingEnvelope<Command>> region() {
    return region;
  }

  /** The error of an id not in the catalog of {@code node}. */
  static XlaException unknown(String id, ComputationCatalog catalog, String node) {
    return new XlaException(ErrorCode.NOT_FOUND, "no computation '" + id + "' in the catalog of node " + node
        + "; its ids: " + new TreeSet<>(catalog.ids()));
  }

  /** The exception a {@link Failed} reply stands for. */
  static XlaException failure(Failed failed) {
    return failed.code() == ErrorCode.INVALID_ARGUMENT
        ? new InvalidArgumentException(failed.message())
        : new XlaException(failed.code(), failed.message());
  }

  /**
   * One computation: a {@link ComputationActor} child that compiles the program once and queues runs;
   * this actor accepts each run (telling the requester its node) and translates the child's answer into
   * a {@link Reply}. Copies of a run it accepted (among the last {@value #REMEMBERED_RUNS}) are accepted
   * again but not run again. An id not in the catalog is refused and the entity passivates. An id that
   * names a model gets the model from the catalog on the run dispatcher when its first run arrives (loading
   * it on this node the first time), accepting runs meanwhile and serving them once it is loaded; a model
   * that fails to load fails those runs (the first among them) and the entity passivates, so the next run
   * tries again.
   */
  static final class ComputationEntity extends AbstractBehavior<Command> {
    /** How many accepted runs an entity remembers, to ignore the copies a requester sends again. */
    private static final int REMEMBERED_RUNS = 1024;

    /** A run as its requester names it: copies sent again have the same reply address and request id. */
    private record RunKey(ActorRef<Reply> replyTo, long requestId) {}

    private final EntityContext<Command> entity;
    private final String id;
    private final String node;
    private final CallbackRuntime callbacks;
    private final JobSettings settings;
    /** Null while a model loads, or when this node cannot serve the id; then {@link #refusal} says why. */
    private ActorRef<ComputationActor.Command> computation;
    private Failed refusal;
    /** Whether a refused entity passivates, so that the next run starts afresh (an unknown id, a failed load). */
    private boolean passivateAfterRefusal;
    /** Whether the model's load failed: the entity is passivating, and a run that reaches it first is not answered. */
    private boolean loadFailed;
    /**
     * Starts getting the model from the catalog, run by the first run (then null): a load started with the entity
     * could fail before the run that started the entity was delivered, leaving no run to answer, and that run
     * unaccepted by an entity that never passivates. Null for a program.
     */
    private Runnable startLoad;
    /** Runs accepted while the model loads, served (or failed) when it is loaded. */
    private final List<Run> waiting = new java.util.ArrayList<>();
    private final Map<RunKey, Boolean> accepted = new LinkedHashMap<>() {
      @Override
      protected boolean removeEldestEntry(Map.Entry<RunKey, Boolean> eldest) {
        return size() > REMEMBERED_RUNS;
      }
    };

    /**
     * The entity of {@code entity.getEntityId()}. No supervision: a failure here (a bug) stops it, and
     * the next run starts it again, compiling again.
     */
    static Behavior<Command> create(EntityContext<Command> entity, XlaClient client, CallbackRuntime callbacks,
        ComputationCatalog catalog, JobSettings settings) {
      return Behaviors.setup(context -> new ComputationEntity(context, entity, client, callbacks, catalog, settings));
    }

    private ComputationEntity(ActorContext<Command> context, EntityContext<Command> entity, XlaClient client,
        CallbackRuntime callbacks, ComputationCatalog catalog, JobSettings settings) {
      super(context);
      this.entity = entity;
      this.id = entity.getEntityId();
      this.node = context.getSystem().address().toString();
      this.callbacks = callbacks;
      this.settings = settings;
      Optional<Program> program = catalog == null ? Optional.empty() : catalog.program(id);
      if (program.isEmpty() && catalog != null && catalog.contains(id)) {
        // A model bound on this node, loaded (once per node) on the run dispatcher, not on this actor's thread,
        // from the first run on.
        ActorsSettings actors = callbacks != null ? callbacks.settings() : ActorsSettings.create(context.getSystem());
        java.util.concurrent.Executor blocking =
            context.getSystem().dispatchers().lookup(DispatcherSelector.fromConfig(actors.runDispatcher()));
        startLoad = () -> context.pipeToSelf(
            CompletableFuture.supplyAsync(() -> modelComputation(catalog, callbacks, settings), blocking),
            (computation, failure) -> new ModelLoaded(computation, failure));
        return;
      }
      if (program.isEmpty()) {
        refuse(new Failed(0, ErrorCode.NOT_FOUND, catalog == null
            ? "node " + node + " has no computation catalog, so it cannot run computation '" + id + "'"
            : unknown(id, catalog, node).getMessage()), true);
      } else if (client == null) {
        refuse(new Failed(0, ErrorCode.FAILED_PRECONDITION,
            "node " + node + " holds computation '" + id + "' but was given no XlaClient (ShardedComputations.init)"), false);
      } else {
        try {
          serve(ComputationActor.create(program.get(), client, callbacks, settings));
          context.getLog().info("computation '{}' starts on {}", id, node);
        } catch (XlaException e) {
          // A program with host callbacks on a node given no CallbackRuntime.
          refuse(new Failed(0, e.code(), "computation '" + id + "' cannot run on node " + node + ": " + e.getMessage()), false);
        }
      }
    }

    /** The computation of model {@code id} of the catalog, loading it on this node if it is not loaded yet. */
    private Behavior<ComputationActor.Command> modelComputation(
        ComputationCatalog catalog, CallbackRuntime callbacks, JobSettings settings) {
      Optional<Model> model = catalog.model(id);
      if (model.isPresent()) {
        return ComputationActor.create(model.get(), callbacks, settings);
      }
      Optional<SegmentedModel> segmented = catalog.segmentedModel(id);
      if (segmented.isPresent()) {
        return ComputationActor.create(segmented.get(), callbacks, settings);
      }
      throw new XlaException(ErrorCode.NOT_FOUND,
          "the catalog lists '" + id + "' but gives neither a program nor a model for it");
    }

    private void serve(Behavior<ComputationActor.Command> behavior) {
      computation = getContext().spawn(behavior, "computation");
      getContext().watchWith(computation, new ComputationStopped());
    }

    private void refuse(Failed failed, boolean passivate) {
      refusal = failed;
      passivateAfterRefusal = passivate;
      getContext().getLog().error("{}", failed.message());
    }

    @Override
    public Receive<Command> createReceive() {
      return newReceiveBuilder()
          .onMessage(Run.class, this::onRun)
          .onMessage(ModelLoaded.class, this::onModelLoaded)
          .onMessage(ComputationStopped.class, this::onComputationStopped)
          .build();
    }

    private Behavior<Command> onRun(Run run) {
      if (loadFailed) {
        // A failed load is not kept: the passivation asked for when the failure was answered is on its way, so
        // this run is left unaccepted; its requester sends it again (ComputationRequester.RESEND_INTERVAL) to
        // the next entity, which loads the model again. Answering it here would repeat the old failure.
        return this;
      }
      if (refusal != null) {
        run.replyTo().tell(new Failed(run.requestId(), refusal.code(), refusal.message()));
        if (passivateAfterRefusal) {
          // Nothing to keep for an unknown id (or a model that failed to load): the next run of it starts a
          // fresh entity, which refuses again (or tries to load the model again).
          entity.getShard().tell(new ClusterSharding.Passivate<>(getContext().getSelf()));
        }
        return this;
      }
      run.replyTo().tell(new Accepted(run.requestId(), node));
      if (accepted.put(new RunKey(run.replyTo(), run.requestId()), Boolean.TRUE) != null) {
        // A copy of a run already accepted here (its requester sent it again before our Accepted came).
        return this;
      }
      if (computation == null) { // the model is loading, or starts loading for this first run
        waiting.add(run);
        if (startLoad != null) {
          Runnable load = startLoad;
          startLoad = null;
          load.run();
        }
        return this;
      }
      ActorRef<StatusReply<List<HostTensor>>> answer =
          getContext().spawnAnonymous(RunAnswer.create(id, node, run.requestId(), run.replyTo()));
      computation.tell(new ComputationActor.Run(run.inputs(), answer));
      return this;
    }

    private Behavior<Command> onModelLoaded(ModelLoaded loaded) {
      if (loaded.failure() == null) {
        serve(loaded.computation());
        getContext().getLog().info("model '{}' served on {}", id, node);
      } else {
        Throwable e = loaded.failure() instanceof java.util.concurrent.CompletionException c && c.getCause() != null
            ? c.getCause() : loaded.failure();
        refuse(new Failed(0, ErrorCode.FAILED_PRECONDITION, "model '" + id + "' could not be loaded on node " + node
            + ": " + (e instanceof XlaException ? e.getMessage() : e.toString())), true);
        loadFailed = true;
      }
      List<Run> runs = List.copyOf(waiting);
      waiting.clear();
      for (Run run : runs) {
        accepted.remove(new RunKey(run.replyTo(), run.requestId())); // already accepted: served (or failed) now
        if (refusal != null) {
          run.replyTo().tell(new Failed(run.requestId(), refusal.code(), refusal.message()));
        } else {
          onRun(run); // answers Accepted again (harmless) and forwards it
        }
      }
      if (refusal != null) { // the runs that waited (the first run among them) are answered: passivate
        entity.getShard().tell(new ClusterSharding.Passivate<>(getContext().getSelf()));
      }
      return this;
    }

    private Behavior<Command> onComputationStopped(ComputationStopped stopped) {
      getContext().getLog().error("the computation actor of '{}' on {} stopped; the entity stops with it", id, node);
      return Behaviors.stopped();
    }
  }

  /** Turns the {@link ComputationActor}'s answer to one run into a {@link Reply} to the requester, then stops. */
  static final class RunAnswer extends AbstractBehavior<StatusReply<List<HostTensor>>> {
    private final String id;
    private final String node;
    private final long requestId;
    private final ActorRef<Reply> replyTo;

    static Behavior<StatusReply<List<HostTensor>>> create(String id, String node, long requestId, ActorRef<Reply> replyTo) {
      return Behaviors.setup(context -> new RunAnswer(context, id, node, requestId, replyTo));
    }

    private RunAnswer(ActorContext<StatusReply<List<HostTensor>>> context, String id, String node, long requestId,
        ActorRef<Reply> replyTo) {
      super(context);
      this.id = id;
      this.node = node;
      this.requestId = requestId;
      this.replyTo = replyTo;
    }

    @Override
    @SuppressWarnings("unchecked")
    public Receive<StatusReply<List<HostTensor>>> createReceive() {
      return newReceiveBuilder()
          .onMessage((Class<StatusReply<List<HostTensor>>>) (Class<?>) StatusReply.class, this::onAnswer)
          .build();
    }

    private Behavior<StatusReply<List<HostTensor>>> onAnswer(StatusReply<List<HostTensor>> answer) {
      if (answer.isSuccess()) {
        replyTo.tell(new Outputs(requestId, answer.getValue()));
      } else {
        Throwable error = answer.getError();
        ErrorCode code = error instanceof XlaException x ? x.code() : ErrorCode.INTERNAL;
        String what = error instanceof XlaException ? error.getMessage() : error.getClass().getName() + ": " + error.getMessage();
        replyTo.tell(new Failed(requestId, code, "a run of computation '" + id + "' failed on node " + node + ": " + what));
      }
      return Behaviors.stopped();
    }
  }
}
