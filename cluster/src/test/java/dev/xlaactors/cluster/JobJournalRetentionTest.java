package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.ConfigFactory;
import dev.xlaactors.actors.jobs.BatchScoring;
import dev.xlaactors.actors.jobs.ResultJournal;
import dev.xlaactors.runtime.XlaClient;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The job journal does not grow with the items a node has run (docs/reliability.md, section 9): on the
 * real H2 file journal, a running job holds at most about (keep-snapshots + 1) x snapshot-every event rows
 * and keep-snapshots + 1 snapshots whatever its item count, and an ended job two rows (its JobEnded and
 * the snapshot at it), which still make a second Ensure of it find it ended. Counted with JDBC on the
 * journal's tables. Before, every item stayed a row for ever (about 6 KB of H2 file each).
 *
 * <p>{@code -Dxla.test.retention-items=N} sets the big job's items (600), {@code
 * -Dxla.test.retention-jobs=N} the small jobs of 30 items (10); the figures are printed at the end.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class JobJournalRetentionTest {
  private static final int EVERY = Integer.getInteger("xla.test.retention-every", 20);
  private static final int KEEP = 2;
  /** A running job's rows: KEEP + 1 batches of events, the one the plugin keeps marked, KEEP + 1 snapshots; plus a batch written while a deletion is under way. */
  private static final long RUNNING_BOUND = (KEEP + 2L) * EVERY + 1 + KEEP + 1;
  private static final int SMALL_ITEMS = 30;

  /** H2 always; PostgreSQL when {@code tools/postgres.sh start} set its URL (as {@link ShardedBatchJobClusterTest}). */
  static java.util.stream.Stream<String> journals() {
    return ShardedBatchJobClusterTest.journals();
  }

  @ParameterizedTest(name = "journal on {0}")
  @MethodSource("journals")
  void aJobsRowsAreBoundedWhileItRunsAndTwoAfterItEndedWhateverItsItemCount(String database, @TempDir Path dir) throws Exception {
    long bigItems = Long.getLong("xla.test.retention-items", 600);
    int smallJobs = Integer.getInteger("xla.test.retention-jobs", 10);
    boolean h2 = database.equals("h2");
    String url = h2 ? TestNodes.h2Journal(dir) : System.getenv(ShardedBatchJobClusterTest.POSTGRES_ENV);
    Assumptions.assumeTrue(url != null && !url.isBlank(), "PostgreSQL not started: run `eval \"$(tools/postgres.sh start)\"` first");
    // Ids of their own: a PostgreSQL journal outlives the test.
    String run = java.util.UUID.randomUUID().toString().substring(0, 8);
    Map<String, ShardedBatchJobs.Definition> catalog = new HashMap<>();
    String big = "big-" + run;
    catalog.put(big, TestNodes.scoresJob(big, "test", dir.resolve(big + ".tsv"), bigItems, 0));
    List<String> small = new ArrayList<>();
    for (int i = 0; i < smallJobs; i++) {
      String id = "small-" + run + "-" + i;
      small.add(id);
      catalog.put(id, TestNodes.scoresJob(id, "test", dir.resolve(id + ".tsv"), SMALL_ITEMS, 0));
    }
    int port = TestNodes.freePort();
    ActorSystem<Void> system = XlaCluster.start(ConfigFactory.parseString(
            "xla-actors.cluster.jobs { snapshot-every = " + EVERY + ", keep-snapshots = " + KEEP + " }")
        .withFallback(TestNodes.config(port, port, "compute", url)));
    List<String> figures = new ArrayList<>();
    try (XlaClient client = XlaClient.create(); JobJournal journal = new JobJournal(url, TestNodes.journalUser(url), "")) {
      ActorRef<ShardingEnvelope<ShardedBatchJobs.Command>> jobs =
          ShardedBatchJobs.init(system, "compute", client, id -> Optional.ofNullable(catalog.get(id)));

      // One job with many items: its rows, sampled while it runs, stay under the bound.
      jobs.tell(new ShardingEnvelope<>(big, new ShardedBatchJobs.Ensure()));
      long mostWhileRunning = 0;
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(240);
      while (!ended(journal, big)) {
        assertTrue(System.nanoTime() < deadline, "the big job did not end within 240 s");
        mostWhileRunning = Math.max(mostWhileRunning, journal.rows(big).total());
        Thread.sleep(10);
      }
      JobJournal.Rows bigEnded = awaitRows(journal, big, 2);
      figures.add("one job of " + bigItems + " items: at most " + mostWhileRunning + " rows while it ran, " + bigEnded
          + " once it ended");
      assertEveryItemOnce(dir.resolve(big + ".tsv"), bigItems);

      // Many small jobs at once: each ends with two rows.
      for (String id : small) {
        jobs.tell(new ShardingEnvelope<>(id, new ShardedBatchJobs.Ensure()));
      }
      for (String id : small) {
        while (!ended(journal, id)) {
          assertTrue(System.nanoTime() < deadline, "job " + id + " did not end in time");
          Thread.sleep(20);
        }
      }
      long smallRows = 0;
      for (String id : small) {
        smallRows += awaitRows(journal, id, 2).total();
        assertEveryItemOnce(dir.resolve(id + ".tsv"), SMALL_ITEMS);
      }
      figures.add(smallJobs + " jobs of " + SMALL_ITEMS + " items: " + smallRows + " rows once they ended");

      // What is left of an ended job is enough: a second Ensure recovers it, finds it ended and runs nothing.
      FileTime written = Files.getLastModifiedTime(dir.resolve(big + ".tsv"));
      jobs.tell(new ShardingEnvelope<>(big, new ShardedBatchJobs.Ensure()));
      Thread.sleep(2000);
      assertEquals(written, Files.getLastModifiedTime(dir.resolve(big + ".tsv")), "the ended job ran again");
      assertEquals(2, journal.rows(big).total(), "rows of the ended job after a second Ensure");
      ShardedBatchJobs.JobSnapshot last = journal.newestSnapshot(big).orElseThrow();
      assertTrue(last.ended().orElseThrow().completed() && last.lines().isEmpty(), last.toString());

      figures.add("the whole journal (sharding's remembered entities too" + (h2 ? "" : ", and earlier runs'") + "): "
          + journal.allRows() + (h2 ? String.format(", file %.2f MB", Files.size(dir.resolve("journal.mv.db")) / 1e6) : ""));
      System.err.println("journal retention test (" + database + "): " + String.join("; ", figures));
      assertTrue(mostWhileRunning <= RUNNING_BOUND, "the running job held " + mostWhileRunning + " rows, more than "
          + RUNNING_BOUND + " (" + String.join("; ", figures) + ")");
      assertEquals(2L * smallJobs, smallRows, String.join("; ", figures));
    } finally {
      system.terminate();
      system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
    }
    if (h2) {
      // H2 compacts the file when the last connection closes it (for at most 200 ms): what is live is what stays.
      System.err.printf("journal retention test (h2): file %.3f MB once closed%n", Files.size(dir.resolve("journal.mv.db")) / 1e6);
    }
  }

  private static boolean ended(JobJournal journal, String id) throws Exception {
    return journal.events(id).stream().anyMatch(e -> e instanceof ShardedBatchJobs.JobEnded);
  }

  /** Waits until job {@code id} has at most {@code most} rows (its deletion runs after it ended); returns them. */
  private static JobJournal.Rows awaitRows(JobJournal journal, String id, long most) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    JobJournal.Rows rows = journal.rows(id);
    while (rows.total() > most && System.nanoTime() < deadline) {
      Thread.sleep(20);
      rows = journal.rows(id);
    }
    assertTrue(rows.total() <= most, "job " + id + " still has " + rows + " 20 s after it ended, expected at most " + most);
    List<ShardedBatchJobs.Event> events = journal.events(id);
    ShardedBatchJobs.JobEnded ended = assertInstanceOf(ShardedBatchJobs.JobEnded.class, events.get(events.size() - 1));
    assertTrue(ended.completed(), ended::summary);
    return rows;
  }

  private static void assertEveryItemOnce(Path output, long count) throws Exception {
    Map<Long, String> lines = ResultJournal.read(output);
    assertEquals(count, Files.readAllLines(output).size(), "one line per item in " + output);
    for (long i = 0; i < count; i++) {
      assertEquals(BatchScoring.formatValues(List.of(TestNodes.itemOutput(i))), lines.get(i), "item " + i + " of " + output);
    }
  }
}
