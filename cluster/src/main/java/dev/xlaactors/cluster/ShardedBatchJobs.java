package dev.xlaactors.cluster;

import dev.xlaactors.actors.jobs.BatchScoring;
import dev.xlaactors.actors.jobs.InferenceJob;
import dev.xlaactors.actors.jobs.ItemSink;
import dev.xlaactors.actors.jobs.ItemSource;
import dev.xlaactors.actors.jobs.JobResult;
import dev.xlaactors.actors.jobs.JobSettings;
import dev.xlaactors.actors.jobs.JobWork;
import dev.xlaactors.actors.jobs.Program;
import dev.xlaactors.actors.jobs.ResultJournal;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.XlaClient;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.Done;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.actor.typed.SupervisorStrategy;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.sharding.typed.ClusterShardingSettings;
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.sharding.typed.javadsl.Entity;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityContext;
import org.apache.pekko.cluster.sharding.typed.javadsl.EntityTypeKey;
import org.apache.pekko.persistence.typed.PersistenceId;
import org.apache.pekko.persistence.typed.RecoveryCompleted;
import org.apache.pekko.persistence.typed.RecoveryFailed;
import org.apache.pekko.persistence.typed.SnapshotAdapter;
import org.apache.pekko.persistence.typed.SnapshotCompleted;
import org.apache.pekko.persistence.typed.javadsl.CommandHandler;
import org.apache.pekko.persistence.typed.javadsl.Effect;
import org.apache.pekko.persistence.typed.javadsl.EventHandler;
import org.apache.pekko.persistence.typed.javadsl.EventSourcedBehavior;
import org.apache.pekko.persistence.typed.javadsl.RetentionCriteria;
import org.apache.pekko.persistence.typed.javadsl.SignalHandler;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Batch jobs ({@link BatchScoring}-like: a compiled step over items 0 to count-1, run by an {@link
 * InferenceJob}) as Cluster Sharding entities, one per job id, on the nodes with a given role, with their
 * state event sourced in a JDBC journal ({@link JobJournalSettings}: H2 by default, PostgreSQL for
 * several hosts).
 *
 * <ul>
 *   <li>Each finished item is one event ({@link ItemScored}: its index and its outputs as a line of
 *       {@link BatchScoring#formatValues}); the job's state is saved whole every {@code
 *       xla-actors.cluster.jobs.snapshot-every} items, and saving it deletes the events and snapshots
 *       before the oldest of the {@code keep-snapshots} newest, so a running job's rows do not grow with
 *       its item count. An item's outputs count once the journal
 *       acknowledged them, and acknowledged means written (a killed JVM keeps them: {@link
 *       JobJournalSettings}); an item already there is never recorded again, so every item is done
 *       exactly once. The definition's sink hears of each item after the acknowledgement.
 *   <li>When the node running a job dies, its shard moves to another node of the role, which recovers the
 *       job from the journal and goes on at the first unfinished item.
 *   <li>Entities are remembered in the journal too: after the whole cluster was stopped, the first nodes
 *       of the role to come back start every unfinished job by themselves.
 *   <li>When every item is done, the job writes its output file (the definition's {@code output}, as a
 *       {@link ResultJournal}, lines in item order) atomically, records {@link JobEnded} and passivates,
 *       which also forgets it as a remembered entity. A job that fails for good ends the same way,
 *       without an output file. An ended job's state drops the items' outputs; it is saved once more and
 *       every row before that snapshot is deleted ({@link JobJournalRetention}): what stays of an ended
 *       job is two small rows, its {@link JobEnded} and that snapshot.
 * </ul>
 *
 * <p>Every node knows the jobs through a {@link JobCatalog} (the entity id names the job); the only
 * message that crosses nodes is {@link Ensure}, which starts a job (or, for a job that already ran, only
 * recovers and stops it again).
 */
public final class ShardedBatchJobs {
  private ShardedBatchJobs() {}

  /** The entity type of batch jobs; also the prefix of their persistence ids ({@code xla-batch-job|<id>}). */
  public static final EntityTypeKey<Command> TYPE_KEY = EntityTypeKey.create(Command.class, "xla-batch-job");

  /** Messages of a job entity. */
  public sealed interface Command {}

  /** Starts the job if it is not running yet (sent through sharding; serialized by {@link ShardedJobSerializer}). */
  public record Ensure() implements Command {}

  /** Records an item's outputs (from the job's own work, on the same node; never crosses nodes). */
  private record Record(long item, String line, ActorRef<Done> replyTo) implements Command {}

  private record Finished(JobResult result) implements Command {}

  private record OutputWritten(JobResult result, Throwable failure) implements Command {}

  /** What the journal holds of a job: one event per finished item, and one when the job ends. */
  public sealed interface Event {}

  /** Item {@code item} is done; {@code line} is its outputs as {@link BatchScoring#formatValues} prints them. */
  public record ItemScored(long item, String line) implements Event {}

  /** The job ended: completed with every item done, or failed for good ({@code summary} says how). */
  public record JobEnded(boolean completed, String summary) implements Event {}

  /** A job's state as a snapshot stores it: its finished items' lines by index, and how it ended if it did. */
  public record JobSnapshot(NavigableMap<Long, String> lines, Optional<JobEnded> ended) {
    public JobSnapshot {
      lines = Collections.unmodifiableNavigableMap(new TreeMap<>(lines));
      Objects.requireNonNull(ended, "ended");
    }
  }

  /**
   * What a node needs to run job {@code id}: its step, its items, where it writes them, and who hears of
   * each item once the journal acknowledged it.
   *
   * @param sink called with an item's outputs after its event is in the journal (written: see {@link
   *     JobJournalSettings}), before the next item starts; an exception fails the item's attempt, which is
   *     retried (the journal keeps the item once, the sink hears of it again). A JVM killed between the
   *     journal's acknowledgement and the sink's call never calls the sink for that item: the item is done.
   */
  public record Definition(Program step, long count, ItemSource source, Path output, ItemSink sink) {
    public Definition {
      Objects.requireNonNull(sink, "sink");
    }

    /** A job whose finished items only go to the journal and the output file. */
    public Definition(Program step, long count, ItemSource source, Path output) {
      this(step, count, source, output, (item, outputs) -> {});
    }

    /** This job with {@code newSink} told of each acknowledged item. */
    public Definition withSink(ItemSink newSink) {
      return new Definition(step, count, source, output, newSink);
    }
  }

  /** The jobs every node of the role can run, by id. */
  @FunctionalInterface
  public interface JobCatalog {
    Optional<Definition> job(String id);
  }

  /**
   * Starts sharding of batch jobs on this node and returns the region to send {@link Ensure} to. On a
   * node with {@code role} it first creates the journal's tables if they are missing (blocking; an
   * UNAVAILABLE {@code XlaException} names the URL when the database cannot be reached). On a node
   * without {@code role} it is a proxy: no jobs run there, nothing touches the database, and {@code
   * client} and {@code catalog} may be null.
   */
  public static ActorRef<ShardingEnvelope<Command>> init(
      ActorSystem<?> system, String role, XlaClient client, JobCatalog catalog) {
    JobJournalSettings journal = JobJournalSettings.fromConfig(system.settings().config());
    if (system.settings().config().getStringList("pekko.cluster.roles").contains(role)
        || !XlaCluster.isClustered(system)) {
      JobJournalSchema.ensure(journal);
      if (journal.inMemory()) {
        system.log().warn("the job journal {} is in this JVM's memory: every job's progress is lost when the JVM"
            + " ends; set xla-actors.cluster.jobs.journal.url to a file (the default) or PostgreSQL to keep it", journal.url());
      }
      journal.exposure().ifPresent(warning -> system.log().warn(warning));
      JobJournalCompaction.start(system, journal, JobJournalCompaction.Settings.fromConfig(system.settings().config()));
    }
    return ClusterSharding.get(system).init(
        Entity.of(TYPE_KEY, context -> JobEntity.create(context, client, catalog, journal))
            .withRole(role)
            .withSettings(ClusterShardingSettings.create(system)
                .withRole(role)
                .withRememberEntities(true)
                .withRememberEntitiesStoreMode(ClusterShardingSettings.RememberEntitiesStoreModeEventSourced$.MODULE$)));
  }

  /** The persistence id of job {@code id}: what its events are stored under. */
  public static PersistenceId persistenceIdOf(String id) {
    return PersistenceId.of(TYPE_KEY.name(), id);
  }

  private static final Logger RETENTION_LOG = LoggerFactory.getLogger(JobJournalRetention.class);

  /** A job's state while it lives: mutated by its events on the entity's thread only. */
  static final class JobState {
    final TreeMap<Long, String> lines = new TreeMap<>();
    JobEnded ended;

    JobSnapshot snapshot() {
      return new JobSnapshot(lines, Optional.ofNullable(ended));
    }
  }

  /**
   * One job: recovers its state, runs the remaining items through an {@link InferenceJob} whose work
   * records each item here before it counts, then writes the output and passivates.
   */
  static final class JobEntity extends EventSourcedBehavior<Command, Event, JobState> {
    private final ActorContext<Command> context;
    private final EntityContext<Command> entity;
    private final XlaClient client;
    private final JobCatalog catalog;
    private final JobJournalSettings journal;

    static Behavior<Command> create(EntityContext<Command> entity, XlaClient client, JobCatalog catalog,
        JobJournalSettings journal) {
      return Behaviors.setup(context -> new JobEntity(context, entity, client, catalog, journal));
    }

    private JobEntity(ActorContext<Command> context, EntityContext<Command> entity, XlaClient client,
        JobCatalog catalog, JobJournalSettings journal) {
      // A journal that fails a write (its database went away) stops the entity; it starts again after a
      // backoff and recovers from what was written.
      super(persistenceIdOf(entity.getEntityId()),
          SupervisorStrategy.restartWithBackoff(Duration.ofMillis(200), Duration.ofSeconds(10), 0.2));
      this.context = context;
      this.entity = entity;
      this.client = client;
      this.catalog = catalog;
      this.journal = journal;
    }

    @Override
    public String journalPluginId() {
      return "jdbc-journal";
    }

    @Override
    public String snapshotPluginId() {
      return "jdbc-snapshot-store";
    }

    /**
     * A snapshot every {@code snapshot-every} items deletes the events and snapshots before the oldest of
     * the {@code keep-snapshots} newest (Pekko's retention: it deletes, then the jdbc plugin removes the
     * rows but the last one it marked), so a running job holds a bounded number of rows.
     */
    @Override
    public RetentionCriteria retentionCriteria() {
      return RetentionCriteria.snapshotEvery(journal.snapshotEvery(), journal.keepSnapshots()).withDeleteEventsOnSnapshot();
    }

    /** An ended job saves its (small) state at once: {@link #onSnapshotSaved} then deletes the rows before it. */
    @Override
    public boolean shouldSnapshot(JobState state, Event event, long sequenceNr) {
      return event instanceof JobEnded;
    }

    @Override
    public JobState emptyState() {
      return new JobState();
    }

    /** Snapshots are immutable copies: the snapshot store serializes them while the job goes on. */
    @Override
    public SnapshotAdapter<JobState> snapshotAdapter() {
      return new SnapshotAdapter<>() {
        @Override
        public Object toJournal(JobState state) {
          return state.snapshot();
        }

        @Override
        public JobState fromJournal(Object from) {
          JobSnapshot snapshot = (JobSnapshot) from;
          JobState state = new JobState();
          state.lines.putAll(snapshot.lines());
          state.ended = snapshot.ended().orElse(null);
          return state;
        }
      };
    }

    @Override
    public CommandHandler<Command, Event, JobState> commandHandler() {
      return newCommandHandlerBuilder()
          .forAnyState()
          .onCommand(Ensure.class, (state, e) -> Effect().none())
          .onCommand(Record.class, this::onRecord)
          .onCommand(Finished.class, this::onFinished)
          .onCommand(OutputWritten.class, this::onOutputWritten)
          .build();
    }

    @Override
    public EventHandler<JobState, Event> eventHandler() {
      return newEventHandlerBuilder()
          .forAnyState()
          .onEvent(ItemScored.class, (state, e) -> {
            state.lines.put(e.item(), e.line());
            return state;
          })
          .onEvent(JobEnded.class, (state, e) -> {
            state.ended = e;
            // An ended job needs only how it ended: its outputs are in its output file (or, failed, nowhere).
            state.lines.clear();
            return state;
          })
          .build();
    }

    @Override
    public SignalHandler<JobState> signalHandler() {
      return newSignalHandlerBuilder()
          .onSignal(RecoveryCompleted.instance(), this::onRecovered)
          .onSignal(RecoveryFailed.class, (state, failed) ->
              context.getLog().error("batch job '{}' could not be recovered from the journal", entity.getEntityId(), failed.getFailure()))
          .onSignal(SnapshotCompleted.class, this::onSnapshotSaved)
          .build();
    }

    /**
     * The snapshot of an ended job is saved: delete every row before it, off the actor's thread (the
     * entity passivates meanwhile). If this JVM dies first, the rows stay; the job is ended all the same.
     */
    private void onSnapshotSaved(JobState state, SnapshotCompleted saved) {
      if (state.ended == null) {
        return;
      }
      String id = entity.getEntityId();
      String persistenceId = persistenceIdOf(id).id();
      long sequenceNr = saved.metadata().sequenceNr();
      CompletableFuture.supplyAsync(() -> {
        try {
          return JobJournalRetention.deleteBefore(journal, persistenceId, sequenceNr);
        } catch (SQLException e) {
          throw new CompletionException(e);
        }
      }, context.getSystem().dispatchers().lookup(DispatcherSelector.blocking())).whenComplete((deleted, failure) -> {
        // Not the actor's logger: this runs after the entity may have stopped.
        if (failure != null) {
          RETENTION_LOG.warn("batch job '{}' ended, but its journal rows before sequence number {} could not be"
              + " deleted (they stay; the job is ended all the same): {}", id, sequenceNr, failure.toString());
        } else {
          RETENTION_LOG.debug("batch job '{}' ended: deleted its {} journal rows before sequence number {}", id, deleted, sequenceNr);
        }
      });
    }

    /** Starts the remaining items, or (for a job that already ended) passivates at once. */
    private void onRecovered(JobState state) {
      String id = entity.getEntityId();
      if (state.ended != null) {
        context.getLog().info("batch job '{}' already ended ({}); nothing to do", id, state.ended.summary());
        passivate();
        return;
      }
      Optional<Definition> job = catalog == null ? Optional.empty() : catalog.job(id);
      if (job.isEmpty()) {
        // Nothing to run here; the entity stays remembered, so a node that knows the job picks it up.
        context.getLog().error("no job '{}' in the catalog of node {}; it stays unfinished", id, context.getSystem().address());
        return;
      }
      Definition definition = job.get();
      JobSettings settings = JobSettings.create(context.getSystem());
      JournaledItems work = new JournaledItems(definition, state.lines.keySet(), context.getSelf(), context.getSystem(),
          journal.recordTimeout());
      ActorRef<InferenceJob.Command> run = context.spawn(
          InferenceJob.create(id, definition.step(), client, null, work, settings), "job");
      run.tell(new InferenceJob.Start(context.messageAdapter(JobResult.class, Finished::new)));
      context.getLog().info("batch job '{}' runs on {} with {} of {} items already done",
          id, context.getSystem().address(), state.lines.size(), definition.count());
    }

    /** Records an item once: a second report of the same item (a retried attempt) only gets its reply. */
    private Effect<Event, JobState> onRecord(JobState state, Record record) {
      if (state.lines.containsKey(record.item())) {
        return Effect().none().thenRun(s -> record.replyTo().tell(Done.getInstance()));
      }
      return Effect().persist(new ItemScored(record.item(), record.line()))
          .thenRun(s -> record.replyTo().tell(Done.getInstance()));
    }

    /** Every item is done: write the output file off the actor's thread; otherwise end as failed. */
    private Effect<Event, JobState> onFinished(JobState state, Finished finished) {
      if (!(finished.result() instanceof JobResult.Completed)) {
        return end(new JobEnded(false, finished.result().toString()));
      }
      Optional<Definition> definition = catalog.job(entity.getEntityId());
      Path output = definition.orElseThrow().output();
      Map<Long, String> lines = new TreeMap<>(state.lines);
      context.pipeToSelf(
          CompletableFuture.runAsync(() -> writeOutput(output, lines),
              context.getSystem().dispatchers().lookup(DispatcherSelector.blocking())),
          (ok, failure) -> new OutputWritten(finished.result(), failure));
      return Effect().none();
    }

    private Effect<Event, JobState> onOutputWritten(JobState state, OutputWritten written) {
      if (written.failure() != null) {
        return end(new JobEnded(false, "every item is done, but the output file could not be written: " + written.failure()));
      }
      return end(new JobEnded(true, written.result().toString()));
    }

    private Effect<Event, JobState> end(JobEnded ended) {
      context.getLog().info("batch job '{}' ended: {}", entity.getEntityId(), ended.summary());
      return Effect().persist(ended).thenRun(s -> passivate());
    }

    /** Stops the entity through its shard; with remembered entities, that also forgets it. */
    private void passivate() {
      entity.getShard().tell(new ClusterSharding.Passivate<>(context.getSelf()));
    }

    /** Writes every line to a sibling file, then moves it over {@code output}: never half a file. */
    private static void writeOutput(Path output, Map<Long, String> lines) {
      Path partial = output.resolveSibling(output.getFileName() + ".partial");
      try {
        Files.deleteIfExists(partial);
        try (ResultJournal file = ResultJournal.open(partial, Integer.MAX_VALUE)) {
          for (Map.Entry<Long, String> line : lines.entrySet()) {
            file.append(line.getKey(), line.getValue());
          }
        }
        Files.move(partial, output, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      } catch (Exception e) {
        throw new IllegalStateException("writing " + output + ": " + e.getMessage(), e);
      }
    }
  }

  /**
   * The work of a job entity's {@link InferenceJob}: the items not yet in the journal, in order; each
   * item's outputs are recorded in the journal through the entity (waiting for the write) before the
   * next item starts.
   */
  static final class JournaledItems implements JobWork {
    private final Definition definition;
    private final ConcurrentSkipListSet<Long> done;
    private final ActorRef<Command> entity;
    private final ActorSystem<?> system;
    private final Duration recordTimeout;

    JournaledItems(Definition definition, java.util.Set<Long> alreadyDone, ActorRef<Command> entity, ActorSystem<?> system,
        Duration recordTimeout) {
      this.definition = definition;
      this.done = new ConcurrentSkipListSet<>(alreadyDone);
      this.entity = entity;
      this.system = system;
      this.recordTimeout = recordTimeout;
    }

    @Override
    public Plan open() {
      return new Plan(definition.count(), done.size());
    }

    @Override
    public OptionalLong next(long previous) {
      for (long i = previous + 1; i < definition.count(); i++) {
        if (!done.contains(i)) {
          return OptionalLong.of(i);
        }
      }
      return OptionalLong.empty();
    }

    @Override
    public List<HostTensor> input(long item) throws Exception {
      return definition.source().input(item);
    }

    @Override
    public boolean accept(long item, List<HostTensor> outputs) throws Exception {
      String line = BatchScoring.formatValues(outputs);
      AskPattern.<Command, Done>ask(entity, replyTo -> new Record(item, line, replyTo), recordTimeout, system.scheduler())
          .toCompletableFuture()
          .get(recordTimeout.toMillis() + 1000, TimeUnit.MILLISECONDS);
      done.add(item);
      definition.sink().accept(item, outputs);
      return true;
    }

    @Override
    public void close() {}
  }
}
