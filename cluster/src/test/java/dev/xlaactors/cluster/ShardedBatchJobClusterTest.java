package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.jobs.BatchScoring;
import dev.xlaactors.actors.jobs.ResultJournal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope;
import org.apache.pekko.cluster.typed.Down;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Batch jobs as sharded, event-sourced entities on two compute nodes (child JVMs with their own XLA
 * client); this test JVM is the seed and only sends the job its start. The killed node's job runs on
 * PostgreSQL when {@code XLA_ACTORS_TEST_POSTGRES_URL} is set ({@code tools/postgres.sh start} sets it;
 * {@code .ci/run} runs it), on H2 otherwise; the restarted cluster's on H2 (see {@link #killJournal()}).
 *
 * <p>The test reads the job's progress from the journal's tables itself (its newest snapshot and the
 * events after it) and, once it ended, checks that only its JobEnded and the snapshot at it are left; every
 * item must be in the output file exactly once, with the values a single-node run computes.
 */
@Timeout(value = 150, unit = TimeUnit.SECONDS)
class ShardedBatchJobClusterTest {
  private static final int COUNT = 200;
  /**
   * How long each item's input takes to read while a node may be killed, so the job is still running when it
   * is: the kill lands within about 50 ms of the 40th item, and 160 items take at least 2.4 s more.
   */
  private static final long ITEM_DELAY_MS = 15;
  private static final Pattern READY = Pattern.compile("READY (\\S+)");
  static final String POSTGRES_ENV = "XLA_ACTORS_TEST_POSTGRES_URL";

  /**
   * The journal a node is killed over: PostgreSQL when its URL is given (what several machines share, where one of
   * them dying is the case), H2 otherwise. The whole-cluster restart runs on H2 (the single machine's default),
   * and JobJournalRetentionTest runs both: each journal's SQL is run by a cluster test, at one cluster test's
   * cost each (about 35 s of CI's 15 minutes).
   */
  /** The journals JobJournalRetentionTest runs on: H2 always; PostgreSQL when its URL is given, or a row that says it is skipped. */
  static Stream<String> journals() {
    return Stream.of("h2", "postgresql");
  }

  static Stream<String> killJournal() {
    String postgres = System.getenv(POSTGRES_ENV);
    return Stream.of(postgres != null && !postgres.isBlank() ? "postgresql" : "h2");
  }

  @ParameterizedTest(name = "journal on {0}")
  @MethodSource("killJournal")
  void aJobWhoseNodeIsKilledHalfWayCompletesOnAnotherWithEveryItemOnce(String database, @TempDir Path dir) throws Exception {
    try (Cluster cluster = new Cluster(database, dir)) {
      cluster.startNodes(ITEM_DELAY_MS);
      cluster.jobs.tell(new ShardingEnvelope<>(cluster.job, new ShardedBatchJobs.Ensure()));
      cluster.awaitItems(40, Duration.ofSeconds(60));

      ChildJvms.Child running = cluster.b.output().contains("RUNNING " + cluster.job + " on") ? cluster.b : cluster.c;
      ChildJvms.Child other = running == cluster.b ? cluster.c : cluster.b;
      ChildJvms.kill(running);
      long killedAt = System.nanoTime();
      long atKill = cluster.journal.itemsDone(cluster.job);
      assertTrue(atKill < COUNT, "killed after " + atKill + " items");

      cluster.awaitEnded(Duration.ofSeconds(60));
      long completedAfterMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killedAt);
      // The survivor recovered the job from the journal and went on from there, not from the start.
      assertTrue(Pattern.compile("RUNNING " + cluster.job + " on " + other.name() + " from item (\\d+)")
          .matcher(other.output()).find(), other::output);
      cluster.assertEveryItemOnce();
      System.err.printf("sharded job test (%s): %s killed after %d of %d items; the job completed on %s %d ms later%n",
          database, running.name(), atKill, COUNT, other.name(), completedAfterMs);
    }
  }

  @ParameterizedTest(name = "journal on {0}")
  @ValueSource(strings = "h2")
  void afterTheWholeClusterIsStoppedAndStartedAgainAnUnfinishedJobResumesByItself(String database, @TempDir Path dir) throws Exception {
    try (Cluster cluster = new Cluster(database, dir)) {
      cluster.startNodes(ITEM_DELAY_MS);
      cluster.jobs.tell(new ShardingEnvelope<>(cluster.job, new ShardedBatchJobs.Ensure()));
      cluster.awaitItems(40, Duration.ofSeconds(60));

      // Every node goes at once: both compute nodes killed, the seed's actor system stopped.
      ChildJvms.kill(cluster.b);
      ChildJvms.kill(cluster.c);
      cluster.stopSeedAlone();
      long atStop = cluster.journal.itemsDone(cluster.job);
      assertTrue(atStop < COUNT, "stopped after " + atStop + " items");

      // A new cluster on the same journal; nobody sends the job anything. Nobody kills it either, so its
      // items take no extra time to read.
      long restartedAt = System.nanoTime();
      cluster.startNodes(0);
      cluster.awaitEnded(Duration.ofSeconds(90));
      long completedAfterMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - restartedAt);
      assertTrue((cluster.b.output() + cluster.c.output()).contains("RUNNING " + cluster.job + " on"),
          () -> "the restarted nodes did not run the job:\n" + cluster.b.output() + cluster.c.output());
      cluster.assertEveryItemOnce();
      System.err.printf("sharded job test (%s): cluster stopped after %d of %d items; after the restart the job"
          + " completed in %d ms%n", database, atStop, COUNT, completedAfterMs);
    }
  }

  /** A seed (this JVM) and two compute nodes on one journal, and the job's unique id and output file. */
  private static final class Cluster implements AutoCloseable {
    final String job = "scores-" + UUID.randomUUID().toString().substring(0, 8);
    final Path dir;
    final Path output;
    final String url;
    final JobJournal journal;
    final ChildJvms children;
    final int seedPort = TestNodes.freePort();
    ActorSystem<Void> seed;
    ActorRef<ShardingEnvelope<ShardedBatchJobs.Command>> jobs;
    ChildJvms.Child b;
    ChildJvms.Child c;
    int generation;

    Cluster(String database, Path dir) throws Exception {
      this.dir = dir;
      output = dir.resolve("scores.tsv");
      if (database.equals("postgresql")) {
        String postgres = System.getenv(POSTGRES_ENV);
        Assumptions.assumeTrue(postgres != null && !postgres.isBlank(),
            "PostgreSQL not started: run `eval \"$(tools/postgres.sh start)\"` first (it sets " + POSTGRES_ENV
                + "; .ci/run does this)");
        url = postgres;
        journal = new JobJournal(url, TestNodes.journalUser(url), "");
      } else {
        url = TestNodes.h2Journal(dir);
        journal = new JobJournal(url, "sa", "");
      }
      children = new ChildJvms(dir);
    }

    /** Starts the seed here and two compute nodes whose job reads each item in {@code delayMs}. */
    void startNodes(long delayMs) throws Exception {
      generation++;
      String[] args = {Integer.toString(seedPort), output.toString(), Integer.toString(COUNT), Long.toString(delayMs), url, job};
      b = children.start("job-node-b" + generation, JobNodeMain.class, with("job-node-b" + generation, args));
      c = children.start("job-node-c" + generation, JobNodeMain.class, with("job-node-c" + generation, args));
      seed = XlaCluster.start(TestNodes.config(seedPort, seedPort, "coordinator", url));
      jobs = ShardedBatchJobs.init(seed, "compute", null, null);
      b.await(READY, Duration.ofSeconds(60));
      c.await(READY, Duration.ofSeconds(60));
    }

    void stopSeed() throws Exception {
      seed.terminate();
      seed.getWhenTerminated().toCompletableFuture().get(20, TimeUnit.SECONDS);
      seed = null;
    }

    /**
     * Stops the seed once the compute nodes are dead: it downs itself, so its actor system stops at once.
     * A graceful leave would wait until the failure detector and the split brain resolver downed the dead
     * nodes and then the seed itself (about 7 s here, with nothing to prove).
     */
    void stopSeedAlone() throws Exception {
      org.apache.pekko.cluster.typed.Cluster node = org.apache.pekko.cluster.typed.Cluster.get(seed);
      node.manager().tell(new Down(node.selfMember().address()));
      seed.getWhenTerminated().toCompletableFuture().get(20, TimeUnit.SECONDS);
      seed = null;
    }

    void awaitItems(long items, Duration timeout) throws Exception {
      long deadline = System.nanoTime() + timeout.toNanos();
      while (journal.itemsDone(job) < items) {
        assertTrue(System.nanoTime() < deadline, () -> "the job recorded too little in " + timeout + ":\n" + b.output() + c.output());
        Thread.sleep(50);
      }
    }

    void awaitEnded(Duration timeout) throws Exception {
      long deadline = System.nanoTime() + timeout.toNanos();
      while (journal.events(job).stream().noneMatch(e -> e instanceof ShardedBatchJobs.JobEnded)) {
        assertTrue(System.nanoTime() < deadline, () -> "the job did not end within " + timeout + ":\n" + b.output() + c.output());
        Thread.sleep(100);
      }
    }

    /**
     * The output file holds each item once, with its values; the journal holds what the ended job needs
     * and no more: its JobEnded (completed) and the snapshot at it, without the items (the retention
     * deleted their events and the job's older snapshots).
     */
    void assertEveryItemOnce() throws Exception {
      List<String> lines = Files.readAllLines(output);
      assertEquals(COUNT, lines.size(), "one line per item in the output file");
      Map<Long, String> done = ResultJournal.read(output);
      for (long i = 0; i < COUNT; i++) {
        assertEquals(BatchScoring.formatValues(List.of(TestNodes.itemOutput(i))), done.get(i), "output of item " + i);
      }

      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (journal.rows(job).total() > 2 && System.nanoTime() < deadline) {
        Thread.sleep(50); // the deletion runs once the snapshot at JobEnded is saved
      }
      assertEquals(2, journal.rows(job).total(), () -> "rows left of the ended job: " + rowsOf(job));
      List<ShardedBatchJobs.Event> events = journal.events(job);
      assertEquals(1, events.size(), "events left of the ended job: " + events);
      ShardedBatchJobs.JobEnded ended = assertInstanceOf(ShardedBatchJobs.JobEnded.class, events.get(0));
      assertTrue(ended.completed(), ended::summary);
      ShardedBatchJobs.JobSnapshot last = journal.newestSnapshot(job).orElseThrow();
      assertTrue(last.ended().isPresent() && last.lines().isEmpty(), "the ended job's snapshot: " + last);
    }

    private String rowsOf(String id) {
      try {
        return journal.rows(id).toString();
      } catch (java.sql.SQLException e) {
        return e.toString();
      }
    }

    private static String[] with(String name, String[] args) {
      String[] all = new String[args.length + 1];
      all[0] = name;
      System.arraycopy(args, 0, all, 1, args.length);
      return all;
    }

    @Override
    public void close() throws Exception {
      try {
        if (seed != null) {
          stopSeed();
        }
      } finally {
        children.close();
        journal.close();
      }
    }
  }
}
