package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.jobs.BatchScoring;
import dev.xlaactors.actors.jobs.ResultJournal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Acknowledged means durable (issue 24, Major 5): a JVM running a sharded batch job on the default kind of
 * journal (an H2 file this JVM serves, {@link JobJournalSettings#h2File}) is killed with SIGKILL at random
 * points, again and again, each restart resuming the job; at the end every item the journal acknowledged
 * is found by every later run (none is computed again), and the job completed with every item once in its
 * output; the journal then holds only what the ended job needs (its JobEnded and the snapshot at it), the
 * retention having deleted item events and snapshots as the job ran (every 25 items, {@link TestNodes}),
 * kills included.
 *
 * <p>The child prints {@code ACK <item>} from the job's sink, which runs after the journal acknowledged the
 * item's event; its output goes straight to a file, so what it printed before the kill is kept. Before
 * {@code WRITE_DELAY=0}, H2 acknowledged commits it wrote up to 500 ms later, and each kill lost the items
 * of that window. The test kills 3 times; {@code -Dxla.test.journal-kills=20} runs the
 * issue's 20 kills.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class JournalKillTest {
  private static final Pattern READY = Pattern.compile("READY (\\S+)");
  private static final Pattern ACK = Pattern.compile("(?m)^ACK (\\d+)$");

  @Test
  void everyAcknowledgedItemSurvivesKillsAtRandomPointsAndIsJournaledOnce(@TempDir Path dir) throws Exception {
    int kills = Integer.getInteger("xla.test.journal-kills", 3);
    // Each killed run acknowledges 1 to 30 items and the few more done before its kill lands (up to 40 ms
    // later): 40 items per kill and 60 more leave the last run items to resume (it asserts the job had not
    // ended before the last kill).
    long count = 60 + 40L * kills;
    long seed = Long.getLong("xla.test.journal-kill-seed", System.nanoTime());
    Random random = new Random(seed);
    Path output = dir.resolve("scores.tsv");
    String url = JobJournalSettings.h2File(dir.resolve("journal"));
    String job = "kill-" + UUID.randomUUID().toString().substring(0, 8);
    List<Long> acked = new ArrayList<>();
    List<String> report = new ArrayList<>();

    try (ChildJvms children = new ChildJvms(dir)) {
      for (int generation = 1; generation <= kills + 1; generation++) {
        // The runs that are killed read each item in 10 ms, so kills land between and within items; the last
        // one, which nobody kills, reads them at once.
        ChildJvms.Child child = children.start("node-" + generation, JournalKillNodeMain.class, "node-" + generation,
            Integer.toString(TestNodes.freePort()), url, job, Long.toString(count), output.toString(),
            generation <= kills ? "10" : "0");
        child.await(READY, Duration.ofSeconds(90));
        if (generation <= kills) {
          // A random point mid-job: after 1 to 30 items of this run were acknowledged, plus up to 40 ms.
          int target = 1 + random.nextInt(30);
          long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
          while (acks(child.output()).size() < target) {
            assertTrue(System.nanoTime() < deadline, () -> "no progress after a restart:\n" + child.output());
            assertTrue(!Files.exists(output), "the job ended before the last kill; give it more items");
            Thread.sleep(5);
          }
          Thread.sleep(random.nextInt(41));
          ChildJvms.kill(child);
        } else {
          long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(180);
          while (!Files.exists(output)) {
            assertTrue(System.nanoTime() < deadline, () -> "the job did not complete after the last restart:\n" + child.output());
            Thread.sleep(50);
          }
          awaitEnded(url, job);
          child.process().getOutputStream().close();
          assertTrue(child.process().waitFor(30, TimeUnit.SECONDS), "the last node did not stop");
        }
        List<Long> these = acks(child.output());
        // An item acknowledged by an earlier run and computed again by this one was not in the journal
        // when this run recovered it: the journal lost an acknowledged write.
        TreeSet<Long> before = new TreeSet<>(acked);
        List<Long> forgotten = these.stream().filter(before::contains).toList();
        assertEquals(List.of(), forgotten, "run " + generation + " did not find these items in the journal, though it had"
            + " acknowledged them before the kill (seed " + seed + ")");
        acked.addAll(these);
        Matcher from = Pattern.compile("RUNNING " + job + " on \\S+ from item (\\d+)").matcher(child.output());
        report.add("run " + generation + ": from item " + (from.find() ? from.group(1) : "?") + ", " + these.size()
            + " acknowledged");
        if (generation > 1 && !these.isEmpty()) {
          // It resumed: it did not start again at item 0.
          assertTrue(these.get(0) > 0, () -> "run resumed at item 0:\n" + child.output());
        }
      }
    }

    try (JobJournal journal = new JobJournal(url, "sa", "")) {
      // The job's items were journaled while it ran (each run above found every item acknowledged before
      // it); once it ended, the retention deleted them and its snapshots, leaving its JobEnded and the
      // snapshot at it. Its items are in the output file.
      Map<Long, String> lines = ResultJournal.read(output);
      List<Long> lost = acked.stream().filter(i -> !lines.containsKey(i)).toList();
      TreeSet<Long> ackedOnce = new TreeSet<>();
      List<Long> ackedTwice = acked.stream().filter(i -> !ackedOnce.add(i)).toList();
      String summary = kills + " kills, seed " + seed + ", " + acked.size() + " items acknowledged, " + lines.size()
          + " in the output; " + String.join("; ", report);
      assertEquals(List.of(), lost, "acknowledged items missing from the output (" + summary + ")");
      assertEquals(List.of(), ackedTwice, "items acknowledged twice, so computed again after a restart (" + summary + ")");
      assertEquals(count, Files.readAllLines(output).size(), "one line per item in the output file");
      for (long i = 0; i < count; i++) {
        assertEquals(BatchScoring.formatValues(List.of(TestNodes.itemOutput(i))), lines.get(i), "output of item " + i);
      }
      List<ShardedBatchJobs.Event> events = journal.events(job);
      ShardedBatchJobs.JobEnded ended = assertInstanceOf(ShardedBatchJobs.JobEnded.class, events.get(events.size() - 1));
      assertTrue(ended.completed(), ended::summary);
      assertEquals(1, events.size(), "events left of the ended job: " + events);
      ShardedBatchJobs.JobSnapshot last = journal.newestSnapshot(job).orElseThrow();
      assertTrue(last.ended().isPresent() && last.lines().isEmpty(), "the ended job's snapshot: " + last);
      assertEquals(2, journal.rows(job).total(), "rows left of the ended job");
      System.err.println("journal kill test: " + summary);
    }
  }

  private static List<Long> acks(String output) {
    List<Long> items = new ArrayList<>();
    Matcher m = ACK.matcher(output);
    while (m.find()) {
      items.add(Long.parseLong(m.group(1)));
    }
    return items;
  }

  private static String rows(JobJournal journal, String job) {
    try {
      return journal.rows(job).toString();
    } catch (java.sql.SQLException e) {
      return e.toString();
    }
  }

  /** Waits for the job's JobEnded, read through the last node, which serves the journal (this JVM disconnects after). */
  private static void awaitEnded(String url, String job) throws Exception {
    try (JobJournal journal = new JobJournal(url, "sa", "")) {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (journal.events(job).stream().noneMatch(e -> e instanceof ShardedBatchJobs.JobEnded)) {
        assertTrue(System.nanoTime() < deadline, "no JobEnded 60 s after the output file appeared");
        Thread.sleep(100);
      }
      // Then its older rows are deleted, once the snapshot at JobEnded is saved.
      while (journal.rows(job).total() > 2) {
        assertTrue(System.nanoTime() < deadline, () -> "the ended job's older rows were not deleted: " + rows(journal, job));
        Thread.sleep(100);
      }
    }
  }
}
