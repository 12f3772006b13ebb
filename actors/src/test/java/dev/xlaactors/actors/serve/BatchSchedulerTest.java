package dev.xlaactors.actors.serve;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.serve.BatchScheduler.Batch;
import dev.xlaactors.actors.serve.BatchScheduler.Request;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The batching decisions of {@link ModelServer} without an actor system, a model or a clock: times are
 * plain nanosecond values, the compiled sizes a function.
 */
class BatchSchedulerTest {

  private static final long MS = 1_000_000L;

  /** Sizes 1, 2, 4, 8 compiled; a batch pads to the smallest that holds it. */
  private static int sizeFor(int n) {
    return n <= 1 ? 1 : n <= 2 ? 2 : n <= 4 ? 4 : 8;
  }

  private static BatchScheduler scheduler(int maxBatch, long maxDelayMs, int queueCapacity, int inFlight) {
    return new BatchScheduler(maxBatch, Duration.ofMillis(maxDelayMs), queueCapacity, inFlight, BatchSchedulerTest::sizeFor);
  }

  private static Request enqueue(BatchScheduler s, String id, long at) {
    return s.enqueue(id, List.of(), null, at, Long.MAX_VALUE);
  }

  private static List<String> ids(Batch b) {
    return b.rows.stream().map(p -> p.id).toList();
  }

  @Test
  void aPartialBatchWaitsForMaxDelayFromItsOldestRequest() {
    BatchScheduler s = scheduler(4, 5, 100, 1);
    enqueue(s, "a", 0);
    enqueue(s, "b", 3 * MS);
    assertEquals(new BatchScheduler.WaitUntil(5 * MS), s.next(4 * MS), "due max-delay after the oldest, not the newest");
    BatchScheduler.Start start = assertInstanceOf(BatchScheduler.Start.class, s.next(5 * MS));
    assertEquals(List.of("a", "b"), ids(start.batch()));
    assertEquals(2, start.batch().size);
    assertEquals(1, start.batch().number);
    assertEquals(0, s.queued());
  }

  @Test
  void aFullBatchStartsAtOnceAndTheRestWaits() {
    BatchScheduler s = scheduler(4, 1000, 100, 2);
    for (int i = 0; i < 6; i++) {
      enqueue(s, "r" + i, i);
    }
    BatchScheduler.Start first = assertInstanceOf(BatchScheduler.Start.class, s.next(10));
    assertEquals(List.of("r0", "r1", "r2", "r3"), ids(first.batch()), "the oldest, up to the largest batch");
    assertEquals(4, first.batch().size);
    s.started(first.batch());
    assertEquals(new BatchScheduler.WaitUntil(4 + 1000 * MS), s.next(10), "two left: a partial batch waits for its oldest (r4)");
    assertEquals(1, s.inFlight());
  }

  @Test
  void maxBatchBelowTheLargestCompiledSizeCapsTheBatchAndPadsToTheSizeThatHoldsIt() {
    BatchScheduler s = scheduler(3, 0, 100, 1);
    for (int i = 0; i < 5; i++) {
      enqueue(s, "r" + i, 0);
    }
    Batch b = assertInstanceOf(BatchScheduler.Start.class, s.next(0)).batch();
    assertEquals(3, b.rows.size());
    assertEquals(4, b.size, "3 requests run at compiled size 4, one row of padding");
  }

  @Test
  void zeroMaxDelayRunsWhateverIsQueuedAsSoonAsThereIsRoom() {
    BatchScheduler s = scheduler(8, 0, 100, 1);
    enqueue(s, "only", 7);
    Batch b = assertInstanceOf(BatchScheduler.Start.class, s.next(7)).batch();
    assertEquals(1, b.size);
  }

  @Test
  void maxBatchesInFlightHoldsTheQueueUntilABatchHasBothItsResultAndTheEndOfItsRun() {
    BatchScheduler s = scheduler(1, 0, 100, 1);
    enqueue(s, "a", 0);
    enqueue(s, "b", 0);
    Batch a = assertInstanceOf(BatchScheduler.Start.class, s.next(0)).batch();
    s.started(a);
    // no runStarted: a batch whose run was refused (or never assembled) frees its place with its result
    assertInstanceOf(BatchScheduler.Busy.class, s.next(0));
    assertTrue(s.resultIn(a));
    Batch b = assertInstanceOf(BatchScheduler.Start.class, s.next(0)).batch();
    assertEquals(2, b.number);
    s.started(b);
    assertInstanceOf(BatchScheduler.Empty.class, s.next(0));
  }

  @Test
  void aRunThatEndsAfterItsResultKeepsItsPlaceUntilItEnds() {
    BatchScheduler s = scheduler(1, 0, 100, 1);
    enqueue(s, "a", 0);
    enqueue(s, "b", 0);
    Batch a = assertInstanceOf(BatchScheduler.Start.class, s.next(0)).batch();
    s.started(a);
    s.runStarted(a);
    assertFalse(s.resultIn(a), "a cancelled run answers at once while XLA may still compute");
    assertInstanceOf(BatchScheduler.Busy.class, s.next(0));
    assertTrue(s.runEnded(a));
    assertInstanceOf(BatchScheduler.Start.class, s.next(0));
  }

  @Test
  void queueCapacityCountsOnlyQueuedRequests() {
    BatchScheduler s = scheduler(2, 1000, 2, 1);
    enqueue(s, "a", 0);
    assertFalse(s.full());
    enqueue(s, "b", 0);
    assertTrue(s.full(), "two queued of a capacity of two: the next is refused");
    s.started(assertInstanceOf(BatchScheduler.Start.class, s.next(0)).batch());
    assertFalse(s.full(), "requests in a running batch do not count");
    assertTrue(s.holds("a"));
  }

  @Test
  void deadlinesExpireEarliestFirstAndOnlyTheQueuedLeaveTheQueue() {
    BatchScheduler s = scheduler(1, 0, 100, 1);
    Request running = s.enqueue("running", List.of(), null, 0, 30 * MS);
    s.started(assertInstanceOf(BatchScheduler.Start.class, s.next(0)).batch());
    Request late = s.enqueue("late", List.of(), null, 1, 20 * MS);
    Request later = s.enqueue("later", List.of(), null, 2, 50 * MS);
    Request none = s.enqueue("none", List.of(), null, 3, Long.MAX_VALUE);
    assertEquals(20 * MS, s.nextDeadline());
    assertEquals(List.of(), s.expire(19 * MS));
    assertEquals(List.of(late, running), s.expire(30 * MS));
    assertEquals(2, s.queued(), "the running one was not queued; 'late' left the queue");
    assertSame(running.batch, s.running().get(0), "a request in a running batch stays in its batch");
    assertEquals(50 * MS, s.nextDeadline());
    assertEquals(List.of(later), s.expire(Long.MAX_VALUE - 1));
    assertTrue(s.holds("none"));
    assertEquals(Long.MAX_VALUE, s.nextDeadline(), "no deadline never expires");
    assertTrue(s.retire(none));
  }

  @Test
  void aRequestIsRetiredOnceAndThenNoLongerHeld() {
    BatchScheduler s = scheduler(4, 1000, 100, 1);
    Request a = enqueue(s, "a", 0);
    s.dequeue(a);
    assertTrue(s.retire(a));
    assertFalse(s.retire(a), "answered at most once");
    assertFalse(s.holds("a"));
    assertNull(s.held("a"));
    assertInstanceOf(BatchScheduler.Empty.class, s.next(0));
  }

  @Test
  void aBatchThatCouldNotBeAssembledGivesItsRequestsBackInOrderWithoutTheAnsweredOnes() {
    BatchScheduler s = scheduler(3, 0, 100, 1);
    Request a = enqueue(s, "a", 0);
    enqueue(s, "b", 1);
    enqueue(s, "c", 2);
    enqueue(s, "d", 3);
    Batch first = assertInstanceOf(BatchScheduler.Start.class, s.next(5)).batch();
    s.retire(s.held("b")); // its input could not be read: answered as invalid
    s.requeue(first);
    Batch again = assertInstanceOf(BatchScheduler.Start.class, s.next(5)).batch();
    assertEquals(List.of("a", "c", "d"), ids(again), "back at the head of the queue, before 'd', in their order");
    assertEquals(2, again.number, "a batch number is not reused");
    s.started(again);
    assertSame(again, a.batch);
    assertNull(a.inputs, "copied into the batch");
  }
}
