package dev.xlaactors.actors.serve;

import dev.xlaactors.actors.RunHandle;
import dev.xlaactors.runtime.HostTensor;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.function.IntUnaryOperator;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.pattern.StatusReply;

/**
 * The batching decisions of a {@link ModelServer}, as plain state and no actor: which requests it holds
 * and in what order they wait, whether one more may wait (queue-capacity), when a request's deadline
 * passes, and when a batch is due, of which requests and at which compiled size (full at once; partial
 * once its oldest request has waited max-delay; never more than max-batches-in-flight at once). Times are
 * {@link System#nanoTime()} values passed in, so tests drive the clock.
 *
 * <p>It decides but does nothing: the server answers the requests, arms the timers and runs the batches
 * ({@link BatchRunner}). A request is held from {@link #enqueue} until {@link #retire}; a batch counts in
 * flight from {@link #started} until its result is in ({@link #resultIn}) and, if it started a run
 * ({@link #runStarted}), that run has ended ({@link #runEnded}). Not thread-safe: the server's actor is its only user.
 */
final class BatchScheduler {

  /** One request held by the server until it is answered. Mutated by the scheduler's owner only. */
  static final class Request {
    final String id;
    final long seq; // arrival order, to tell apart requests with the same deadline
    List<HostTensor> inputs; // dropped once copied into its batch
    final ActorRef<StatusReply<ModelServer.Prediction>> replyTo;
    final long arrivedNanos;
    final long deadlineNanos;
    Batch batch; // null while queued
    boolean answered;

    Request(String id, long seq, List<HostTensor> inputs, ActorRef<StatusReply<ModelServer.Prediction>> replyTo, long arrivedNanos,
        long deadlineNanos) {
      this.id = id;
      this.seq = seq;
      this.inputs = inputs;
      this.replyTo = replyTo;
      this.arrivedNanos = arrivedNanos;
      this.deadlineNanos = deadlineNanos;
    }

    @Override
    public String toString() {
      return id;
    }
  }

  /**
   * A batch: its requests in row order, its compiled size, when it started. The scheduler keeps its place
   * in flight ({@code resultIn}, {@code runEnded}); the {@link BatchRunner} keeps its input tensors and run.
   */
  static final class Batch {
    final long number;
    final List<Request> rows;
    final int size;
    final long startedNanos;
    final List<HostTensor> inputs = new ArrayList<>(1); // the batch's input tensors, closed when it is done
    RunHandle run; // null until started, and for a batch that never ran
    boolean hasRun; // a run was started ({@link #runStarted}): its place in flight waits for the run's end
    boolean resultIn; // its result (or failure) was handled
    boolean runEnded; // its run has ended

    Batch(long number, List<Request> rows, int size, long startedNanos) {
      this.number = number;
      this.rows = rows;
      this.size = size;
      this.startedNanos = startedNanos;
    }

    /** Whether every request of the batch was answered (cancelled or timed out): its result would be dropped. */
    boolean allAnswered() {
      for (Request p : rows) {
        if (!p.answered) {
          return false;
        }
      }
      return true;
    }

    /** The requests of the batch still waiting for its result. */
    int live() {
      int live = 0;
      for (Request p : rows) {
        live += p.answered ? 0 : 1;
      }
      return live;
    }
  }

  /** What the server does next with its queue: {@link Start} a batch, {@link WaitUntil} a time, or nothing. */
  sealed interface Next {}

  /** Run {@code batch} now: its requests have left the queue. */
  record Start(Batch batch) implements Next {}

  /** A partial batch is queued: it is due at {@code due} (nanoTime), unless more requests fill it first. */
  record WaitUntil(long due) implements Next {}

  /** Every place in flight is taken: the queue waits for a batch to end (any batch timer may stay). */
  record Busy() implements Next {}

  /** Nothing is queued: no batch timer is needed. */
  record Empty() implements Next {}

  private static final Next BUSY = new Busy();
  private static final Next EMPTY = new Empty();

  private final int maxBatch;
  private final long maxDelayNanos;
  private final int queueCapacity;
  private final int maxBatchesInFlight;
  private final IntUnaryOperator sizeFor;
  private final ArrayDeque<Request> queue = new ArrayDeque<>();
  private final Map<String, Request> held = new HashMap<>();
  // Every held request by deadline; a request leaves it when retired, so it holds no more than the server does.
  private final TreeSet<Request> deadlines =
      new TreeSet<>(Comparator.comparingLong((Request p) -> p.deadlineNanos).thenComparingLong(p -> p.seq));
  private final List<Batch> running = new ArrayList<>();
  private long arrivals;
  private long batchNumber;

  /**
   * A scheduler forming batches of at most {@code maxBatch} requests, padded to {@code sizeFor(n)} (the
   * smallest compiled size holding n), a partial one once its oldest request waited {@code maxDelay};
   * at most {@code queueCapacity} requests wait and {@code maxBatchesInFlight} batches run at once.
   */
  BatchScheduler(int maxBatch, Duration maxDelay, int queueCapacity, int maxBatchesInFlight, IntUnaryOperator sizeFor) {
    this.maxBatch = maxBatch;
    this.maxDelayNanos = maxDelay.toNanos();
    this.queueCapacity = queueCapacity;
    this.maxBatchesInFlight = maxBatchesInFlight;
    this.sizeFor = sizeFor;
  }

  /** The scheduler of {@code model} under {@code settings}: a batch is no larger than the model's largest size. */
  static BatchScheduler of(BatchedModel model, ServeSettings.Model settings) {
    return new BatchScheduler(Math.min(settings.maxBatchSize(), model.largestBatch()), settings.maxDelay(), settings.queueCapacity(),
        settings.maxBatchesInFlight(), model::sizeFor);
  }

  // ------------------------------------------------------------------------------------------ admission

  /** Whether a request with this id is held (queued or in a running batch). */
  boolean holds(String id) {
    return held.containsKey(id);
  }

  /** The held request {@code id}, or null. */
  Request held(String id) {
    return id == null ? null : held.get(id);
  }

  /** Whether the queue is at its capacity: one more request is refused (overloaded). */
  boolean full() {
    return queue.size() >= queueCapacity;
  }

  /**
   * Holds a new request at the end of the queue, its deadline {@code deadlineNanos} (see {@link
   * Deadlines}). The caller checked {@link #holds} and {@link #full} first.
   */
  Request enqueue(String id, List<HostTensor> inputs, ActorRef<StatusReply<ModelServer.Prediction>> replyTo, long now, long deadlineNanos) {
    Request p = new Request(id, ++arrivals, inputs, replyTo, now, deadlineNanos);
    held.put(id, p);
    queue.addLast(p);
    deadlines.add(p);
    return p;
  }

  /** Takes a queued request out of the queue (cancelled); one in a batch stays in its batch. */
  void dequeue(Request p) {
    if (p.batch == null) {
      queue.remove(p);
    }
  }

  /**
   * Marks {@code p} answered and no longer held; false when it was answered already (a request is answered
   * at most once). Its row in a running batch stays, dropped from the answers.
   */
  boolean retire(Request p) {
    if (p.answered) {
      return false;
    }
    p.answered = true;
    p.inputs = null;
    held.remove(p.id);
    deadlines.remove(p);
    return true;
  }

  // ------------------------------------------------------------------------------------------ deadlines

  /**
   * The held requests whose deadline is at or before {@code now}, earliest first, taken out of the queue
   * (those still queued) and of the deadlines; the caller answers (and {@link #retire}s) each.
   */
  List<Request> expire(long now) {
    List<Request> late = new ArrayList<>();
    while (!deadlines.isEmpty() && deadlines.first().deadlineNanos <= now) {
      Request p = deadlines.pollFirst();
      if (p.batch == null) {
        queue.remove(p);
      }
      late.add(p);
    }
    return late;
  }

  /** The earliest deadline of a held request, or {@link Long#MAX_VALUE} when none is held. */
  long nextDeadline() {
    return deadlines.isEmpty() ? Long.MAX_VALUE : deadlines.first().deadlineNanos;
  }

  // ------------------------------------------------------------------------------------------ batches

  /**
   * What to do with the queue at {@code now}. A {@link Start} has taken its requests (the oldest, up to
   * the largest batch) out of the queue and numbered the batch; the caller either runs it ({@link
   * #started}) or gives its requests back ({@link #requeue}), then asks again: several batches may be due.
   */
  Next next(long now) {
    if (queue.isEmpty()) {
      return EMPTY;
    }
    if (running.size() >= maxBatchesInFlight) {
      return BUSY;
    }
    long due = Deadlines.saturatedAdd(queue.peekFirst().arrivedNanos, maxDelayNanos);
    if (queue.size() < maxBatch && now < due) {
      return new WaitUntil(due);
    }
    List<Request> rows = new ArrayList<>(Math.min(maxBatch, queue.size()));
    while (rows.size() < maxBatch && !queue.isEmpty()) {
      rows.add(queue.pollFirst());
    }
    return new Start(new Batch(++batchNumber, rows, sizeFor.applyAsInt(rows.size()), now));
  }

  /** {@code batch} (from {@link #next}) could not be assembled: its requests not answered meanwhile go back to the head of the queue, in order. */
  void requeue(Batch batch) {
    for (int r = batch.rows.size() - 1; r >= 0; r--) {
      if (!batch.rows.get(r).answered) {
        queue.addFirst(batch.rows.get(r));
      }
    }
  }

  /** {@code batch} (from {@link #next}) takes a place in flight; its requests' inputs were copied into it. */
  void started(Batch batch) {
    for (Request p : batch.rows) {
      p.batch = batch;
      p.inputs = null;
    }
    running.add(batch);
  }

  /** {@code batch} (in flight) started a run: it keeps its place until both its result is in and its run has ended. */
  void runStarted(Batch batch) {
    batch.hasRun = true;
  }

  /**
   * The batch's result (or failure) was handled. True when that frees its place in flight: its run has
   * ended, or it never started one. A cancelled run answers at once while XLA may still compute: such a
   * batch keeps its place until {@link #runEnded}.
   */
  boolean resultIn(Batch batch) {
    batch.resultIn = true;
    return (!batch.hasRun || batch.runEnded) && running.remove(batch);
  }

  /** The batch's run has really ended. True when that frees its place in flight (its result was handled already). */
  boolean runEnded(Batch batch) {
    batch.runEnded = true;
    return batch.resultIn && running.remove(batch);
  }

  // ------------------------------------------------------------------------------------------ state

  /** Requests waiting for a batch. */
  int queued() {
    return queue.size();
  }

  /** Batches holding a place in flight. */
  int inFlight() {
    return running.size();
  }

  /** The batches in flight (a copy). */
  List<Batch> running() {
    return List.copyOf(running);
  }

  /** Every held request (a copy), queued or in a batch. */
  Collection<Request> heldRequests() {
    return new ArrayList<>(held.values());
  }
}
