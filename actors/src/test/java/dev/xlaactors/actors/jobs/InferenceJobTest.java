package dev.xlaactors.actors.jobs;

import static dev.xlaactors.actors.jobs.JobPrograms.expectedLine;
import static dev.xlaactors.actors.jobs.JobPrograms.itemInput;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.CompileException;
import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.XlaClient;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Supervised inference jobs on the real plugin: batch scoring into an output file, retries with backoff,
 * failure reports, fatal errors, progress, cancellation of a step blocked in a callback, the job timeout,
 * and an autoregressive generation. Backoff in the test config: 20 ms doubling to 200 ms; max-retries 3.
 */
class InferenceJobTest {
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static final Duration WAIT = Duration.ofSeconds(60);

  private static XlaClient client;
  private static JobSettings settings;
  private CallbackRuntime callbacks;
  @TempDir Path dir;

  @BeforeAll
  static void start() {
    client = XlaClient.create();
    settings = JobSettings.create(testKit.system());
  }

  @AfterAll
  static void stop() {
    client.close();
    testKit.shutdownTestKit();
  }

  @BeforeEach
  void newCallbackRuntime() {
    // One per test, so each test may register its own function under a name like "sample".
    callbacks = CallbackRuntime.create(testKit.system(), client);
  }

  @AfterEach
  void nothingIsLeftWaiting() throws InterruptedException {
    awaitNoPendingHostCalls(Duration.ofSeconds(5));
    callbacks.close();
  }

  private static void awaitNoPendingHostCalls(Duration within) throws InterruptedException {
    long deadline = System.nanoTime() + within.toNanos();
    while (HostCall.pendingCount() > 0 && System.nanoTime() < deadline) {
      Thread.sleep(5);
    }
    assertEquals(0, HostCall.pendingCount(), "host calls left pending");
  }

  private ActorRef<InferenceJob.Command> startJob(
      String name, Program step, JobWork work, JobSettings jobSettings, TestProbe<JobResult> result, TestProbe<Progress> progress) {
    ActorRef<InferenceJob.Command> job = testKit.spawn(InferenceJob.create(name, step, client, callbacks, work, jobSettings));
    if (progress != null) {
      job.tell(new InferenceJob.Subscribe(progress.getRef()));
    }
    job.tell(new InferenceJob.Start(result.getRef()));
    return job;
  }

  private static <T extends JobResult> T expectResult(TestProbe<JobResult> probe, Class<T> type) {
    JobResult r = probe.receiveMessage(WAIT);
    return assertInstanceOf(type, r, () -> "expected " + type.getSimpleName() + ", got " + r);
  }

  private static void assertEveryItemOnce(Path output, int count) throws Exception {
    Map<Long, String> lines = ResultJournal.read(output);
    assertEquals(count, lines.size());
    for (long i = 0; i < count; i++) {
      assertEquals(expectedLine(i), lines.get(i), "item " + i);
    }
    assertEquals(count, java.nio.file.Files.readAllLines(output).size(), "no line twice");
  }

  @Test
  void aCancelDuringOpenWaitsForTheOpenBeforeClosingSoTheFileIsFreeAfterwards() throws Exception {
    Path output = dir.resolve("late-open.tsv");
    CountDownLatch opening = new CountDownLatch(1);
    CountDownLatch finishOpen = new CountDownLatch(1);
    AtomicInteger closes = new AtomicInteger();
    BatchScoring batch = BatchScoring.create(30, i -> List.of(itemInput(i)), output, settings);
    JobWork slowOpen = new JobWork() {
      @Override public Plan open() throws Exception {
        opening.countDown();
        finishOpen.await(); // e.g. reading a large journal
        return batch.open();
      }
      @Override public java.util.OptionalLong next(long previous) { return batch.next(previous); }
      @Override public List<HostTensor> input(long item) throws Exception { return batch.input(item); }
      @Override public boolean accept(long item, List<HostTensor> outputs) throws Exception { return batch.accept(item, outputs); }
      @Override public void close() throws java.io.IOException {
        closes.incrementAndGet();
        batch.close();
      }
    };
    TestProbe<JobResult> result = testKit.createTestProbe();
    ActorRef<InferenceJob.Command> job = startJob("late-open", JobPrograms.twicePlusOne(), slowOpen, settings, result, null);
    assertTrue(opening.await(30, TimeUnit.SECONDS));
    TestProbe<JobResult> canceller = testKit.createTestProbe();
    job.tell(new InferenceJob.Cancel("cancelled at once", canceller.getRef()));
    canceller.expectNoMessage(Duration.ofMillis(300)); // the open is still running: the work is not closed under it
    assertEquals(0, closes.get());
    finishOpen.countDown();
    expectResult(canceller, JobResult.Cancelled.class);
    assertEquals(1, closes.get(), "closed once, after the open");
    // The late open's lock was released by the close: the same job starts again at once.
    TestProbe<JobResult> again = testKit.createTestProbe();
    startJob("late-open-again", JobPrograms.twicePlusOne(),
        BatchScoring.create(30, i -> List.of(itemInput(i)), output, settings), settings, again, null);
    assertEquals(30, expectResult(again, JobResult.Completed.class).done());
    assertEveryItemOnce(output, 30);
  }

  @Test
  void aBatchJobWritesEveryItemsResult() throws Exception {
    Path output = dir.resolve("scores.tsv");
    TestProbe<JobResult> result = testKit.createTestProbe();
    startJob("batch", JobPrograms.twicePlusOne(),
        BatchScoring.create(120, i -> List.of(itemInput(i)), output, settings), settings, result, null);
    JobResult.Completed done = expectResult(result, JobResult.Completed.class);
    assertEquals(120, done.done());
    assertEveryItemOnce(output, 120);
  }

  @Test
  void theSameJobStartedAgainFindsEverythingDone() throws Exception {
    Path output = dir.resolve("twice.tsv");
    TestProbe<JobResult> result = testKit.createTestProbe();
    startJob("first", JobPrograms.twicePlusOne(),
        BatchScoring.create(30, i -> List.of(itemInput(i)), output, settings), settings, result, null);
    expectResult(result, JobResult.Completed.class);
    // Started as soon as the first one answered: its output file is already closed and unlocked.
    AtomicInteger inputs = new AtomicInteger();
    startJob("again", JobPrograms.twicePlusOne(), BatchScoring.create(30, i -> {
      inputs.incrementAndGet();
      return List.of(itemInput(i));
    }, output, settings), settings, result, null);
    assertEquals(30, expectResult(result, JobResult.Completed.class).done());
    assertEquals(0, inputs.get(), "nothing computed again");
    assertEveryItemOnce(output, 30);
  }

  @Test
  void aFailingStepIsRetriedWithBackoffAndTheJobSucceeds() throws Exception {
    Map<Float, AtomicInteger> attempts = new ConcurrentHashMap<>();
    Program flaky = JobPrograms.twicePlusOneChecked("flaky", (in, s) -> {
      float first = in.get(0).toFloatArray()[0];
      int attempt = attempts.computeIfAbsent(first, k -> new AtomicInteger()).incrementAndGet();
      if (first == 7f && attempt <= 2) {
        throw new IllegalStateException("transient failure " + attempt + " of item 7");
      }
      return in;
    });
    Path output = dir.resolve("flaky.tsv");
    TestProbe<JobResult> result = testKit.createTestProbe();
    long t0 = System.nanoTime();
    startJob("flaky", flaky, BatchScoring.create(20, i -> List.of(itemInput(i)), output, settings), settings, result, null);
    expectResult(result, JobResult.Completed.class);
    assertEquals(3, attempts.get(7f).get(), "item 7: two failures, then success");
    assertEquals(1, attempts.get(8f).get());
    // Backoff 20 ms then 40 ms: the job cannot have been faster than that.
    assertTrue(System.nanoTime() - t0 >= TimeUnit.MILLISECONDS.toNanos(60));
    assertEveryItemOnce(output, 20);
  }

  @Test
  void aStepFailingMoreThanMaxRetriesFailsTheJobWithAReport() throws Exception {
    AtomicInteger tries = new AtomicInteger();
    Program broken = JobPrograms.twicePlusOneChecked("broken-at-5", (in, s) -> {
      if (in.get(0).toFloatArray()[0] == 5f) {
        tries.incrementAndGet();
        throw new IllegalStateException("item 5 is always broken");
      }
      return in;
    });
    Path output = dir.resolve("broken.tsv");
    TestProbe<JobResult> result = testKit.createTestProbe();
    startJob("broken", broken, BatchScoring.create(10, i -> List.of(itemInput(i)), output, settings), settings, result, null);
    JobResult.Failed failed = expectResult(result, JobResult.Failed.class);
    JobResult.FailureReport report = failed.report();
    assertEquals(5, report.item());
    assertEquals(settings.maxRetries() + 1, report.attempts());
    assertEquals(4, tries.get());
    assertFalse(report.fatal());
    assertInstanceOf(CallbackException.class, report.cause().orElseThrow());
    assertTrue(report.message().startsWith("item 5 failed 4 times (xla-actors.actors.jobs.max-retries = 3)"), report.message());
    assertTrue(report.message().contains("item 5 is always broken"), report.message());
    assertEquals(5, failed.done());
    assertEquals(5, ResultJournal.read(output).size(), "items 0-4 are in the file");
  }

  @Test
  void aFatalErrorStopsTheJobAtOnce() throws Exception {
    AtomicInteger calls = new AtomicInteger();
    ItemSource source = i -> {
      if (i == 3) {
        calls.incrementAndGet();
        throw new FatalJobException("item 3 has no data");
      }
      return List.of(itemInput(i));
    };
    TestProbe<JobResult> result = testKit.createTestProbe();
    startJob("fatal", JobPrograms.twicePlusOne(), BatchScoring.create(10, source, dir.resolve("fatal.tsv"), settings),
        settings, result, null);
    JobResult.Failed failed = expectResult(result, JobResult.Failed.class);
    assertEquals(3, failed.report().item());
    assertEquals(1, failed.report().attempts());
    assertTrue(failed.report().fatal());
    assertEquals(1, calls.get(), "never retried");
    assertTrue(failed.report().message().contains("item 3 has no data"), failed.report().message());
  }

  @Test
  void aStepThatDoesNotCompileIsFatal() {
    Program broken = Program.ofText("broken", ComputationActorTest.TWICE_PLUS_ONE.replace("%one :", "%none :"));
    TestProbe<JobResult> result = testKit.createTestProbe();
    startJob("no-compile", broken, BatchScoring.create(10, i -> List.of(itemInput(i)), dir.resolve("x.tsv"), settings),
        settings, result, null);
    JobResult.Failed failed = expectResult(result, JobResult.Failed.class);
    assertEquals(0, failed.report().item());
    assertEquals(1, failed.report().attempts());
    assertInstanceOf(CompileException.class, failed.report().cause().orElseThrow());
    assertTrue(failed.report().message().contains("Program(broken) did not compile"), failed.report().message());
  }

  @Test
  void progressReachesSubscribersWithSaneNumbers() {
    int count = 60;
    TestProbe<JobResult> result = testKit.createTestProbe();
    TestProbe<Progress> progress = testKit.createTestProbe();
    ItemSource slowish = i -> {
      Thread.sleep(5);
      return List.of(itemInput(i));
    };
    startJob("progress", JobPrograms.twicePlusOne(), BatchScoring.create(count, slowish, dir.resolve("p.tsv"), settings),
        settings, result, progress);
    expectResult(result, JobResult.Completed.class);
    List<Progress> seen = new ArrayList<>();
    Progress p;
    do {
      p = progress.receiveMessage(WAIT);
      seen.add(p);
    } while (p.done() < count);
    assertTrue(seen.size() >= 3, "first, some in between, last: " + seen);
    assertEquals(0, seen.get(0).done());
    long previous = -1;
    for (Progress each : seen) {
      assertEquals(count, each.total());
      assertEquals("progress", each.job());
      assertTrue(each.done() >= previous, "done never goes back: " + seen);
      previous = each.done();
      if (each.done() > 0 && each.done() < count) {
        assertTrue(each.itemsPerSecond() > 0 && each.itemsPerSecond() < 1000, each.toString()); // >= 5 ms per item
        Duration eta = each.estimatedTimeLeft().orElseThrow();
        double expected = (count - each.done()) / each.itemsPerSecond();
        assertEquals(expected, eta.toMillis() / 1000.0, 0.01, each.toString());
      }
    }
    Progress last = seen.get(seen.size() - 1);
    assertEquals(Optional.of(Duration.ZERO), last.estimatedTimeLeft());
    assertTrue(last.line().startsWith(count + "/" + count + " (100%)"), last.line());
  }

  @Test
  void aGenerationSamplesInJavaEachStepAndStopsWhenTheSamplerSaysSo() {
    Random random = new Random(42);
    List<Integer> sampled = new ArrayList<>();
    int stopToken = 0;
    var lm = JobPrograms.tinyLanguageModel(16, 8, 7, (in, s) -> {
      float[] probs = in.get(0).toFloatArray();
      float sum = 0;
      for (float v : probs) {
        sum += v;
      }
      if (Math.abs(sum - 1f) > 1e-4) {
        throw new IllegalStateException("not a distribution: " + sum);
      }
      int token = JobPrograms.sample(probs, random);
      sampled.add(token);
      return List.of(HostTensor.ofInts(new int[] {token}), HostTensor.ofInts(new int[] {token == stopToken ? 1 : 0}));
    });
    List<Integer> fedBack = new ArrayList<>();
    Generation generation = Generation.create(List.of(HostTensor.ofInts(new int[] {3})), 200, (step, outputs) -> {
      int token = outputs.get(0).toIntArray()[0];
      fedBack.add(token);
      return outputs.get(1).toIntArray()[0] == 1 ? Optional.empty() : Optional.of(List.of(HostTensor.ofInts(new int[] {token})));
    });
    TestProbe<JobResult> result = testKit.createTestProbe();
    startJob("generation", Program.of(lm), generation, settings, result, null);
    JobResult.Completed done = expectResult(result, JobResult.Completed.class);
    assertEquals(sampled, fedBack, "every step's sample came back as the step's output");
    assertEquals(sampled.size(), done.done());
    assertTrue(sampled.size() == 200 || sampled.get(sampled.size() - 1) == stopToken, sampled.toString());
    assertTrue(sampled.subList(0, sampled.size() - 1).stream().noneMatch(t -> t == stopToken), "stopped at the first stop token");
  }

  @Test
  void cancelDuringAStepBlockedInACallbackEndsPromptlyAndLeavesNothingPending() throws Exception {
    CountDownLatch blocked = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    AtomicInteger steps = new AtomicInteger();
    var lm = JobPrograms.tinyLanguageModel(16, 8, 7, (in, s) -> {
      if (steps.incrementAndGet() == 4) {
        blocked.countDown();
        release.await(); // the sampler hangs, e.g. waiting for a user
      }
      return List.of(HostTensor.ofInts(new int[] {1}), HostTensor.ofInts(new int[] {0}));
    });
    Generation generation = Generation.create(List.of(HostTensor.ofInts(new int[] {3})), 1000,
        (step, outputs) -> Optional.of(List.of(outputs.get(0))));
    TestProbe<JobResult> result = testKit.createTestProbe();
    ActorRef<InferenceJob.Command> job = startJob("cancelled", Program.of(lm), generation, settings, result, null);
    try {
      assertTrue(blocked.await(30, TimeUnit.SECONDS));
      assertEquals(1, HostCall.pendingCount(), "the step waits on its callback");
      TestProbe<JobResult> canceller = testKit.createTestProbe();
      long t0 = System.nanoTime();
      job.tell(new InferenceJob.Cancel("user pressed Ctrl-C", canceller.getRef()));
      JobResult.Cancelled cancelled = expectResult(canceller, JobResult.Cancelled.class);
      long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      assertTrue(millis < 2000, "cancelled in " + millis + " ms");
      assertEquals("user pressed Ctrl-C", cancelled.reason());
      assertEquals(3, cancelled.done());
      assertEquals(cancelled, result.receiveMessage(WAIT), "the starter hears the same result");
      awaitNoPendingHostCalls(Duration.ofSeconds(2));
      testKit.createTestProbe().expectTerminated(job, WAIT);
    } finally {
      release.countDown();
    }
  }

  @Test
  void aJobThatRunsPastItsTimeoutEndsTimedOutNamingTheKey() throws Exception {
    JobSettings tight = settings.withTimeout(Duration.ofMillis(300));
    ItemSource slow = i -> {
      Thread.sleep(20);
      return List.of(itemInput(i));
    };
    Path output = dir.resolve("slow.tsv");
    TestProbe<JobResult> result = testKit.createTestProbe();
    long t0 = System.nanoTime();
    startJob("slow", JobPrograms.twicePlusOne(), BatchScoring.create(1000, slow, output, tight), tight, result, null);
    JobResult.TimedOut timedOut = expectResult(result, JobResult.TimedOut.class);
    long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    assertTrue(millis >= 300 && millis < 3000, "timed out after " + millis + " ms");
    assertEquals("job 'slow' did not finish within 300ms (xla-actors.actors.jobs.timeout)", timedOut.message());
    assertTrue(timedOut.done() > 0 && timedOut.done() < 1000, timedOut.toString());
    Thread.sleep(100); // a write in progress at the timeout may still land; it stays exactly-once
    Map<Long, String> lines = ResultJournal.read(output);
    lines.forEach((i, line) -> assertEquals(expectedLine(i), line));
  }
}
