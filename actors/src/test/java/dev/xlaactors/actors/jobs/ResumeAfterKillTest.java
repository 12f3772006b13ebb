package dev.xlaactors.actors.jobs;

import static dev.xlaactors.actors.jobs.JobPrograms.expectedLine;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.runtime.XlaClient;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Nothing is lost: a batch job in a child JVM is killed ({@code destroyForcibly}, i.e. SIGKILL) half way,
 * a partial last line is added as a kill during a write would leave it, and the same job run again
 * resumes at the first unfinished item; the output holds every item exactly once with the right values.
 */
class ResumeAfterKillTest {
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static final int COUNT = 200;

  @TempDir Path dir;

  @AfterAll
  static void stop() {
    testKit.shutdownTestKit();
  }

  @Test
  void aKilledJobResumesAndEveryItemIsWrittenExactlyOnce() throws Exception {
    Path output = dir.resolve("scores.tsv");
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(List.of("-cp", System.getProperty("java.class.path"), BatchJobMain.class.getName()));
    command.addAll(List.of(output.toString(), Integer.toString(COUNT), "10"));
    Path log = dir.resolve("child.log");
    long t0 = System.nanoTime();
    Process child = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    int atKill;
    try {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (ResultJournal.read(output).size() < 40) {
        assertTrue(child.isAlive(), () -> "child ended early: " + read(log));
        assertTrue(System.nanoTime() < deadline, () -> "child wrote too little in 60 s: " + read(log));
        Thread.sleep(20);
      }
    } finally {
      child.destroyForcibly();
      assertTrue(child.waitFor(30, TimeUnit.SECONDS));
    }
    long killedAfterMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    Map<Long, String> before = ResultJournal.read(output);
    atKill = before.size();
    assertTrue(atKill >= 40 && atKill < COUNT, "killed after " + atKill + " items");
    for (long i = 0; i < atKill; i++) {
      assertEquals(expectedLine(i), before.get(i), "item " + i + " before the kill");
    }
    // A kill in the middle of a write leaves a partial line; make sure there is one.
    Files.writeString(output, atKill + "\t99.0,10", StandardCharsets.UTF_8, StandardOpenOption.APPEND);

    Set<Long> computedAgain = ConcurrentHashMap.newKeySet();
    long t1 = System.nanoTime();
    try (XlaClient client = XlaClient.create()) {
      JobSettings settings = JobSettings.create(testKit.system());
      BatchScoring work = BatchScoring.create(COUNT, i -> {
        computedAgain.add(i);
        return List.of(JobPrograms.itemInput(i));
      }, output, settings);
      TestProbe<JobResult> result = testKit.createTestProbe();
      TestProbe<Progress> progress = testKit.createTestProbe();
      ActorRef<InferenceJob.Command> job =
          testKit.spawn(InferenceJob.create("resumable", JobPrograms.twicePlusOne(), client, null, work, settings));
      job.tell(new InferenceJob.Subscribe(progress.getRef()));
      job.tell(new InferenceJob.Start(result.getRef()));
      assertEquals(atKill, progress.receiveMessage(Duration.ofSeconds(30)).done(), "resumed with the items already done");
      JobResult done = result.receiveMessage(Duration.ofSeconds(60));
      assertInstanceOf(JobResult.Completed.class, done, done::toString);
      assertEquals(COUNT, done.done());
    }
    long resumeMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t1);

    Set<Long> expectedAgain = new HashSet<>();
    for (long i = atKill; i < COUNT; i++) {
      expectedAgain.add(i);
    }
    assertEquals(expectedAgain, computedAgain, "only the unfinished items were computed again");
    List<String> lines = Files.readAllLines(output);
    assertEquals(COUNT, lines.size(), "one line per item, none twice");
    Map<Long, String> after = ResultJournal.read(output);
    for (long i = 0; i < COUNT; i++) {
      assertEquals(expectedLine(i), after.get(i), "item " + i);
    }
    System.err.printf("resume test: child killed after %d ms with %d of %d items written; resumed run took %d ms%n",
        killedAfterMs, atKill, COUNT, resumeMs);
  }

  private static String read(Path log) {
    try {
      return Files.readString(log);
    } catch (Exception e) {
      return "(no log: " + e + ")";
    }
  }
}
