package dev.xlaactors.actors.serve;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.RunHandle;
import dev.xlaactors.actors.serve.BatchScheduler.Batch;
import dev.xlaactors.actors.serve.BatchScheduler.Request;
import dev.xlaactors.error.BatchFailedException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.OverloadedException;
import dev.xlaactors.error.RequestCancelledException;
import dev.xlaactors.error.RequestTimeoutException;
import dev.xlaactors.error.ServingException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.model.Argument;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.pekko.NotUsed;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.Terminated;
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
 * copied out of the batch's outputs (each row into pooled memory of its size, which goes back to the pool
 * when the asker closes the answer's tensors), so a request's tensors are its own. The server does not close the {@link BatchedModel}: its
 * creator does, after stopping the server.
 *
 * <p>The actor wires messages, timers, metrics and answers, and speaks the client API ({@link #ask},
 * {@link #flow}); what it decides and what it runs live apart, as a server is a scheduler plus a runner:
 * {@link BatchScheduler} holds the queue and decides admission, deadlines and each batch (which requests,
 * which size, when), and {@link BatchRunner} assembles, starts and splits the batches.
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
  private final ServeSettings.Model settings;
  private final ServeMetrics metrics;
  private final BatchScheduler scheduler;
  private final BatchRunner runner;
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
    this.settings = settings;
    this.metrics = new ServeMetrics(registry, model.name());
    this.scheduler = BatchScheduler.of(model, settings);
    this.runner = new BatchRunner(model, callbacks);
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
      refuse(r.replyTo(), new InvalidArgumentException(invalid), "invalid");
      return this;
    }
    if (scheduler.full()) {
      refuse(r.replyTo(), new OverloadedException(model.name(), id, "model '" + model.name() + "' is overloaded: "
          + scheduler.queued() + " requests already wait (queue-capacity = " + settings.queueCapacity()
          + ", xla-actors.actors.serve.models." + model.name() + ".queue-capacity); request '" + id
          + "' was refused without being computed: retry later, or send fewer requests at once"), "overloaded");
      return this;
    }
    Duration timeout = r.timeout() != null ? r.timeout() : settings.defaultTimeout();
    scheduler.enqueue(id, List.copyOf(r.inputs()), r.replyTo(), now, Deadlines.after(now, timeout));
    metrics.queued(scheduler.queued());
    armDeadlineTimer();
    schedule(now);
    return this;
  }

  /** Why the request cannot be served (naming what is wrong, expected vs got), or null. */
  private String invalid(String id, Infer r) {
    // Runs per request: the messages, and the name of the request in them, are built only for a refusal.
    Supplier<String> which = () -> "request '" + id + "' to model '" + model.name() + "'";
    if (scheduler.holds(id)) {
      return which.get() + ": a request with this id is already queued or running; give each request its own id (ModelServer.newRequestId())";
    }
    if (r.timeout() != null && (r.timeout().isNegative() || r.timeout().isZero())) {
      return which.get() + ": timeout must be positive, got " + r.timeout() + " (null: the model's default-timeout, "
          + settings.defaultTimeout() + ")";
    }
    return runner.invalidInputs(which, r.inputs());
  }

  private Behavior<Command> onCancel(Cancel c) {
    Request p = scheduler.held(c.requestId());
    if (p == null) {
      return this; // answered already, or never held
    }
    String reason = c.reason() == null || c.reason().isBlank() ? "no reason given" : c.reason();
    Batch batch = p.batch;
    if (batch == null) {
      scheduler.dequeue(p);
      metrics.queued(scheduler.queued());
    }
    answer(p, StatusReply.error(new RequestCancelledException(model.name(), p.id, "request '" + p.id + "' to model '"
        + model.name() + "' was cancelled (" + reason + ") " + (batch == null ? "while queued: it was not computed"
            : "while its batch " + batch.number + " ran: its row was dropped, the other requests of the batch go on"))), "cancelled");
    cancelIfAbandoned(batch);
    schedule(System.nanoTime());
    return this;
  }

  private Behavior<Command> onGetStatus(GetStatus g) {
    g.replyTo().tell(new Status(model.name(), scheduler.queued(), settings.queueCapacity(), scheduler.inFlight(), answered, true));
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

  /** Starts every batch the scheduler says is due; otherwise arms the timer for when the next one will be. */
  private void schedule(long now) {
    while (true) {
      BatchScheduler.Next next = scheduler.next(now);
      if (next instanceof BatchScheduler.Start start) {
        startBatch(start.batch(), now);
      } else if (next instanceof BatchScheduler.WaitUntil wait) {
        armBatchTimer(wait.due(), now);
        return;
      } else {
        if (next instanceof BatchScheduler.Empty) {
          cancelBatchTimer();
        }
        return;
      }
    }
  }

  private void startBatch(Batch batch, long now) {
    metrics.queued(scheduler.queued());
    List<Argument> arguments = null;
    RuntimeException notAssembled = null;
    try {
      arguments = runner.assemble(batch, (p, error) -> answer(p, StatusReply.error(error), "invalid"));
    } catch (BatchRunner.UnreadableInput e) { // a request's tensor closed meanwhile: that request is answered, not the others
      scheduler.requeue(batch);
      metrics.queued(scheduler.queued());
      return;
    } catch (RuntimeException e) { // no memory for the batch's inputs, say: this batch fails
      notAssembled = e;
    }
    scheduler.started(batch);
    for (Request p : batch.rows) {
      metrics.queueTime(now - p.arrivedNanos);
    }
    metrics.batch(batch.rows.size());
    if (notAssembled != null) {
      getContext().getSelf().tell(new BatchDone(batch, null, notAssembled));
      return;
    }
    RunHandle run;
    try {
      run = runner.start(batch, arguments);
    } catch (RuntimeException e) { // refused by the runtime (its run queue is full, say): this batch fails
      getContext().getSelf().tell(new BatchDone(batch, null, e));
      return;
    }
    scheduler.runStarted(batch);
    getContext().pipeToSelf(run.result(), (outputs, failure) -> new BatchDone(batch, outputs, failure));
    // A cancelled run's result comes at once while XLA may still compute: the batch keeps its place in
    // flight (max-batches-in-flight) until the run has really ended.
    getContext().pipeToSelf(run.ended(), (v, failure) -> new BatchRunEnded(batch));
  }

  private Behavior<Command> onBatchDone(BatchDone done) {
    Batch batch = done.batch();
    scheduler.resultIn(batch);
    runner.closeInputs(batch);
    long now = System.nanoTime();
    Duration computed = Duration.ofNanos(now - batch.startedNanos);
    if (batch.run != null) { // a batch whose inputs could not be assembled, or whose run was refused, never ran
      metrics.computeTime(now - batch.startedNanos);
    }
    Throwable failure = done.failure();
    List<List<HostTensor>> answers = null;
    if (failure == null) {
      try {
        answers = runner.split(done.outputs(), batch);
      } catch (XlaException e) { // no memory for the answers' rows: this batch fails, not the server
        failure = e;
      }
    }
    if (failure == null) {
      for (int r = 0; r < batch.rows.size(); r++) {
        Request p = batch.rows.get(r);
        if (p.answered) {
          continue;
        }
        answer(p, StatusReply.success(new Prediction(p.id, answers.get(r), batch.number, batch.size, batch.rows.size(),
            Duration.ofNanos(batch.startedNanos - p.arrivedNanos), computed)), "ok");
        metrics.latency(now - p.arrivedNanos);
      }
    } else {
      Throwable cause = unwrap(failure);
      ErrorCode code = cause instanceof XlaException x ? x.code() : ErrorCode.INTERNAL;
      int live = batch.live();
      for (Request p : batch.rows) {
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
    if (scheduler.runEnded(ended.batch())) {
      schedule(System.nanoTime());
    }
    return this;
  }

  private static Throwable unwrap(Throwable t) {
    return t instanceof CompletionException && t.getCause() != null ? t.getCause() : t;
  }

  /** Cancels a running batch none of whose requests is waiting any more: its result would be dropped. */
  private void cancelIfAbandoned(Batch batch) {
    if (batch != null && batch.allAnswered()) {
      runner.cancel(batch, "every request of batch " + batch.number + " of model '" + model.name() + "' was answered (cancelled or timed out)");
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
    for (Request p : scheduler.expire(now)) {
      Batch batch = p.batch;
      if (batch == null) {
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
      metrics.queued(scheduler.queued());
    }
    touched.forEach(this::cancelIfAbandoned);
    armDeadlineTimer();
    schedule(now);
    return this;
  }

  private void armDeadlineTimer() {
    long at = scheduler.nextDeadline();
    if (at == Long.MAX_VALUE) {
      return; // none held, or only requests without a deadline
    }
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

  /** The one place a held request is answered: at most once, and it is no longer held afterwards. */
  private void answer(Request p, StatusReply<Prediction> reply, String outcome) {
    if (!scheduler.retire(p)) {
      return;
    }
    answered++;
    metrics.outcome(outcome);
    p.replyTo.tell(reply);
  }

  /** Answers a request that was never held (invalid or refused). */
  private void refuse(ActorRef<StatusReply<Prediction>> replyTo, XlaException error, String outcome) {
    answered++;
    metrics.outcome(outcome);
    replyTo.tell(StatusReply.error(error));
  }

  private Behavior<Command> onPostStop(PostStop stop) {
    cancelBatchTimer();
    if (deadlineTimer != null) {
      deadlineTimer.cancel(false);
    }
    for (Request p : scheduler.heldRequests()) {
      answer(p, StatusReply.error(new ServingException(ErrorCode.UNAVAILABLE, model.name(), p.id, "request '" + p.id
          + "' to model '" + model.name() + "' was not answered: the server stopped " + (p.batch == null ? "while it was queued"
              : "while its batch " + p.batch.number + " ran"))), "stopped");
    }
    for (Batch b : scheduler.running()) {
      runner.cancel(b, "the server of model '" + model.name() + "' stopped");
      runner.closeInputs(b);
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
   * Watches {@code server} from a small system actor of {@code system}: the stage completes (with null)
   * when the server has stopped. Give it to {@link #ask(ActorRef, String, List, Duration, Scheduler,
   * CompletionStage)} so that a request to a stopped server fails at once instead of when its ask times out
   * (its tensors held until then). One watch per server and client, not per request. The watching actor
   * stops with the server.
   */
  public static CompletionStage<Void> watch(ActorSystem<?> system, ActorRef<Command> server) {
    CompletableFuture<Void> stopped = new CompletableFuture<>();
    system.systemActorOf(Behaviors.<Void>setup(context -> {
      context.watch(server);
      return Behaviors.receive(Void.class).onSignal(Terminated.class, t -> {
        stopped.complete(null);
        return Behaviors.stopped();
      }).build();
    }), "model-server-watch-" + UUID.randomUUID(), Props.empty());
    return stopped;
  }

  /**
   * As {@link #ask(ActorRef, String, List, Duration, Scheduler)}, failing with {@code UNAVAILABLE} at once
   * when {@code stopped} ({@link #watch}) says the server has stopped, before the request or while it waits.
   */
  public static CompletionStage<Prediction> ask(ActorRef<Command> server, String requestId, List<HostTensor> inputs, Duration timeout,
      Scheduler scheduler, CompletionStage<Void> stopped) {
    CompletableFuture<Void> gone = stopped.toCompletableFuture();
    if (gone.isDone()) {
      return CompletableFuture.failedFuture(stoppedError(server, requestId));
    }
    CompletableFuture<Prediction> answer = ask(server, requestId, inputs, timeout, scheduler).toCompletableFuture();
    gone.thenRun(() -> answer.completeExceptionally(stoppedError(server, requestId)));
    return answer;
  }

  private static ServingException stoppedError(ActorRef<Command> server, String requestId) {
    return new ServingException(ErrorCode.UNAVAILABLE, null, requestId, "request '" + requestId + "' was not computed: the model server "
        + server.path().name() + " has stopped (restart it, or use another model)");
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
