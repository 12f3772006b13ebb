package dev.xlaactors.actors.serve;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.serve.ModelServer.Cancel;
import dev.xlaactors.actors.serve.ModelServer.Command;
import dev.xlaactors.actors.serve.ModelServer.Infer;
import dev.xlaactors.actors.serve.ModelServer.Prediction;
import dev.xlaactors.error.BatchFailedException;
import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.OverloadedException;
import dev.xlaactors.error.RequestCancelledException;
import dev.xlaactors.error.RequestTimeoutException;
import dev.xlaactors.error.ServingException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.LoadedPackage;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.Role;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import com.typesafe.config.ConfigFactory;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.stream.javadsl.Sink;
import org.apache.pekko.stream.javadsl.Source;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * ModelServer on the real plugin with the scoring package of tools/jax_scoring_model.py (y = relu(x . W), D =
 * 64, relu a Java host callback that sees the whole padded batch): values per request equal the unbatched
 * model's, and each failure (overload, expired deadlines, cancellation mid-batch, a callback failing inside
 * a batch, a stopped server, invalid inputs) gets its typed answer, exactly one per request, also under
 * thousands of concurrent requests. Behaviour only: no assertion depends on timing beyond generous waits.
 */
class ModelServerTest {
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static final long WAIT_S = 60;
  private static XlaClient client;
  private static LoadedPackage scoringPackage;
  private static BatchedModel model;

  private CallbackRuntime callbacks;
  private ScoringCallbacks scoring;
  private SimpleMeterRegistry registry;
  private final CountDownLatch entered = new CountDownLatch(1);
  private final CountDownLatch release = new CountDownLatch(1);
  private final List<ActorRef<Command>> servers = new ArrayList<>();

  @BeforeAll
  static void load() {
    client = XlaClient.create();
    scoringPackage = ModelPackage.open(ScoringCallbacks.dir()).load(client.devices().get(0));
    model = BatchedModel.of(scoringPackage, Role.MAIN);
  }

  @AfterAll
  static void close() {
    testKit.shutdownTestKit();
    scoringPackage.close(); // it owns the batched model's Models
    client.close();
  }

  @BeforeEach
  void start() {
    callbacks = CallbackRuntime.create(testKit.system(), client);
    scoring = ScoringCallbacks.register(callbacks);
    registry = new SimpleMeterRegistry();
  }

  @AfterEach
  void stop() {
    release.countDown();
    servers.forEach(testKit::stop);
    callbacks.close();
  }

  private static ServeSettings.Model settings(int maxBatch, Duration maxDelay, int queue) {
    return new ServeSettings.Model(maxBatch, maxDelay, queue, Duration.ofSeconds(30), 1);
  }

  private ActorRef<Command> server(ServeSettings.Model settings) {
    ActorRef<Command> server = testKit.spawn(ModelServer.create(model, callbacks, settings, registry));
    servers.add(server);
    return server;
  }

  /** Makes the first batch's callback wait for {@link #release} (and signal {@link #entered}). */
  private void blockFirstBatch() {
    AtomicInteger calls = new AtomicInteger();
    scoring.hook = (h, b) -> {
      if (calls.getAndIncrement() == 0) {
        entered.countDown();
        assertTrue(release.await(WAIT_S, TimeUnit.SECONDS), "the test never released the batch");
      }
    };
  }

  private void awaitEntered() throws InterruptedException {
    assertTrue(entered.await(WAIT_S, TimeUnit.SECONDS), "the first batch never reached its callback");
  }

  private CompletableFuture<Prediction> ask(ActorRef<Command> server, String id, float[] x, Duration timeout) {
    return ModelServer.ask(server, id, List.of(ScoringCallbacks.tensor(x)), timeout, testKit.system().scheduler()).toCompletableFuture();
  }

  private static Throwable failure(CompletableFuture<?> f) throws InterruptedException {
    try {
      f.get(WAIT_S, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      return e.getCause();
    } catch (java.util.concurrent.TimeoutException e) {
      fail("no answer within " + WAIT_S + " s");
    }
    return fail("expected a failure, got " + f.join());
  }

  private void assertScores(float[] x, Prediction p) {
    double[] want = scoring.expected(x);
    float[] got = p.outputs().get(0).toFloatArray();
    assertEquals(ScoringCallbacks.D, got.length);
    for (int j = 0; j < got.length; j++) {
      assertEquals(want[j], got[j], 1e-4, "request " + p.requestId() + " element " + j);
    }
  }

  @Test
  void eachRequestGetsItsOwnRowEqualToTheUnbatchedModelsResult() throws Exception {
    ActorRef<Command> server = server(settings(32, Duration.ofMillis(20), 1024));
    Random random = new Random(1);
    int n = 200;
    List<float[]> inputs = new ArrayList<>();
    List<CompletableFuture<Prediction>> answers = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      inputs.add(ScoringCallbacks.randomInput(random));
      answers.add(ask(server, "r" + i, inputs.get(i), null));
    }
    int batched = 0;
    Set<Long> batches = new HashSet<>();
    for (int i = 0; i < n; i++) {
      Prediction p = answers.get(i).get(WAIT_S, TimeUnit.SECONDS);
      assertEquals("r" + i, p.requestId());
      assertScores(inputs.get(i), p);
      // The unbatched model (batch size 1) on the same input gives the same row.
      float[] alone = callbacks.run(model.model(1), List.of(Argument.of(HostTensor.ofFloats(inputs.get(i), 1, ScoringCallbacks.D))))
          .get(0).toFloatArray();
      float[] got = p.outputs().get(0).toFloatArray();
      for (int j = 0; j < got.length; j++) {
        assertEquals(alone[j], got[j], 1e-5f, "request " + i + " element " + j + " vs the unbatched model");
      }
      assertTrue(p.requestsInBatch() >= 1 && p.requestsInBatch() <= 32, "requests in batch " + p.requestsInBatch());
      assertEquals(model.sizeFor(p.requestsInBatch()), p.batchSize(), "padded to the smallest compiled size that holds the batch");
      batched += p.requestsInBatch() > 1 ? 1 : 0;
      batches.add(p.batch());
    }
    assertTrue(batched > 0, "200 requests sent at once were all run alone: no batching happened");
    // Metrics: every request counted once as ok, every batch once with its requests.
    assertEquals(n, registry.get("xla.serve.requests").tag("outcome", "ok").counter().count());
    DistributionSummary sizes = registry.get("xla.serve.batch.size").summary();
    assertEquals(batches.size(), sizes.count());
    assertEquals(n, sizes.totalAmount());
    assertEquals(n, registry.get("xla.serve.latency").timer().count());
    assertEquals(0, registry.get("xla.serve.queue.depth").gauge().value());
    testKit.stop(server);
    assertTrue(registry.find("xla.serve.latency").timers().isEmpty(), "a stopped server removes its meters");
  }

  @Test
  void beyondTheQueueARequestIsRefusedAtOnceAsOverloaded() throws Exception {
    blockFirstBatch();
    ActorRef<Command> server = server(settings(4, Duration.ZERO, 8));
    Random random = new Random(2);
    float[] first = ScoringCallbacks.randomInput(random);
    CompletableFuture<Prediction> running = ask(server, "first", first, null);
    awaitEntered();
    List<float[]> inputs = new ArrayList<>();
    List<CompletableFuture<Prediction>> answers = new ArrayList<>();
    for (int i = 0; i < 30; i++) {
      inputs.add(ScoringCallbacks.randomInput(random));
      answers.add(ask(server, "q" + i, inputs.get(i), null));
    }
    // While the first batch is held, the 8 that fit wait and the other 22 are refused, without waiting.
    for (int i = 8; i < 30; i++) {
      Throwable t = failure(answers.get(i));
      OverloadedException o = assertInstanceOf(OverloadedException.class, t);
      assertEquals(ErrorCode.RESOURCE_EXHAUSTED, o.code());
      assertEquals("q" + i, o.requestId());
      assertTrue(o.getMessage().contains("queue-capacity = 8"), o.getMessage());
    }
    for (int i = 0; i < 8; i++) {
      assertFalse(answers.get(i).isDone(), "request " + i + " fits in the queue: it must wait, not be refused");
    }
    release.countDown();
    assertScores(first, running.get(WAIT_S, TimeUnit.SECONDS));
    for (int i = 0; i < 8; i++) {
      assertScores(inputs.get(i), answers.get(i).get(WAIT_S, TimeUnit.SECONDS));
    }
    assertEquals(22, registry.get("xla.serve.requests").tag("outcome", "overloaded").counter().count());
    assertEquals(9, registry.get("xla.serve.requests").tag("outcome", "ok").counter().count());
  }

  @Test
  void aRequestWhoseDeadlineExpiresWhileQueuedIsAnsweredAndNeverComputed() throws Exception {
    blockFirstBatch();
    ActorRef<Command> server = server(settings(4, Duration.ZERO, 64));
    Random random = new Random(3);
    float[] first = ScoringCallbacks.randomInput(random);
    CompletableFuture<Prediction> running = ask(server, "first", first, Duration.ofSeconds(30));
    awaitEntered();
    List<CompletableFuture<Prediction>> queued = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      queued.add(ask(server, "late" + i, ScoringCallbacks.randomInput(random), Duration.ofMillis(200)));
    }
    for (int i = 0; i < 6; i++) {
      RequestTimeoutException t = assertInstanceOf(RequestTimeoutException.class, failure(queued.get(i)));
      assertEquals(ErrorCode.DEADLINE_EXCEEDED, t.code());
      assertTrue(t.getMessage().contains("while queued: it was not computed"), t.getMessage());
    }
    assertFalse(running.isDone(), "the batch is still held");
    release.countDown();
    assertScores(first, running.get(WAIT_S, TimeUnit.SECONDS));
    // The server goes on, and the expired requests never reached the program: one row of size 1 so far.
    float[] after = ScoringCallbacks.randomInput(random);
    assertScores(after, ask(server, "after", after, null).get(WAIT_S, TimeUnit.SECONDS));
    assertEquals(2, scoring.callbackRows.get(), "rows the callback saw: the first request's and the last one's");
    assertEquals(2, registry.get("xla.serve.batch.size").summary().totalAmount());
    assertEquals(6, registry.get("xla.serve.requests").tag("outcome", "timeout").counter().count());
  }

  @Test
  void aRequestWhoseDeadlineExpiresWhileItsBatchRunsIsAnsweredAtOnce() throws Exception {
    blockFirstBatch();
    ActorRef<Command> server = server(settings(4, Duration.ZERO, 64));
    Random random = new Random(4);
    CompletableFuture<Prediction> running = ask(server, "short", ScoringCallbacks.randomInput(random), Duration.ofMillis(300));
    awaitEntered();
    RequestTimeoutException t = assertInstanceOf(RequestTimeoutException.class, failure(running));
    assertTrue(t.getMessage().contains("while its batch 1 ran"), t.getMessage());
    release.countDown();
    float[] next = ScoringCallbacks.randomInput(random);
    assertScores(next, ask(server, "next", next, null).get(WAIT_S, TimeUnit.SECONDS));
  }

  @Test
  void aCancelledRequestLeavesItsBatchWithoutDisturbingTheOthers() throws Exception {
    blockFirstBatch();
    ActorRef<Command> server = server(settings(4, Duration.ofSeconds(5), 64));
    Random random = new Random(5);
    List<float[]> inputs = new ArrayList<>();
    List<CompletableFuture<Prediction>> answers = new ArrayList<>();
    for (int i = 0; i < 4; i++) { // a full batch runs at once, without waiting for max-delay
      inputs.add(ScoringCallbacks.randomInput(random));
      answers.add(ask(server, "b" + i, inputs.get(i), null));
    }
    awaitEntered();
    CompletableFuture<Prediction> queued = ask(server, "queued", ScoringCallbacks.randomInput(random), null);
    server.tell(new Cancel("b2", "the client went away"));
    server.tell(new Cancel("queued", "no longer needed"));
    RequestCancelledException c = assertInstanceOf(RequestCancelledException.class, failure(answers.get(2)));
    assertEquals(ErrorCode.CANCELLED, c.code());
    assertTrue(c.getMessage().contains("the client went away") && c.getMessage().contains("while its batch 1 ran"), c.getMessage());
    RequestCancelledException q = assertInstanceOf(RequestCancelledException.class, failure(queued));
    assertTrue(q.getMessage().contains("while queued: it was not computed"), q.getMessage());
    for (int i : new int[] {0, 1, 3}) {
      assertFalse(answers.get(i).isDone(), "request b" + i + " must still wait for its batch");
    }
    release.countDown();
    for (int i : new int[] {0, 1, 3}) {
      Prediction p = answers.get(i).get(WAIT_S, TimeUnit.SECONDS);
      assertScores(inputs.get(i), p);
      assertEquals(1, p.batch());
      assertEquals(4, p.requestsInBatch());
    }
    assertEquals(4, scoring.callbackRows.get(), "one batch of 4 ran; the cancelled queued request never did");
    server.tell(new Cancel("b0", "too late")); // answered already: nothing happens
    assertEquals(2, registry.get("xla.serve.requests").tag("outcome", "cancelled").counter().count());
  }

  @Test
  void aBatchWhoseRequestsAllLeftIsCancelledAndFreesTheModel() throws Exception {
    blockFirstBatch();
    ActorRef<Command> server = server(settings(4, Duration.ZERO, 64));
    Random random = new Random(13);
    CompletableFuture<Prediction> gone = ask(server, "gone", ScoringCallbacks.randomInput(random), null);
    awaitEntered();
    server.tell(new Cancel("gone", "the client went away"));
    assertInstanceOf(RequestCancelledException.class, failure(gone));
    // Its run is cancelled at the callback it waits in, so the next request does not wait for the release.
    float[] x = ScoringCallbacks.randomInput(random);
    Prediction next = ask(server, "next", x, null).get(WAIT_S, TimeUnit.SECONDS);
    assertScores(x, next);
    assertEquals(1, release.getCount(), "answered while the first batch's callback was still held");
    // Not by the callback's timeout (3 s in the tests' config): the run was cancelled.
    dev.xlaactors.actors.RuntimeMetrics.Snapshot relu = callbacks.metrics().callbacks().get("relu_b1");
    assertEquals(0, relu == null ? 0 : relu.timeouts(), "relu_b1 " + relu);
    assertEquals(0, callbacks.metrics().runs().timeouts(), "runs " + callbacks.metrics().runs());
  }

  /** An actor system (over the tests' config plus {@code config}) whose run dispatcher has one thread: a second run waits for it. */
  private static ActorTestKit oneRunThread(String config) {
    return ActorTestKit.create("one-run-thread", ConfigFactory.parseString(
            "xla-actors.actors.run-dispatcher.thread-pool-executor.fixed-pool-size = 1\n" + config)
        .withFallback(testKit.system().settings().config()));
  }

  private static long computeTimes(SimpleMeterRegistry registry) {
    return registry.get("xla.serve.compute.time").timer().count();
  }

  @Test
  void aBatchWhoseRequestsAllLeftHoldsItsPlaceInFlightUntilItsRunHasEnded() throws Exception {
    ActorTestKit kit = oneRunThread("");
    CallbackRuntime runtime = CallbackRuntime.create(kit.system(), client);
    try {
      ScoringCallbacks s = ScoringCallbacks.register(runtime);
      AtomicInteger calls = new AtomicInteger();
      s.hook = (h, b) -> {
        if (calls.getAndIncrement() == 0) {
          entered.countDown();
          assertTrue(release.await(WAIT_S, TimeUnit.SECONDS), "the test never released the batch");
        }
      };
      ActorRef<Command> server = kit.spawn(ModelServer.create(model, runtime, new ServeSettings.Model(1, Duration.ZERO, 64,
          Duration.ofSeconds(30), 2), registry));
      Random random = new Random(21);
      float[] xa = ScoringCallbacks.randomInput(random);
      float[] xc = ScoringCallbacks.randomInput(random);
      CompletableFuture<Prediction> a = ModelServer.ask(server, "a", List.of(ScoringCallbacks.tensor(xa)), null, kit.system().scheduler())
          .toCompletableFuture();
      awaitEntered(); // batch 1 holds the one run thread
      CompletableFuture<Prediction> b = ModelServer.ask(server, "b", List.of(ScoringCallbacks.tensor(ScoringCallbacks.randomInput(random))), null,
          kit.system().scheduler()).toCompletableFuture(); // batch 2: its run waits for the thread
      CompletableFuture<Prediction> c = ModelServer.ask(server, "c", List.of(ScoringCallbacks.tensor(xc)), null, kit.system().scheduler())
          .toCompletableFuture(); // two batches in flight: c waits in the server's queue
      server.tell(new Cancel("b", "the client went away"));
      assertInstanceOf(RequestCancelledException.class, failure(b));
      // Batch 2's result (cancelled) has reached the server once its compute time is counted; its run has not
      // ended (it still waits for the run thread), so c must not take its place yet.
      long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
      while (computeTimes(registry) < 1 && System.nanoTime() < until) {
        Thread.sleep(10);
      }
      assertEquals(1, computeTimes(registry), "batch 2's result never reached the server");
      TestProbe<ModelServer.Status> status = kit.createTestProbe();
      server.tell(new ModelServer.GetStatus(status.getRef()));
      assertEquals(new ModelServer.Status("scoring", 1, 64, 2, 1, true), status.receiveMessage(Duration.ofSeconds(WAIT_S)),
          "c must wait while batch 2's run has not ended");
      release.countDown();
      assertScores(xa, a.get(WAIT_S, TimeUnit.SECONDS));
      assertScores(xc, c.get(WAIT_S, TimeUnit.SECONDS));
      kit.stop(server);
    } finally {
      release.countDown();
      runtime.close();
      kit.shutdownTestKit();
    }
  }

  @Test
  void aBatchWhoseRunWasRefusedFailsAndIsNotTimedAsComputed() throws Exception {
    // One run thread and room for one run waiting for it: a third batch's run is refused by the runtime.
    ActorTestKit kit = oneRunThread("xla-actors.actors.runs.queue-capacity = 1");
    CallbackRuntime runtime = CallbackRuntime.create(kit.system(), client);
    try {
      ScoringCallbacks s = ScoringCallbacks.register(runtime);
      AtomicInteger calls = new AtomicInteger();
      s.hook = (h, b) -> {
        if (calls.getAndIncrement() == 0) {
          entered.countDown();
          assertTrue(release.await(WAIT_S, TimeUnit.SECONDS), "the test never released the batch");
        }
      };
      ActorRef<Command> server = kit.spawn(ModelServer.create(model, runtime, new ServeSettings.Model(1, Duration.ZERO, 64,
          Duration.ofSeconds(30), 3), registry));
      Random random = new Random(22);
      float[] xa = ScoringCallbacks.randomInput(random);
      float[] xb = ScoringCallbacks.randomInput(random);
      CompletableFuture<Prediction> a = ModelServer.ask(server, "a", List.of(ScoringCallbacks.tensor(xa)), null, kit.system().scheduler())
          .toCompletableFuture();
      awaitEntered(); // batch 1 holds the one run thread
      CompletableFuture<Prediction> b = ModelServer.ask(server, "b", List.of(ScoringCallbacks.tensor(xb)), null, kit.system().scheduler())
          .toCompletableFuture(); // batch 2 waits for it: the run queue is full
      CompletableFuture<Prediction> c = ModelServer.ask(server, "c", List.of(ScoringCallbacks.tensor(ScoringCallbacks.randomInput(random))), null,
          kit.system().scheduler()).toCompletableFuture();
      BatchFailedException refused = assertInstanceOf(BatchFailedException.class, failure(c));
      assertEquals(ErrorCode.RESOURCE_EXHAUSTED, refused.code(), refused.getMessage());
      assertEquals(0, computeTimes(registry), "batch 3 never ran: no compute time (batches 1 and 2 are still in flight)");
      release.countDown();
      assertScores(xa, a.get(WAIT_S, TimeUnit.SECONDS));
      assertScores(xb, b.get(WAIT_S, TimeUnit.SECONDS));
      assertEquals(2, computeTimes(registry), "the two batches that ran");
      kit.stop(server);
    } finally {
      release.countDown();
      runtime.close();
      kit.shutdownTestKit();
    }
  }

  @Test
  void aCallbackFailingInsideABatchFailsThatBatchOnly() throws Exception {
    scoring.hook = (h, b) -> {
      for (int r = 0; r < b; r++) {
        if (Float.isNaN(h[r * ScoringCallbacks.D])) {
          throw new IllegalStateException("row " + r + " is poisoned");
        }
      }
    };
    ActorRef<Command> server = server(settings(8, Duration.ofMillis(5), 1024));
    Random random = new Random(6);
    int n = 300;
    List<float[]> inputs = new ArrayList<>();
    List<CompletableFuture<Prediction>> answers = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      float[] x = ScoringCallbacks.randomInput(random);
      if (i % 50 == 7) {
        java.util.Arrays.fill(x, Float.NaN);
      }
      inputs.add(x);
      answers.add(ask(server, "p" + i, x, null));
    }
    Set<Long> failedBatches = new HashSet<>();
    Set<Long> okBatches = new HashSet<>();
    int ok = 0;
    for (int i = 0; i < n; i++) {
      boolean poisoned = i % 50 == 7;
      try {
        Prediction p = answers.get(i).get(WAIT_S, TimeUnit.SECONDS);
        assertFalse(poisoned, "poisoned request " + i + " got a result");
        assertScores(inputs.get(i), p);
        okBatches.add(p.batch());
        ok++;
      } catch (ExecutionException e) {
        BatchFailedException b = assertInstanceOf(BatchFailedException.class, e.getCause());
        CallbackException cause = assertInstanceOf(CallbackException.class, b.getCause());
        assertTrue(cause.callbackName().startsWith("relu_b"), cause.callbackName());
        assertTrue(b.getMessage().contains("poisoned") && b.getMessage().contains("batch " + b.batch()), b.getMessage());
        failedBatches.add(b.batch());
      }
    }
    assertTrue(ok >= n - 6 * 8, "at most the 6 poisoned requests' batches (8 each) fail; ok " + ok);
    Set<Long> both = new HashSet<>(failedBatches);
    both.retainAll(okBatches);
    assertTrue(both.isEmpty(), "a batch both failed and succeeded: " + both);
    assertTrue(failedBatches.size() <= 6, "only batches holding a poisoned request fail: " + failedBatches);
  }

  /** Counts every answer by request id: the test's replyTo for thousands of requests. */
  private static Behavior<StatusReply<Prediction>> collector(Map<String, AtomicInteger> answers, Map<String, StatusReply<Prediction>> last) {
    return Behaviors.receiveMessage(reply -> {
      String id = reply.isSuccess() ? reply.getValue().requestId() : ((ServingException) reply.getError()).requestId();
      answers.computeIfAbsent(id, k -> new AtomicInteger()).incrementAndGet();
      last.put(id, reply);
      return Behaviors.same();
    });
  }

  @Test
  void everyRequestGetsExactlyOneAnswerUnderConcurrency() throws Exception {
    ActorRef<Command> server = server(settings(32, Duration.ofMillis(2), 200));
    Map<String, AtomicInteger> answers = new ConcurrentHashMap<>();
    Map<String, StatusReply<Prediction>> last = new ConcurrentHashMap<>();
    ActorRef<StatusReply<Prediction>> replyTo = testKit.spawn(collector(answers, last));
    int threads = 8;
    int perThread = 500;
    Map<String, float[]> inputs = new ConcurrentHashMap<>();
    List<Thread> senders = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      int thread = t;
      senders.add(new Thread(() -> {
        Random random = new Random(100 + thread);
        for (int i = 0; i < perThread; i++) {
          String id = "t" + thread + "-" + i;
          float[] x = ScoringCallbacks.randomInput(random);
          inputs.put(id, x);
          // A mix: most with the default deadline, some very short, some cancelled right away.
          Duration timeout = i % 7 == 0 ? Duration.ofMillis(1 + random.nextInt(5)) : null;
          server.tell(new Infer(id, List.of(ScoringCallbacks.tensor(x)), timeout, replyTo));
          if (i % 11 == 0) {
            server.tell(new Cancel(id, "changed my mind"));
          }
          if (i % 2 == 1 && i < perThread / 2) { // the first half paced, the second half a burst: some refusals
            try {
              Thread.sleep(1);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
              return;
            }
          }
        }
      }));
    }
    senders.forEach(Thread::start);
    for (Thread s : senders) {
      s.join();
    }
    int n = threads * perThread;
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
    while (last.size() < n && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    Thread.sleep(500); // room for any second answer to arrive
    assertEquals(n, last.size(), "requests answered");
    Map<String, Integer> outcomes = new HashMap<>();
    for (Map.Entry<String, AtomicInteger> e : answers.entrySet()) {
      assertEquals(1, e.getValue().get(), "answers to " + e.getKey());
      StatusReply<Prediction> reply = last.get(e.getKey());
      String outcome;
      if (reply.isSuccess()) {
        assertScores(inputs.get(e.getKey()), reply.getValue());
        outcome = "ok";
      } else {
        Throwable error = reply.getError();
        outcome = error instanceof OverloadedException ? "overloaded" : error instanceof RequestTimeoutException ? "timeout"
            : error instanceof RequestCancelledException ? "cancelled" : "unexpected " + error;
      }
      outcomes.merge(outcome, 1, Integer::sum);
    }
    assertTrue(outcomes.keySet().stream().noneMatch(o -> o.startsWith("unexpected")), outcomes.toString());
    assertTrue(outcomes.getOrDefault("ok", 0) > 0, outcomes.toString());
    double counted = 0;
    for (String o : ServeMetrics.OUTCOMES) {
      double c = registry.get("xla.serve.requests").tag("outcome", o).counter().count();
      assertEquals(outcomes.getOrDefault(o, 0), (int) c, "metric for outcome " + o + " vs " + outcomes);
      counted += c;
    }
    assertEquals(n, counted);
  }

  @Test
  void theFlowAnswersInOrderAndCarriesFailuresAsElements() throws Exception {
    ActorRef<Command> server = server(settings(32, Duration.ofMillis(5), 1024));
    Random random = new Random(7);
    List<List<HostTensor>> requests = new ArrayList<>();
    List<float[]> inputs = new ArrayList<>();
    for (int i = 0; i < 150; i++) {
      float[] x = ScoringCallbacks.randomInput(random);
      inputs.add(x);
      // One request of the wrong shape: a Failed element, the stream goes on.
      requests.add(i == 40 ? List.of(HostTensor.ofFloats(new float[3], 3)) : List.of(ScoringCallbacks.tensor(x)));
    }
    List<ModelServer.Outcome> outcomes = Source.from(requests)
        .via(ModelServer.flow(server, 32, Duration.ofSeconds(30), testKit.system().scheduler()))
        .runWith(Sink.seq(), testKit.system())
        .toCompletableFuture()
        .get(WAIT_S, TimeUnit.SECONDS);
    assertEquals(150, outcomes.size());
    for (int i = 0; i < 150; i++) {
      if (i == 40) {
        ModelServer.Failed f = assertInstanceOf(ModelServer.Failed.class, outcomes.get(i));
        assertInstanceOf(InvalidArgumentException.class, f.error());
        continue;
      }
      assertScores(inputs.get(i), assertInstanceOf(ModelServer.Ok.class, outcomes.get(i)).prediction());
    }
  }

  @Test
  void invalidRequestsAreRefusedNamingTheInputBeforeAnythingRuns() throws Exception {
    ActorRef<Command> server = server(settings(32, Duration.ofMillis(1), 1024));
    Map<List<HostTensor>, String> bad = new java.util.LinkedHashMap<>();
    bad.put(List.of(HostTensor.ofInts(new int[ScoringCallbacks.D], ScoringCallbacks.D)), "expected f32[64]");
    bad.put(List.of(HostTensor.ofFloats(new float[ScoringCallbacks.D], 1, ScoringCallbacks.D)), "got f32[1,64]");
    bad.put(List.of(), "takes 1 input(s) [[1]: f32[64]], got 0");
    bad.put(List.of(ScoringCallbacks.tensor(new float[ScoringCallbacks.D]), ScoringCallbacks.tensor(new float[ScoringCallbacks.D])), "got 2");
    for (Map.Entry<List<HostTensor>, String> e : bad.entrySet()) {
      Throwable t = failure(ModelServer.ask(server, e.getKey(), null, testKit.system().scheduler()).toCompletableFuture());
      InvalidArgumentException i = assertInstanceOf(InvalidArgumentException.class, t);
      assertTrue(i.getMessage().contains(e.getValue()) && i.getMessage().contains("model 'scoring'"), i.getMessage());
    }
    HostTensor closed = ScoringCallbacks.tensor(new float[ScoringCallbacks.D]);
    closed.close();
    Throwable t = failure(ModelServer.ask(server, List.of(closed), null, testKit.system().scheduler()).toCompletableFuture());
    assertTrue(t.getMessage().contains("input 0 '[1]' is closed"), t.getMessage());
    t = failure(ModelServer.ask(server, List.of(ScoringCallbacks.tensor(new float[ScoringCallbacks.D])), Duration.ZERO,
        testKit.system().scheduler()).toCompletableFuture());
    assertTrue(t.getMessage().contains("timeout must be positive"), t.getMessage());
    assertEquals(0, scoring.callbackRows.get(), "nothing reached the program");
    assertEquals(6, registry.get("xla.serve.requests").tag("outcome", "invalid").counter().count());
    // A timeout longer than a long of nanoseconds holds is no deadline, not a failure of the server.
    float[] x = ScoringCallbacks.randomInput(new Random(12));
    assertScores(x, ask(server, "forever", x, Duration.ofDays(1_000_000_000L)).get(WAIT_S, TimeUnit.SECONDS));
  }

  @Test
  void aDuplicateIdIsRefusedWhileTheFirstIsHeld() throws Exception {
    blockFirstBatch();
    ActorRef<Command> server = server(settings(4, Duration.ZERO, 64));
    float[] x = ScoringCallbacks.randomInput(new Random(8));
    CompletableFuture<Prediction> first = ask(server, "same", x, null);
    awaitEntered();
    Throwable t = failure(ask(server, "same", x, null));
    assertTrue(assertInstanceOf(InvalidArgumentException.class, t).getMessage().contains("already queued or running"), t.getMessage());
    release.countDown();
    assertScores(x, first.get(WAIT_S, TimeUnit.SECONDS));
  }

  @Test
  void stoppingTheServerAnswersEveryRequestItHolds() throws Exception {
    blockFirstBatch();
    ActorRef<Command> server = server(settings(2, Duration.ZERO, 64));
    Random random = new Random(9);
    List<CompletableFuture<Prediction>> answers = new ArrayList<>();
    answers.add(ask(server, "s0", ScoringCallbacks.randomInput(random), null));
    awaitEntered();
    for (int i = 1; i < 6; i++) {
      answers.add(ask(server, "s" + i, ScoringCallbacks.randomInput(random), null));
    }
    Thread.sleep(200); // let them reach the server's queue
    testKit.stop(server);
    for (CompletableFuture<Prediction> a : answers) {
      ServingException s = assertInstanceOf(ServingException.class, failure(a));
      assertEquals(ErrorCode.UNAVAILABLE, s.code());
      assertTrue(s.getMessage().contains("the server stopped"), s.getMessage());
    }
  }

  @Test
  void severalBatchesStartAtOnceWhenMaxBatchesInFlightAllows() throws Exception {
    blockFirstBatch(); // the first batch waits in its callback; with two in flight the next one starts meanwhile
    ActorRef<Command> server = server(new ServeSettings.Model(2, Duration.ZERO, 64, Duration.ofSeconds(30), 2));
    Random random = new Random(10);
    float[] first = ScoringCallbacks.randomInput(random);
    CompletableFuture<Prediction> held = ask(server, "held", first, null);
    awaitEntered();
    float[] x = ScoringCallbacks.randomInput(random);
    CompletableFuture<Prediction> second = ask(server, "second", x, null);
    TestProbe<ModelServer.Status> status = testKit.createTestProbe();
    ModelServer.Status s = null;
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
    while (System.nanoTime() < deadline) {
      server.tell(new ModelServer.GetStatus(status.getRef()));
      s = status.receiveMessage(Duration.ofSeconds(WAIT_S));
      if (s.batchesInFlight() == 2 || second.isDone()) {
        break;
      }
      Thread.sleep(10);
    }
    assertTrue(second.isDone() || s.equals(new ModelServer.Status("scoring", 0, 64, 2, 0, true)),
        "the second batch must start while the first is held: " + s);
    release.countDown();
    assertScores(first, held.get(WAIT_S, TimeUnit.SECONDS));
    Prediction p = second.get(WAIT_S, TimeUnit.SECONDS);
    assertScores(x, p);
    assertEquals(2, p.batch());
  }

  @Test
  void aServerTakesItsModelsSettingsFromTheSystemsConfig() throws Exception {
    ActorTestKit configured = ActorTestKit.create(ConfigFactory.parseString(
        "xla-actors.actors.serve.models.scoring { queue-capacity = 3, max-batch-size = 1, max-delay = 0 }")
        .withFallback(ConfigFactory.load()));
    try (CallbackRuntime own = CallbackRuntime.create(configured.system(), client)) {
      ScoringCallbacks hooks = ScoringCallbacks.register(own);
      CountDownLatch in = new CountDownLatch(1);
      CountDownLatch out = new CountDownLatch(1);
      hooks.hook = (h, b) -> {
        in.countDown();
        out.await(WAIT_S, TimeUnit.SECONDS);
      };
      ActorRef<Command> server = configured.spawn(ModelServer.create(model, own, registry));
      Random random = new Random(11);
      List<CompletableFuture<Prediction>> answers = new ArrayList<>();
      answers.add(ModelServer.ask(server, List.of(ScoringCallbacks.tensor(ScoringCallbacks.randomInput(random))), null,
          configured.system().scheduler()).toCompletableFuture());
      assertTrue(in.await(WAIT_S, TimeUnit.SECONDS));
      for (int i = 0; i < 4; i++) {
        answers.add(ModelServer.ask(server, List.of(ScoringCallbacks.tensor(ScoringCallbacks.randomInput(random))), null,
            configured.system().scheduler()).toCompletableFuture());
      }
      Throwable refused = failure(answers.get(4));
      assertTrue(refused.getMessage().contains("queue-capacity = 3"), refused.getMessage());
      out.countDown();
      for (int i = 0; i < 4; i++) {
        assertEquals(1, answers.get(i).get(WAIT_S, TimeUnit.SECONDS).requestsInBatch(), "max-batch-size = 1 from the config");
      }
      configured.stop(server);
    } finally {
      configured.shutdownTestKit();
    }
  }

  @Test
  void aBatchedModelRefusesModelsOfTheWrongBatchSize() {
    InvalidArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(InvalidArgumentException.class,
        () -> BatchedModel.of("mixed", Map.of(4, model.model(2))));
    assertTrue(e.getMessage().contains("expected a leading (batch) dimension of 4"), e.getMessage());
    e = org.junit.jupiter.api.Assertions.assertThrows(InvalidArgumentException.class, () -> BatchedModel.of("none", Map.of()));
    assertTrue(e.getMessage().contains("needs at least one batch size"), e.getMessage());
    assertEquals(List.of(1, 2, 4, 8, 16, 32), new ArrayList<>(model.batchSizes()));
    assertEquals(4, model.sizeFor(3));
    assertEquals(32, model.sizeFor(17));
    assertNotNull(model.toString());
  }

  @Test
  void aPackagesBatchedModelIsNamedAsThePackageAndLeavesItsModelsToThePackage() throws Exception {
    assertEquals("scoring", model.name());
    assertEquals(ScoringCallbacks.SIZES, new ArrayList<>(model.batchSizes()));
    assertEquals(ScoringCallbacks.SIZES.stream().map(b -> "relu_b" + b).toList(), model.hostCallbacks());
    BatchedModel borrowed = BatchedModel.of(scoringPackage, Role.MAIN);
    borrowed.close(); // the package's Models stay open: the shared server below still answers
    float[] x = ScoringCallbacks.randomInput(new Random(3));
    assertScores(x, ask(server(settings(4, Duration.ZERO, 16)), "after-close", x, null).get(WAIT_S, TimeUnit.SECONDS));
    InvalidArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(InvalidArgumentException.class,
        () -> BatchedModel.of(scoringPackage, Role.SCORE));
    assertTrue(e.getMessage().contains("has no score program"), e.getMessage());
  }

  @Test
  void aServerOfAPackageIsRefusedUntilItsCallbacksAreRegistered() {
    try (CallbackRuntime bare = CallbackRuntime.create(testKit.system(), client)) {
      XlaException e = org.junit.jupiter.api.Assertions.assertThrows(XlaException.class,
          () -> ModelServer.create(model, bare, registry));
      assertEquals(ErrorCode.FAILED_PRECONDITION, e.code());
      assertTrue(e.getMessage().contains("model 'scoring' calls host callbacks [relu_b1, relu_b16, relu_b2, relu_b32, "
          + "relu_b4, relu_b8] that are not registered"), e.getMessage());
      assertTrue(e.getMessage().contains("callbacks.register(name"), e.getMessage());
      ScoringCallbacks.register(bare);
      assertEquals(List.of(), bare.missingCallbacks(model.hostCallbacks()));
      assertNotNull(ModelServer.create(model, bare, settings(4, Duration.ZERO, 16), registry));
      bare.unregister("relu_b8").toCompletableFuture().join();
      e = org.junit.jupiter.api.Assertions.assertThrows(XlaException.class,
          () -> bare.checkCallbacks(scoringPackage.modelPackage()));
      assertTrue(e.getMessage().contains("model package 'scoring' (") && e.getMessage().contains("calls host callbacks "
          + "[relu_b8] that are not registered"), e.getMessage());
    }
  }
}
