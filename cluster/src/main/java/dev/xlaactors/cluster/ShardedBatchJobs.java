package dev.xlaactors.cluster;

import dev.xlaactors.actors.jobs.BatchScoring;
import dev.xlaactors.actors.jobs.InferenceJob;
import dev.xlaactors.actors.jobs.ItemSource;
import dev.xlaactors.actors.jobs.JobResult;
import dev.xlaactors.actors.jobs.JobSettings;
import dev.xlaactors.actors.jobs.Program;
import dev.xlaactors.runtime.XlaClient;
import java.nio.file.Path;
import java.util.Optional;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.cluster.sharding.typed.ClusterShardingSettings;
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.Entity;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityContext;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey;

/**
 * Batch jobs ({@link BatchScoring} run by an {@link InferenceJob}) as Cluster Sharding entities, one per
 * job id, on the nodes with a given role. Entities are remembered: when the node running a job dies and
 * is removed from the cluster, its shard moves to another node, which starts the job again; the job's
 * output file (its {@code ResultJournal}) makes it resume at the first unfinished item, so every item is
 * written once. The output path must therefore be on storage every node of the role can reach.
 *
 * <p>Every node knows the jobs through a {@link JobCatalog} (the entity id names the job); the only
 * message that crosses nodes is {@link Ensure}, which starts a job if it is not running.
 */
public final class ShardedBatchJobs {
  private ShardedBatchJobs() {}

  /** The entity type of batch jobs. */
  public static final EntityTypeKey<Command> TYPE_KEY = EntityTypeKey.create(Command.class, "xla-batch-job");

  /** Messages of a job entity. */
  public sealed interface Command {}

  /** Starts the job if it is not running yet (sent through sharding; serialized by {@link ShardedJobSerializer}). */
  public record Ensure() implements Command {}

  private record Finished(JobResult result) implements Command {}

  /** What a node needs to run job {@code id}: its step, its items and where it writes them. */
  public record Definition(Program step, long count, ItemSource source, Path output) {}

  /** The jobs every node of the role can run, by id. */
  @FunctionalInterface
  public interface JobCatalog {
    Optional<Definition> job(String id);
  }

  /**
   * Starts sharding of batch jobs on this node and returns the region to send {@link Ensure} to. On a
   * node without {@code role} it is a proxy (no jobs run there; {@code client} and {@code catalog} may be
   * null).
   */
  public static ActorRef<ShardingEnvelope<Command>> init(
      ActorSystem<?> system, String role, XlaClient client, JobCatalog catalog) {
    return ClusterSharding.get(system).init(
        Entity.of(TYPE_KEY, context -> JobEntity.create(context, client, catalog))
            .withRole(role)
            .withSettings(ClusterShardingSettings.create(system)
                .withRole(role)
                .withRememberEntities(true)
                .withRememberEntitiesStoreMode(ClusterShardingSettings.RememberEntitiesStoreModeDData$.MODULE$)));
  }

  /** One job: spawns its {@link InferenceJob}, starts it, and passivates when it has a result. */
  static final class JobEntity extends AbstractBehavior<Command> {
    private final EntityContext<Command> entity;

    static Behavior<Command> create(EntityContext<Command> entity, XlaClient client, JobCatalog catalog) {
      return Behaviors.setup(context -> new JobEntity(context, entity, client, catalog));
    }

    private JobEntity(ActorContext<Command> context, EntityContext<Command> entity, XlaClient client, JobCatalog catalog) {
      super(context);
      this.entity = entity;
      String id = entity.getEntityId();
      Definition job = catalog.job(id).orElseThrow(() -> new IllegalArgumentException("no job '" + id + "' in this node's catalog"));
      JobSettings settings = JobSettings.create(context.getSystem());
      ActorRef<InferenceJob.Command> run = context.spawn(
          InferenceJob.create(id, job.step(), client, null, BatchScoring.create(job.count(), job.source(), job.output(), settings), settings),
          "job");
      run.tell(new InferenceJob.Start(context.messageAdapter(JobResult.class, Finished::new)));
      context.getLog().info("batch job '{}' runs on {}", id, context.getSystem().address());
    }

    @Override
    public Receive<Command> createReceive() {
      return newReceiveBuilder()
          .onMessage(Ensure.class, e -> this)
          .onMessage(Finished.class, this::onFinished)
          .build();
    }

    /** Done (or failed for good): passivating also forgets the entity, so it is not started again. */
    private Behavior<Command> onFinished(Finished f) {
      getContext().getLog().info("batch job '{}' ended: {}", entity.getEntityId(), f.result());
      entity.getShard().tell(new ClusterSharding.Passivate<>(getContext().getSelf()));
      return this;
    }
  }
}
