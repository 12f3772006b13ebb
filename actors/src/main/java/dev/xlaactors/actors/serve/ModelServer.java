package dev.xlaactors.actors.serve;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.RunHandle;
import dev.xlaactors.error.BatchFailedException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.OverloadedException;
import dev.xlaactors.error.RequestCancelledException;
import dev.xlaactors.error.RequestTimeoutException;
import dev.xlaactors.error.ServingException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.model.Argument;
import io.micrometer.core.instrument.MeterRegistry;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Comparator;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.NotUsed;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.PostStop;
import org.apache.pekko.actor.typed.Scheduler;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.pattern.StatusReply;
import org.apache.pekko.stream.javadsl.Flow;

/**
 * Serves one {@link BatchedModel} to many small concurrent requests by dynamic batching: single requests
 * ({@link Infer}) queue, and a batch of up to {@code max-batch-size} of them runs when that many are
 * queued or when the oldest has waited {@code max-delay}; the batch is padded with zeros to the smallest
 * compiled batch size that holds it, runs through the {@link CallbackRuntime} (so host callbacks inside
 * the program are supervised, and see the whole padded batch), and each request is answered with its own
 * row of every output. Settings: {@link ServeSettings} ({@code xla-actors.actors.serve}).
 *
 * <p>Every request gets exactly one answer, a {@link StatusReply}: its {@link Prediction}, or an error
 * carrying one of
 * <ul>
 *   <li>{@link InvalidArgumentException}: its inputs do not match the model's (count, dtype, shape: the
 *       model's input types minus the batch dimension), its id is already held, or its timeout is not
 *       positive; checked on arrival, so nothing unchecked reaches the plugin;
 *   <li>{@link OverloadedException} ({@code RESOURCE_EXHAUSTED}): {@code queue-capacity} requests were
 *       already waiting; refused at once, nothing computed;
 *   <li>{@link RequestTimeoutException} ({@code DEADLINE_EXCEEDED}): its deadline ({@link Infer#timeout},
 *       else {@code default-timeout}, from its arrival) passed. One that expires while queued is never
 *       computed; one whose batch is running is answered at once and its row dropped;
 *   <li>{@link RequestCancelledException} ({@code CANCELLED}): a {@link Cancel} named it. A queued request
 *       leaves the queue; one in a running batch is answered at once and the batch goes on for the
 *       others (a batch all of whose requests are gone is cancelled);
 *   <li>{@link BatchFailedException}: its batch's run failed (a host callback threw or timed out, XLA
 *       failed): every request of that batch, and only those, get it, with the run's error as cause;
 *   <li>{@link ServingException} with {@code UNAVAILABLE}: the server stopped before answering it.
 * </ul>
 *
 * <p>Batches of one model run {@code max-batches-in-flight} at a time (a batch counts until its run has
 * really ended, {@link RunHandle#ended}, even when its requests were all answered earlier because they were
 * cancelled or timed out: XLA may still compute it); while they run, arrivals queue and
 * form the next batch, so under load batches fill up. The requests' inputs are copied into the batch on
 * the actor's thread (one copy of the batch's bytes, into memory of the {@link
 * dev.xlaactors.runtime.HostMemoryPool} given back when the batch is done) and each answer's rows are
 * copied out of the batch's outputs (one copy per output and batch, which the answers' tensors share
 * read-only), so a request's tensors are its own. The server does not close the {@link BatchedModel}: its
 * creator does, after stopping the server.
 *
 * <p>Metrics go to the {@link MeterRegistry} given (see {@link ServeMetrics}); {@link GetStatus} answers
 * the queue and batch counts for readiness checks.
 *
 * <p>Supervision: none is added. A failure inside the server stops it, and stopping answers every request
 * it holds ({@code UNAVAILABLE}) and cancels its running batches, so nothing is left unanswered; a
 * restart would have lost the requests.
 */
public final class ModelServer extends AbstractBehavior<ModelServer.Command> {

  /** Messages a model server understands. */
  public sealed interface Command {}

  /**
   * One request: {@code inputs} are one example of each model input (its type minus the batch
   * dimension, see {@link BatchedModel#requestInputTypes()}), in order. {@code requestId} names it for
   * {@link Cancel} (null: the server makes one, returned in the {@link Prediction}); it must be unique
   * among the requests the server holds. {@code timeout} is its deadline counted from its arrival (null:
   * {@code default-timeout}). The tensors must stay open until the request is answered.
   */
  public record Infer(String requestId, List<HostTensor> inputs, Duration timeout, ActorRef<StatusReply<Prediction>> replyTo)
      implements Command {
    public Infer {
      Objects.requireNonNull(replyTo, "replyTo");
    }
  }

  /**
   * Gives up the request {@code requestId}: it is answered with a {@link RequestCancelledException}
   * naming {@code reason}, unless it was answered already (then nothing happens). No reply of its own.
   */
  public record Cancel(String requestId, String reason) implements Command {}

  /** Asks for the server's {@link Status}. */
  public record GetStatus(ActorRef<Status> replyTo) implements Command {}

  /**
   * The answer to an {@link Infer}: one tensor per model output, the batch dimension removed, owned by
   * the requester. {@code batch} numbers the batch it ran in (1, 2, ... per server), {@code batchSize} is
   * the compiled size that batch ran at and {@code requestsInBatch} how many requests it held (the rest
   * was padding); {@code queued} is the time from arrival to the start of its batch, {@code computed} the
   * batch's run time.
   */
  public record Prediction(String requestId, List<HostTensor> outputs, long batch, int batchSize, int requestsInBatch,
      Duration queued, Duration computed) {}

  /**
   * A snapshot of the server: requests queued and the capacity, batches running, requests answered so
   * far (any outcome), and whether it accepts requests (false only once it stops).
   */
  public record Status(String model, int queued, int queueCapacity, int batchesInFlight, long answered, boolean accepting) {}

  /** What the {@link #flow} emits for each request, in order: its prediction, or why it has none. */
  public sealed interface Outcome {
    /** The request's id. */
    String requestId();
  }

  /** A request answered with its prediction. */
  public record Ok(Prediction prediction) implements Outcome {
    @Override
    public String requestId() {
      return prediction.requestId();
    }
  }

  /** A request answered without a prediction: refused, timed out, cancelled, failed or invalid. */
  public record Failed(String requestId, XlaException error) implements Outcome {}

  // Internal messages.
  private record BatchDue(long generation) implements Command {}

  private record DeadlineDue(long generation) implements Command {}

  private record BatchDone(Batch batch, List<HostTensor> outputs, Throwable failure) implements Command {}

  /** The batch's run has really ended (RunHandle.ended): only now is its place in flight free. */
  private record BatchRunEnded(Batch batch) implements Command {}

  /** One request held by the server, until it is answered. */
  private static final class Pending {
    final String id;
    final long seq; // arrival order, to tell apart requests with the same deadline
    List<HostTensor> inputs; // dropped once copied into its batch
    final ActorRef<StatusReply<Prediction>> replyTo;
    final long arrivedNanos;
    final long deadlineNanos;
    Batch batch; // null while queued
    boolean answered;

    Pending(String id, long seq, List<HostTensor> inputs, ActorRef<StatusReply<Prediction>> replyTo, long arrivedNanos,
        long deadlineNanos) {
      this.id = id;
      this.seq = seq;
      this.inputs = inputs;
      this.replyTo = replyTo;
      this.arrivedNanos = arrivedNanos;
      this.deadlineNanos = deadlineNanos;
    }
  }

  /** A request of the batch being assembled could not be read (it was answered as invalid): queue the others again. */
  private static final class UnreadableInput extends RuntimeException {
    UnreadableInput() {
      super(null, null, false, false);
    }
  }

  /** A batch in flight: its requests in row order, its compiled size, its run. */
  private static final class Batch {
    final long number;
    final List<Pending> rows;
    final int size;
    final long startedNanos;
    final List<HostTensor> inputs = new ArrayList<>(1); // the batch's input tensors, closed when it is done
    RunHandle run;
    boolean resultIn; // its BatchDone was handled
    boolean runEnded; // its run has ended (or it never started one)

    Batch(long number, List<Pending> rows, int size, long startedNanos) {
      this.number = number;
      this.rows = rows;
      this.size = size;
      this.startedNanos = startedNanos;
    }

    void closeInputs() {
      inputs.forEach(HostTensor::close); // a run still reading one holds its memory until done
      inputs.clear();
    }

    boolean allAnswered() {
      for (Pending p : rows) {
        if (!p.answered) {
          return false;
        }
      }
      return true;
    }
  }

  /**
   * One timer thread for every server of the JVM: Pekko's scheduler ticks every 10 ms, too coarse for
   * a batching delay of a few milliseconds. It only sends messages; the servers do the work.
   */
  private static final ScheduledExecutorService TIMERS = timers();

  private static ScheduledExecutorService timers() {
    ScheduledThreadPoolExecutor t = new ScheduledThreadPoolExecutor(1, r -> {
      Thread thread = new Thread(r, "xla-actors-serve-timers");
      thread.setDaemon(true);
      return thread;
    });
    t.setRemoveOnCancelPolicy(true);
    return t;
  }

  private final BatchedModel model;
  private final CallbackRuntime callbacks;
  private final ServeSettings.Model settings;
  private final ServeMetrics metrics;
  private final int maxBatch;
  private final ArrayDeque<Pending> queue = new ArrayDeque<>();
  private final Map<String, Pending> held = new HashMap<>();
  // Every held request by deadline; a request leaves it when answered, so it holds no more than the server does.
  private final TreeSet<Pending> deadlines =
      new TreeSet<>(Comparator.comparingLong((Pending p) -> p.deadlineNanos).thenComparingLong(p -> p.seq));
  private long arrivals;
  private final List<Batch> running = new ArrayList<>();
  private long batchNumber;
  private long answered;
  private long batchTimerGeneration;
  private ScheduledFuture<?> batchTimer;
  private long batchTimerAt;
  private long deadlineTimerGeneration;
  private ScheduledFuture<?> deadlineTimer;
  private long deadlineTimerAt = Long.MAX_VALUE;

  /**
   * A server of {@code model} running its batches through {@code callbacks}, as {@code settings} say,
   * with its metrics in {@code registry} (tagged {@code model=<name>}). Spawn it once per model. Refused
   * (FAILED_PRECONDITION) while a host callback of the model ({@link BatchedModel#hostCallbacks()}) is not
   * registered on {@code callbacks}.
   */
  public static Behavior<Command> create(BatchedModel model, CallbackRuntime callbacks, ServeSettings.Model settings,
      MeterRegistry registry) {
    Objects.requireNonNull(model, "model");
    Objects.requireNonNull(callbacks, "callbacks");
    Objects.requireNonNull(settings, "settings");
    Objects.requireNonNull(registry, "registry");
    callbacks.checkCallbacks("model '" + model.name() + "'", model.hostCallbacks()); // refused now, not at the first batch
    return Behaviors.setup(context -> new ModelServer(context, model, callbacks, settings, registry));
  }

  /** As {@link #create(BatchedModel, CallbackRuntime, ServeSettings.Model, MeterRegistry)}, with the system's settings for the model's name. */
  public static Behavior<Command> create(BatchedModel model, CallbackRuntime callbacks, MeterRegistry registry) {
    Objects.requireNonNull(model, "model");
    Objects.requireNonNull(callbacks, "callbacks").checkCallbacks("model '" + model.name() + "'", model.hostCallbacks());
    return Behaviors.setup(context -> new ModelServer(context, model, callbacks,
        ServeSettings.create(context.getSystem()).forModel(model.name()), registry));
  }

  private ModelServer(ActorContext<Command> context, BatchedModel model, CallbackRuntime callbacks, ServeSettings.Model settings,
      MeterRegistry registry) {
    super(context);
    this.model = model;
    this.callbacks = callbacks;
    this.settings = settings;
    this.maxBatch = Math.min(settings.maxBatchSize(), model.largestBatch());
    this.metrics = new ServeMetrics(registry, model.name());
  }

  @Override
  public Receive<Command> createReceive() {
    return newReceiveBuilder()
        .onMessage(Infer.class, this::onInfer)
        .onMessage(Cancel.class, this::onCancel)
        .onMessage(GetStatus.class, this::onGetStatus)
        .onMessage(BatchDue.class, this::onBatchDue)
        .onMessage(DeadlineDue.class, this::onDeadlineDue)
        .onMessage(BatchDone.class, this::onBatchDone)
        .onMessage(BatchRunEnded.class, this::onBatchRunEnded)
        .onSignal(PostStop.class, this::onPostStop)
        .build();
  }

  // ------------------------------------------------------------------------------------------ requests

  private Behavior<Command> onInfer(Infer r) {
    long now = System.nanoTime();
    String id = r.requestId() != null ? r.requestId() : newRequestId();
    String invalid = invalid(id, r);
    if (invalid != null) {
      refuse(id, r.replyTo(), new InvalidArgumentException(invalid), "invalid");
      return this;
    }
    if (queue.size() >= settings.queueCapacity()) {
      refuse(id, r.replyTo(), new OverloadedException(model.name(), id, "model '" + model.name() + "' is overloaded: "
          + queue.size() + " requests already wait (queue-capacity = " + settings.queueCapacity()
          + ", xla-actors.actors.serve.models." + model.name() + ".queue-capacity); request '" + id
          + "' was refused without being computed: retry later, or send fewer requests at once"), "overloaded");
      return this;
    }
    Duration timeout = r.timeout() != null ? r.timeout() : settings.defaultTimeout();
    long deadline = Deadlines.after(now, timeout);
    Pending p = new Pending(id, ++arrivals, List.copyOf(r.inputs()), r.replyTo(), now, deadline);
    held.put(id, p);
    queue.addLast(p);
    deadlines.add(p);
    metrics.queued(queue.size());
    armDeadlineTimer();
    schedule(now);
    return this;
  }

  /** Why the request cannot be served (naming what is wrong, expected vs got), or null. */
  private String invalid(String id, Infer r) {
    String which = "request '" + id + "' to model '" + model.name() + "'";
    if (held.containsKey(id)) {
      return which + ": a request with this id is already queued or running; give each request its own id (ModelServer.newRequestId())";
    }
    if (r.timeout() != null && (r.timeout().isNegative() || r.timeout().isZero())) {
      return which + ": timeout must be positive, got " + r.timeout() + " (null: the model's default-timeout, "
          + settings.defaultTimeout() + ")";
    }
    List<HostTensor> inputs = r.inputs();
    List<TensorType> expected = model.requestInputTypes();
    if (inputs == null || inputs.size() != expected.size()) {
      return which + " takes " + expected.size() + " input(s) " + BatchedModel.describe(model.inputNames(), expected) + ", got "
          + (inputs == null ? "null" : inputs.size());
    }
    for (int i = 0; i < expected.size(); i++) {
      HostTensor t = inputs.get(i);
      String input = which + ": input " + i + " '" + model.inputNames().get(i) + "'";
      if (t == null) {
        return input + " is null, expected a tensor " + expected.get(i);
      }
      if (!t.type().equals(expected.get(i))) {
        return input + ": expected " + expected.get(i) + " (one example: the model's input without its batch dimension), got " + t.type();
      }
      if (t.isClosed()) {
        return input + " is closed: keep a request's tensors open until it is answered";
      }
      if (t.isBorrowed()) {
        return input + " is a callback's borrowed input, valid only during that call: pass t.copy()";
      }
    }
    return null;
  }

  private Behavior<Command> onCancel(Cancel c) {
    Pending p = c.requestId() == null ? null : held.get(c.requestId());
    if (p == null) {
      return this; // answered already, or never held
    }
    String reason = c.reason() == null || c.reason().isBlank() ? "no reason given" : c.reason();
    Batch batch = p.batch;
    if (batch == null) {
      queue.remove(p);
      metrics.queued(queue.size());
    }
    answer(p, StatusReply.error(new RequestCancelledException(model.name(), p.id, "request '" + p.id + "' to model '"
        + model.name() + "' was cancelled (" + reason + ") " + (batch == null ? "while queued: it was not computed"
            : "while its batch " + batch.number + " ran: its row was dropped, the other requests of the batch go on"))), "cancelled");
    cancelIfAbandoned(batch);
    schedule(System.nanoTime());
    return this;
  }

  private Behavior<Command> onGetStatus(GetStatus g) {
    g.replyTo().tell(new Status(model.name(), queue.size(), settings.queueCapacity(), running.size(), answered, true));
    return this;
  }

  // ------------------------------------------------------------------------------------------ batching

  private Behavior<Command> onBatchDue(BatchDue d) {
    if (d.generation() == batchTimerGeneration) {
      batchTimer = null;
      schedule(System.nanoTime());
    }
    return this;
  }

  /**
   * Starts every batch that is due and has room: a full one at once, a partial one once its oldest
   * request has waited max-delay; otherwise arms the timer for when the oldest will have waited it.
   */
  private void schedule(long now) {
    while (!queue.isEmpty() && running.size() < settings.maxBatchesInFlight()) {
      long due = Deadlines.saturatedAdd(queue.peekFirst().arrivedNanos, settings.maxDelay().toNanos());
      if (queue.size() < maxBatch && now < due) {
        armBatchTimer(due, now);
        return;
      }
      startBatch(now);
    }
    if (queue.isEmpty()) {
      cancelBatchTimer();
    }
  }

  private void startBatch(long now) {
    List<Pending> rows = new ArrayList<>(Math.min(maxBatch, queue.size()));
    while (rows.size() < maxBatch && !queue.isEmpty()) {
      rows.add(queue.pollFirst());
    }
    metrics.queued(queue.size());
    int size = model.sizeFor(rows.size());
    Batch batch = new Batch(++batchNumber, rows, size, now);
    List<Argument> arguments = null;
    RuntimeException notAssembled = null;
    try {
      arguments = assemble(batch);
    } catch (UnreadableInput e) { // a request's tensor closed meanwhile: that request is answered, not the others
      for (int r = rows.size() - 1; r >= 0; r--) { // back to the head of the queue, in their order
        if (!rows.get(r).answered) {
          queue.addFirst(rows.get(r));
        }
      }
      metrics.queued(queue.size());
      return;
    } catch (RuntimeException e) { // no memory for the batch's inputs, say: this batch fails
      notAssembled = e;
    }
    for (Pending p : rows) {
      p.batch = batch;
      p.inputs = null; // copied into the batch
      metrics.queueTime(now - p.arrivedNanos);
    }
    metrics.batch(rows.size());
    running.add(batch);
    if (notAssembled != null) {
      getContext().getSelf().tell(new BatchDone(batch, null, notAssembled));
      return;
    }
    try {
      batch.run = callbacks.start(model.model(size), arguments);
    } catch (RuntimeException e) { // refused by the runtime (its run queue is full, say): this batch fails
      getContext().getSelf().tell(new BatchDone(batch, null, e));
      return;
    }
    getContext().pipeToSelf(batch.run.result(), (outputs, failure) -> new BatchDone(batch, outputs, failure));
    // A cancelled run's result comes at once while XLA may still compute: the batch keeps its place in
    // flight (max-batches-in-flight) until the run has really ended.
    getContext().pipeToSelf(batch.run.ended(), (v, failure) -> new BatchRunEnded(batch));
  }

  /**
   * The batch's inputs: each request's tensor copied into its row, the padding rows zero. A request
   * whose tensor cannot be read is answered as invalid and the method throws, so the caller queues the
   * others again.
   */
  private List<Argument> assemble(Batch batch) {
    List<TensorType> types = model.requestInputTypes();
    List<Argument> arguments = new ArrayList<>(types.size());
    boolean[] failed = {false};
    try {
      for (int i = 0; i < types.size(); i++) {
        TensorType row = types.get(i);
        int input = i;
        int rowBytes = Math.toIntExact(row.byteSize());
        long[] dims = new long[row.shape().rank() + 1];
        dims[0] = batch.size;
        System.arraycopy(row.shape().dims(), 0, dims, 1, row.shape().rank());
        // Pooled memory, given back when the batch is done: no fresh direct buffer (allocated, zeroed, freed
        // only by a GC) per batch, and the CPU plugin uploads it in place.
        HostTensor tensor = HostTensor.filled(TensorType.of(row.dtype(), dims), data -> {
          for (int r = 0; r < batch.rows.size(); r++) {
            Pending p = batch.rows.get(r);
            if (p.answered) {
              continue; // its row stays zero, as the padding
            }
            try {
              data.put(r * rowBytes, p.inputs.get(input).data(), 0, rowBytes);
            } catch (IllegalStateException e) {
              answer(p, StatusReply.error(new InvalidArgumentException("request '" + p.id + "' to model '" + model.name() + "': input "
                  + input + " '" + model.inputNames().get(input) + "' could not be read (" + e.getMessage()
                  + "): keep a request's tensors open until it is answered")), "invalid");
              failed[0] = true;
            }
          }
        });
        batch.inputs.add(tensor);
        arguments.add(Argument.of(tensor));
      }
    } catch (RuntimeException e) {
      batch.closeInputs();
      throw e;
    }
    if (failed[0]) {
      batch.closeInputs();
      throw new UnreadableInput();
    }
    return arguments;
  }

  private Behavior<Command> onBatchDone(BatchDone done) {
    Batch batch = done.batch();
    batch.resultIn = true;
    if (batch.run == null || batch.runEnded) {
      running.remove(batch); // else when its run has ended (onBatchRunEnded)
    }
    batch.closeInputs();
    long now = System.nanoTime();
    Duration computed = Duration.ofNanos(now - batch.startedNanos);
    if (batch.run != null) { // a batch whose inputs could not be assembled, or whose run was refused, never ran
      metrics.computeTime(now - batch.startedNanos);
    }
    Throwable failure = done.failure();
    List<List<HostTensor>> rows = null;
    if (failure == null) {
      try {
        rows = rows(done.outputs(), batch);
      } catch (RuntimeException | OutOfMemoryError e) { // the answers' rows need direct memory: without it this batch fails, not the server
        done.outputs().forEach(HostTensor::close);
        failure = new XlaException(ErrorCode.RESOURCE_EXHAUSTED, "no memory for the answers of batch " + batch.number + " of model '"
            + model.name() + "' (" + e + "): raise -XX:MaxDirectMemorySize, or lower max-batch-size", e);
      }
    }
    if (failure == null) {
      List<HostTensor> outputs = done.outputs();
      for (int r = 0; r < batch.rows.size(); r++) {
        Pending p = batch.rows.get(r);
        if (p.answered) {
          continue;
        }
        List<HostTensor> mine = new ArrayList<>(outputs.size());
        for (int o = 0; o < outputs.size(); o++) {
          mine.add(rows.get(o).get(r));
        }
        answer(p, StatusReply.success(new Prediction(p.id, List.copyOf(mine), batch.number, batch.size, batch.rows.size(),
            Duration.ofNanos(batch.startedNanos - p.arrivedNanos), computed)), "ok");
        metrics.latency(now - p.arrivedNanos);
      }
      outputs.forEach(HostTensor::close);
    } else {
      Throwable cause = unwrap(failure);
      ErrorCode code = cause instanceof XlaException x ? x.code() : ErrorCode.INTERNAL;
      int live = 0;
      for (Pending p : batch.rows) {
        live += p.answered ? 0 : 1;
      }
      for (Pending p : batch.rows) {
        if (!p.answered) {
          answer(p, StatusReply.error(new BatchFailedException(code, model.name(), p.id, batch.number, "request '" + p.id + "' to model '"
              + model.name() + "' failed with its batch " + batch.number + " (" + batch.rows.size() + " requests, " + live
              + " still waiting, padded to " + batch.size + "): " + cause.getMessage(), cause)), "failed");
        }
      }
    }
    schedule(now);
    return this;
  }

  private Behavior<Command> onBatchRunEnded(BatchRunEnded ended) {
    Batch batch = ended.batch();
    batch.runEnded = true;
    if (batch.resultIn && running.remove(batch)) {
      schedule(System.nanoTime());
    }
    return this;
  }

  /**
   * For each output, the rows of the batch's requests still waiting (null for the others), each a tensor
   * of its own over one copy of those rows: one direct allocation per output and batch instead of one per
   * row (the rows share it, read-only; it is freed once every row is unreachable). Throws when that memory
   * cannot be had (an OutOfMemoryError, or an ArithmeticException for more than 2 GiB): the caller fails the batch.
   */
  private static List<List<HostTensor>> rows(List<HostTensor> outputs, Batch batch) {
    int live = 0;
    for (Pending p : batch.rows) {
      live += p.answered ? 0 : 1;
    }
    List<List<HostTensor>> all = new ArrayList<>(outputs.size());
    for (HostTensor batched : outputs) {
      long[] dims = batched.shape().dims();
      TensorType type = TensorType.of(batched.dtype(), java.util.Arrays.copyOfRange(dims, 1, dims.length));
      int rowBytes = Math.toIntExact(type.byteSize());
      ByteBuffer from = batched.data();
      ByteBuffer copy = ByteBuffer.allocateDirect(Math.max(1, Math.multiplyExact(live, rowBytes))).order(ByteOrder.LITTLE_ENDIAN);
      List<HostTensor> rows = new ArrayList<>(batch.rows.size());
      int at = 0;
      for (int r = 0; r < batch.rows.size(); r++) {
        if (batch.rows.get(r).answered) {
          rows.add(null);
          continue;
        }
        copy.put(at, from, r * rowBytes, rowBytes);
        rows.add(HostTensor.of(type, copy.slice(at, rowBytes).order(ByteOrder.LITTLE_ENDIAN)));
        at += rowBytes;
      }
      all.add(rows);
    }
    return all;
  }

  private static Throwable unwrap(Throwable t) {
    return t instanceof CompletionException && t.getCause() != null ? t.getCause() : t;
  }

  /** Cancels a running batch none of whose requests is waiting any more: its result would be dropped. */
  private void cancelIfAbandoned(Batch batch) {
    if (batch != null && batch.run != null && batch.allAnswered()) {
      batch.run.cancel("every request of batch " + batch.number + " of model '" + model.name() + "' was answered (cancelled or timed out)");
    }
  }

  // ------------------------------------------------------------------------------------------ deadlines

  private Behavior<Command> onDeadlineDue(DeadlineDue d) {
    if (d.generation() != deadlineTimerGeneration) {
      return this;
    }
    deadlineTimer = null;
    deadlineTimerAt = Long.MAX_VALUE;
    long now = System.nanoTime();
    List<Batch> touched = new ArrayList<>();
    boolean dequeued = false;
    while (!deadlines.isEmpty() && deadlines.first().deadlineNanos <= now) {
      Pending p = deadlines.first();
      Batch batch = p.batch;
      if (batch == null) {
        queue.remove(p);
        dequeued = true;
      } else {
        touched.add(batch);
      }
      answer(p, StatusReply.error(new RequestTimeoutException(model.name(), p.id, "request '" + p.id + "' to model '" + model.name()
          + "' timed out after " + Duration.ofNanos(now - p.arrivedNanos).toMillis() + " ms (its deadline was "
          + Duration.ofNanos(p.deadlineNanos - p.arrivedNanos).toMillis() + " ms after arrival) "
          + (batch == null ? "while queued: it was not computed" : "while its batch " + batch.number + " ran: its row was dropped")
          + "; give it a longer timeout, or send requests more slowly")), "timeout");
    }
    if (dequeued) {
      metrics.queued(queue.size());
    }
    touched.forEach(this::cancelIfAbandoned);
    armDeadlineTimer();
    schedule(now);
    return this;
  }

  private void armDeadlineTimer() {
    if (deadlines.isEmpty()) {
      return;
    }
    long at = deadlines.first().deadlineNanos;
    if (at >= deadlineTimerAt) {
      return; // the armed timer fires first, and re-arms
    }
    if (deadlineTimer != null) {
      deadlineTimer.cancel(false);
    }
    long generation = ++deadlineTimerGeneration;
    ActorRef<Command> self = getContext().getSelf();
    deadlineTimerAt = at;
    deadlineTimer = TIMERS.schedule(() -> self.tell(new DeadlineDue(generation)), Math.max(0, at - System.nanoTime()), TimeUnit.NANOSECONDS);
  }

  private void armBatchTimer(long due, long now) {
    if (batchTimer != null && batchTimerAt == due) {
      return;
    }
    cancelBatchTimer();
    long generation = ++batchTimerGeneration;
    ActorRef<Command> self = getContext().getSelf();
    batchTimerAt = due;
    batchTimer = TIMERS.schedule(() -> self.tell(new BatchDue(generation)), due - now, TimeUnit.NANOSECONDS);
  }

  private void cancelBatchTimer() {
    if (batchTimer != null) {
      batchTimer.cancel(false);
      batchTimer = null;
      batchTimerGeneration++;
    }
  }

  // ------------------------------------------------------------------------------------------ answers

  /** The one place a request is answered: at most once, and it is no longer held afterwards. */
  private void answer(Pending p, StatusReply<Prediction> reply, String outcome) {
    if (p.answered) {
      return;
    }
    p.answered = true;
    p.inputs = null;
    held.remove(p.id);
    deadlines.remove(p);
    answered++;
    metrics.outcome(outcome);
    p.replyTo.tell(reply);
  }

  /** Answers a request that was never held (invalid or refused). */
  private void refuse(String id, ActorRef<StatusReply<Prediction>> replyTo, XlaException error, String outcome) {
    answered++;
    metrics.outcome(outcome);
    replyTo.tell(StatusReply.error(error));
  }

  private Behavior<Command> onPostStop(PostStop stop) {
    cancelBatchTimer();
    if (deadlineTimer != null) {
      deadlineTimer.cancel(false);
    }
    for (Pending p : new ArrayList<>(held.values())) {
      answer(p, StatusReply.error(new ServingException(ErrorCode.UNAVAILABLE, model.name(), p.id, "request '" + p.id
          + "' to model '" + model.name() + "' was not answered: the server stopped " + (p.batch == null ? "while it was queued"
              : "while its batch " + p.batch.number + " ran"))), "stopped");
    }
    for (Batch b : running) {
      if (b.run != null) {
        b.run.cancel("the server of model '" + model.name() + "' stopped");
      }
      b.closeInputs();
    }
    metrics.close();
    return this;
  }

  // ------------------------------------------------------------------------------------------ clients

  private static final Duration ASK_LIMIT = Duration.ofMinutes(10);

  /** A fresh request id (a random UUID). */
  public static String newRequestId() {
    return UUID.randomUUID().toString();
  }

  /**
   * Sends one request and returns its prediction; the stage fails with the request's error (the
   * exceptions listed in {@link ModelServer}). {@code timeout} is the request's deadline (null: the
   * model's {@code default-timeout}); the ask itself waits that long (at most 10 minutes) plus 10 s, and
   * fails with {@code UNAVAILABLE} if no answer came by then (the server is gone).
   */
  public static CompletionStage<Prediction> ask(ActorRef<Command> server, List<HostTensor> inputs, Duration timeout, Scheduler scheduler) {
    return ask(server, newRequestId(), inputs, timeout, scheduler);
  }

  /** As {@link #ask(ActorRef, List, Duration, Scheduler)} with the caller's request id (for {@link Cancel}). */
  public static CompletionStage<Prediction> ask(ActorRef<Command> server, String requestId, List<HostTensor> inputs, Duration timeout,
      Scheduler scheduler) {
    // The server answers every request itself (a timeout included); this only bounds the wait for a server that is gone.
    Duration wait = (timeout != null && timeout.compareTo(ASK_LIMIT) < 0 ? timeout : ASK_LIMIT).plusSeconds(10);
    CompletionStage<Prediction> asked = AskPattern.askWithStatus(server,
        (ActorRef<StatusReply<Prediction>> replyTo) -> new Infer(requestId, inputs, timeout, replyTo), wait, scheduler);
    return asked.exceptionallyCompose(e -> {
      Throwable cause = unwrap(e);
      if (cause instanceof XlaException) {
        return CompletableFuture.failedFuture(cause);
      }
      return CompletableFuture.failedFuture(new ServingException(ErrorCode.UNAVAILABLE, null, requestId, "request '" + requestId
          + "' got no answer from " + server.path() + " within " + wait.toMillis() + " ms (" + cause + "): is the server running?", cause));
    });
  }

  /**
   * A stream of requests (each a list of one example per model input) to their {@link Outcome}s, through
   * {@code server}. Order: outcomes come out in the order the requests went in (a slow request holds back
   * the ones after it). Parallelism: at most {@code parallelism} requests are in flight at once, so the
   * stream backpressures beyond it; a batch holds at most that many of this stream's requests, so use a
   * {@code parallelism} of at least the model's {@code max-batch-size} to fill batches. A request that
   * fails (refused, timed out, invalid, its batch failed) is a {@link Failed} element and the stream goes
   * on; {@code timeout} is each request's deadline (null: the model's {@code default-timeout}).
   */
  public static Flow<List<HostTensor>, Outcome, NotUsed> flow(ActorRef<Command> server, int parallelism, Duration timeout,
      Scheduler scheduler) {
    if (parallelism < 1) {
      throw new InvalidArgumentException("ModelServer.flow: parallelism must be >= 1 (requests in flight at once), got " + parallelism);
    }
    return Flow.<List<HostTensor>>create().mapAsync(parallelism, inputs -> {
      String id = newRequestId();
      return ask(server, id, inputs, timeout, scheduler).<Outcome>handle((prediction, failure) -> {
        if (failure == null) {
          return new Ok(prediction);
        }
        Throwable cause = unwrap(failure);
        return new Failed(id, cause instanceof XlaException x ? x
            : new XlaException(ErrorCode.INTERNAL, "request '" + id + "' failed: " + cause, cause));
      });
    });
  }
}
