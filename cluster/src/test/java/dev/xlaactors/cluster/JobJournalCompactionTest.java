package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.XlaException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * An H2 journal file stays small while it is written: the journal's own tables, written as a job writes them
 * (an event per item, a snapshot every 20 items deleting the events before it), one commit each, with {@link
 * JobJournalCompaction} running every 100 ms. Without it the file holds every chunk written (H2 reuses none
 * within its 45 s retention, and runs no housekeeping with {@code WRITE_DELAY=0}), which the test shows from
 * H2's own count of bytes written.
 *
 * <p>The compaction runs on a timer, so the file grows by the commits between two of them, and how many those
 * are depends on the machine: an AVX-512 Xeon committed 600 items in 0.5 s, about 200 between two compactions,
 * and the file reached 6.4-9.0 MB. So the writer waits for the next compaction after {@value #PER_COMPACTION}
 * commits, which makes the bound a property of the compaction, not of the machine's speed (the wait also fails
 * the test if the timer stops compacting).
 */
class JobJournalCompactionTest {
  /** Commits of the run, compacted. */
  private static final int ITEMS = 600;
  /** Commits after the compaction stopped: they grew the file by 3.5 MB here (about 30 KB each). */
  private static final int UNCOMPACTED = 120;
  /** At most this many commits between two compactions: the writer waits for the next one after them. */
  private static final int PER_COMPACTION = 80;
  /** How long the writer waits for the next compaction before the test fails: the timer fires every 100 ms. */
  private static final Duration COMPACTION_WAIT = Duration.ofSeconds(10);
  /**
   * The bound the file must stay under through the run, whose rows are about 40 KB: the largest measured here
   * was 1.6 MB on a quiet machine and 3.5 MB with 20 processes on its 2 cores (the compaction runs on a timer,
   * so the file grows by the commits between two compactions; at most {@value #PER_COMPACTION} of them).
   */
  private static final long BOUND = 6L << 20;

  @TempDir Path dir;

  @Test
  void theFileStaysUnderItsBoundThroughALongRun() throws Exception {
    JobJournalSettings journal = new JobJournalSettings("jdbc:h2:file:" + dir.resolve("jobs/journal"), "sa", "", 1, 1,
        Duration.ofSeconds(1));
    JobJournalSchema.ensure(journal);
    ActorTestKit kit = ActorTestKit.create("journal-compaction-test");
    Path file = dir.resolve("jobs/journal.mv.db");
    long largest = 0;
    long sizeAtStop = 0;
    long compactionsSeen = 0;
    int sinceCompaction = 0;
    long grown;
    try (Connection c = DriverManager.getConnection(journal.url(), journal.user(), journal.password());
        JobJournalCompaction compaction = JobJournalCompaction.start(kit.system(), journal,
            new JobJournalCompaction.Settings(Duration.ofMillis(100), Duration.ofMillis(500))).orElseThrow()) {
      PreparedStatement event = c.prepareStatement("INSERT INTO \"event_journal\" (\"persistence_id\", \"sequence_number\", \"writer\","
          + " \"write_timestamp\", \"adapter_manifest\", \"event_payload\", \"event_ser_id\", \"event_ser_manifest\")"
          + " VALUES (?, ?, 'w', 0, '', ?, 7402, 'E')");
      PreparedStatement snapshot = c.prepareStatement("INSERT INTO \"snapshot\" (\"persistence_id\", \"sequence_number\", \"created\","
          + " \"snapshot_ser_id\", \"snapshot_ser_manifest\", \"snapshot_payload\") VALUES (?, ?, 0, 7402, 'S', ?)");
      PreparedStatement prune = c.prepareStatement("DELETE FROM \"event_journal\" WHERE \"persistence_id\" = ? AND \"sequence_number\" <= ?");
      PreparedStatement pruneSnapshots = c.prepareStatement("DELETE FROM \"snapshot\" WHERE \"persistence_id\" = ? AND \"sequence_number\" < ?");
      for (int i = 1; i <= ITEMS + UNCOMPACTED; i++) {
        if (i == ITEMS + 1) {
          // The last items without compaction: the file grows again, so it was the compaction that held it.
          compaction.close();
          Thread.sleep(700); // a compaction under way ends within compact-time
          sizeAtStop = Files.size(file);
        }
        String job = "job-" + (i % 4);
        event.setString(1, job);
        event.setLong(2, i);
        event.setBytes(3, new byte[400]);
        event.executeUpdate();
        if (i % 20 == 0) {
          snapshot.setString(1, job);
          snapshot.setLong(2, i);
          snapshot.setBytes(3, new byte[2000]);
          snapshot.executeUpdate();
          prune.setString(1, job);
          prune.setLong(2, i);
          prune.executeUpdate();
          pruneSnapshots.setString(1, job);
          pruneSnapshots.setLong(2, i - 40);
          pruneSnapshots.executeUpdate();
        }
        if (i <= ITEMS) {
          largest = Math.max(largest, Files.size(file));
          if (compaction.compactions() > compactionsSeen) {
            compactionsSeen = compaction.compactions();
            sinceCompaction = 0;
          } else if (++sinceCompaction >= PER_COMPACTION && i < ITEMS) {
            compactionsSeen = awaitCompactionAfter(compaction, compactionsSeen);
            sinceCompaction = 0;
          }
        }
      }
      grown = Files.size(file) - sizeAtStop;
      // Nothing was lost moving chunks: the rows left are those the run left. Item i's event goes to job i % 4;
      // every 20th item (job-0's) snapshots job-0, deleting its events so far and its snapshots older than 40 items.
      int items = ITEMS + UNCOMPACTED;
      assertEquals(3, count(c, "SELECT COUNT(*) FROM \"snapshot\""));
      assertEquals(3 * items / 4, count(c, "SELECT COUNT(*) FROM \"event_journal\""));
      assertEquals(0, count(c, "SELECT COUNT(*) FROM \"event_journal\" WHERE \"persistence_id\" = 'job-0'"));
    } finally {
      kit.shutdownTestKit();
    }
    assertTrue(largest < BOUND, "the journal file reached " + largest + " bytes, above the bound of " + BOUND);
    // At the rate the file grew without it, the run's commits would have made it more than twice the bound.
    assertTrue(grown * ITEMS / UNCOMPACTED > 2 * BOUND, "without compaction " + UNCOMPACTED + " commits grew the file by only "
        + grown + " bytes: the run is too short to test the bound");
  }

  /** The count of compactions once it passes {@code seen}; fails the test if none ends within the wait. */
  private static long awaitCompactionAfter(JobJournalCompaction compaction, long seen) throws InterruptedException {
    long deadline = System.nanoTime() + COMPACTION_WAIT.toNanos();
    while (compaction.compactions() <= seen) {
      assertTrue(System.nanoTime() < deadline, "no compaction ended within " + COMPACTION_WAIT + " after compaction " + seen
          + ": the timer of every 100 ms stopped compacting");
      Thread.sleep(1);
    }
    return compaction.compactions();
  }

  private static long count(Connection c, String sql) throws java.sql.SQLException {
    try (ResultSet r = c.createStatement().executeQuery(sql)) {
      assertTrue(r.next());
      return r.getLong(1);
    }
  }

  @Test
  void settingsAreReadAndCheckedNamingTheKey() {
    JobJournalCompaction.Settings defaults = JobJournalCompaction.Settings.fromConfig(ConfigFactory.load());
    assertEquals(new JobJournalCompaction.Settings(Duration.ofSeconds(10), Duration.ofMillis(500)), defaults);
    XlaException bad = org.junit.jupiter.api.Assertions.assertThrows(XlaException.class, () -> JobJournalCompaction.Settings.fromConfig(
        ConfigFactory.parseString("xla-actors.cluster.jobs.journal.compact-time = 0s").withFallback(ConfigFactory.load())));
    assertTrue(bad.getMessage().contains("xla-actors.cluster.jobs.journal.compact-time"), bad.getMessage());
    // Not for PostgreSQL (it keeps its own files compact) nor an in-memory journal.
    ActorTestKit kit = ActorTestKit.create("journal-compaction-settings");
    try {
      assertTrue(JobJournalCompaction.start(kit.system(), new JobJournalSettings("jdbc:h2:mem:x", "sa", "", 1, 1, Duration.ofSeconds(1)),
          defaults).isEmpty());
      assertTrue(JobJournalCompaction.start(kit.system(), new JobJournalSettings("jdbc:postgresql://h/db", "u", "", 1, 1,
          Duration.ofSeconds(1)), defaults).isEmpty());
    } finally {
      kit.shutdownTestKit();
    }
  }
}
