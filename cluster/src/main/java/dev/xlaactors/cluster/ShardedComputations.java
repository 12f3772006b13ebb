package dev.xlaactors.cluster;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.jobs.ComputationActor;
import dev.xlaactors.actors.jobs.JobSettings;
import dev.xlaactors.actors.jobs.Program;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.XlaClient;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeoutException;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.Entity;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey;
import org.apache.pekko.pattern.StatusReply;

/**
 * Compiled programs as Cluster Sharding entities: one entity per computation id, living on one node of a
 * role, wrapping a {@link ComputationActor} there (compiled once on that node's XLA client, runs served
 * one at a time in arrival order). A run requested on any node ({@link #run}) goes to the node holding the
 * entity; its inputs and outputs cross JVMs with {@link ShardedComputationSerializer}, never Java
 * serialization.
 *
 * <p>Every node of the role knows the computations through the same catalog (id to {@link Program}), so
 * only tensors travel, never programs. When the node holding an entity dies, the cluster removes it
 * (failure detector, then the downing provider) and the next run of that id starts the entity again on a
 * surviving node of the role, which compiles the program there; a run that was in flight on the dead node
 * gets no answer and fails at its timeout with {@code DEADLINE_EXCEEDED}. Computations keep no state
 * between runs, so nothing else is lost. An idle entity is passivated after Pekko's
 * {@code pekko.cluster.sharding.passivation} idle timeout, closing its executable.
 */
public final class ShardedComputations {
  /** The entity type of sharded computations. */
  public static final EntityTypeKey<Command> TYPE_KEY = EntityTypeKey.create(Command.class, "xla-computation");

  private ShardedComputations() {}

  /** Every message that crosses nodes (bound to {@link ShardedComputationSerializer} in reference.conf). */
  public interface Message {}

  /** What a computation entity understands. */
  public sealed interface Command extends Message {}

  /** Runs the computation on {@code inputs}; the reply is {@link Outputs} or {@link Failed}. */
  public record Run(List<HostTensor> inputs, ActorRef<Reply> replyTo) implements Command {
    public Run {
      inputs = List.copyOf(inputs);
    }
  }

  /** The answer to a {@link Run}. */
  public sealed interface Reply extends Message {}

  /** The run's outputs. */
  public record Outputs(List<HostTensor> outputs) implements Reply {
    public Outputs {
      outputs = List.copyOf(outputs);
    }
  }

  /** The run failed, or the computation is unknown or does not compile: {@code message} says which. */
  public record Failed(ErrorCode code, String message) implements Reply {}

  /**
   * Starts sharding of computations on this node. On a node with {@code role} entities live here, each
   * compiling its catalog program on {@code client} ({@code callbacks} serves programs with host
   * callbacks and may be null when none has). On other nodes this is a proxy and {@code client},
   * {@code callbacks} and {@code catalog} may be null. Returns the shard region.
   */
  public static ActorRef<ShardingEnvelope<Command>> init(
      ActorSystem<?> system, String role, XlaClient client, CallbackRuntime callbacks, Map<String, Program> catalog) {
    JobSettings settings = JobSettings.create(system);
    Map<String, Program> programs = catalog == null ? Map.of() : Map.copyOf(catalog);
    return ClusterSharding.get(system).init(
        Entity.of(TYPE_KEY, context -> entity(context.getEntityId(), programs, client, callbacks, settings))
            .withRole(role));
  }

  /**
   * Runs computation {@code id} on {@code inputs} wherever its entity lives (sharding must have been
   * {@link #init started} on this node). Completes with the outputs, or fails with an {@link XlaException}:
   * the run's own error, {@code NOT_FOUND} for an id not in the catalog, or {@code DEADLINE_EXCEEDED}
   * when no answer came within {@code timeout} (for instance because the node running it died).
   */
  public static CompletionStage<List<HostTensor>> run(
      ActorSystem<?> system, String id, List<HostTensor> inputs, Duration timeout) {
    return ClusterSharding.get(system)
        .entityRefFor(TYPE_KEY, id)
        .<Reply>ask(replyTo -> new Run(inputs, replyTo), timeout)
        .handle((reply, failure) -> {
          if (failure != null) {
            Throwable cause = failure instanceof CompletionException && failure.getCause() != null ? failure.getCause() : failure;
            if (cause instanceof TimeoutException) {
              throw new XlaException(ErrorCode.DEADLINE_EXCEEDED, "computation '" + id + "' did not answer within "
                  + timeout + " (the node running it may have died; once the cluster has removed that node, the next run"
                  + " starts the computation on another node)", cause);
            }
            throw new XlaException(ErrorCode.UNAVAILABLE, "computation '" + id + "' could not be asked: " + cause, cause);
          }
          if (reply instanceof Failed f) {
            throw new XlaException(f.code(), f.message());
          }
          return ((Outputs) reply).outputs();
        });
  }

  private static Behavior<Command> entity(
      String id, Map<String, Program> catalog, XlaClient client, CallbackRuntime callbacks, JobSettings settings) {
    return Behaviors.setup(context -> {
      String node = context.getSystem().address().toString();
      Program program = catalog.get(id);
      if (program == null) {
        String known = new TreeSet<>(catalog.keySet()).toString();
        context.getLog().error("no computation '{}' in the catalog of node {}; it has {}", id, node, known);
        return Behaviors.receive(Command.class)
            .onMessage(Run.class, run -> {
              run.replyTo().tell(new Failed(ErrorCode.NOT_FOUND,
                  "no computation '" + id + "' in the catalog of node " + node + "; it has " + known));
              return Behaviors.same();
            })
            .build();
      }
      context.getLog().info("computation '{}' starts on node {}", id, node);
      ActorRef<ComputationActor.Command> computation =
          context.spawn(ComputationActor.create(program, client, callbacks, settings), "computation");
      return Behaviors.receive(Command.class)
          .onMessage(Run.class, run -> {
            computation.tell(new ComputationActor.Run(run.inputs(), answerer(context, id, node, run.replyTo())));
            return Behaviors.same();
          })
          .build();
    });
  }

  /**
   * A one-shot child that turns the computation's {@link StatusReply} into a {@link Reply} for the
   * requester and stops; it dies with the entity, so a run that never ends leaves nothing behind.
   */
  private static ActorRef<StatusReply<List<HostTensor>>> answerer(
      ActorContext<Command> context, String id, String node, ActorRef<Reply> replyTo) {
    return context.spawnAnonymous(Behaviors.<StatusReply<List<HostTensor>>>receiveMessage(reply -> {
      if (reply.isSuccess()) {
        replyTo.tell(new Outputs(reply.getValue()));
      } else {
        Throwable error = reply.getError();
        ErrorCode code = error instanceof XlaException x ? x.code() : ErrorCode.INTERNAL;
        replyTo.tell(new Failed(code, "computation '" + id + "' on node " + node + ": " + error.getMessage()));
      }
      return Behaviors.stopped();
    }));
  }
}
