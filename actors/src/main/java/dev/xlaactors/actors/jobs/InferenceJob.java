package dev.xlaactors.actors.jobs;

import dev.xlaactors.actors.ActorsSettings;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.error.CompileException;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.LoadedPackage;
import dev.xlaactors.runtime.model.Model;
import dev.xlaactors.runtime.model.Role;
import dev.xlaactors.runtime.model.SegmentedModel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executor;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.actor.typed.PostStop;
import org.apache.pekko.actor.typed.SupervisorStrategy;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
import org.slf4j.LoggerFactory;

/**
 * A supervised long-running inference job: it runs a compiled step (a child {@link ComputationActor})
 * over the items of a {@link JobWork}, one item at a time, and ends with one {@link JobResult} to everyone
 * who started or cancelled it.
 *
 * <ul>
 *   <li>A failed item (its input, its step, or taking its outputs) is tried again after a backoff that
 *       doubles from {@code xla-actors.actors.jobs.backoff-min} to {@code backoff-max}, at most {@code
 *       max-retries} times; then the job fails with a report naming the item and the cause. Fatal errors
 *       ({@link CompileException}, {@link InvalidArgumentException}, {@link FatalJobException} anywhere in
 *       the cause chain) fail it at once.
 *   <li>Subscribers get {@link Progress} (done of total, rate, time left).
 *   <li>{@link Cancel}, or running past {@code xla-actors.actors.jobs.timeout}, stops the step: a step in
 *       progress is cancelled, so a callback it waits on fails at once with a cancellation error, and
 *       the executable is closed before the result is sent.
 * </ul>
 *
 * <pre>{@code
 * ActorRef<InferenceJob.Command> job = system.systemActorOf(
 *     InferenceJob.create("scores", Program.of(graph), client, callbacks, BatchScoring.create(n, source, out, settings), settings),
 *     "scores", Props.empty());
 * job.tell(new InferenceJob.Subscribe(progressListener));
 * job.tell(new InferenceJob.Start(resultListener));
 * }</pre>
 */
public final class InferenceJob extends AbstractBehavior<InferenceJob.Command> {

  /** Messages a job understands. */
  public sealed interface Command {}

  /** Starts the job (if it has not started) and sends its result to {@code replyTo} when it ends. */
  public record Start(ActorRef<JobResult> replyTo) implements Command {}

  /** Sends {@code subscriber} the job's progress from now on, and its last progress when it ends. */
  public record Subscribe(ActorRef<Progress> subscriber) implements Command {}

  /**
   * Stops the job; {@code replyTo} and every starter get {@link JobResult.Cancelled}, or the result the
   * job was already ending with. A job that has ended has stopped, so a late Cancel gets no answer.
   */
  public record Cancel(String reason, ActorRef<JobResult> replyTo) implements Command {}

  private record Opened(JobWork.Plan plan) implements Command {}

  private record OpenFailed(Throwable cause) implements Command {}

  private record InputReady(long attemptId, List<Argument> inputs) implements Command {}

  private record StepDone(long attemptId, List<HostTensor> outputs) implements Command {}

  private record DeviceStepDone(long attemptId, List<DeviceBuffer> outputs) implements Command {}

  private record Accepted(long attemptId, boolean goOn) implements Command {}

  private record AttemptFailed(long attemptId, Throwable cause) implements Command {}

  private record RetryDue(long attemptId) implements Command {}

  private record JobTimedOut() implements Command {}

  private record StepStopped() implements Command {}

  private record WorkClosed(Throwable failure) implements Command {}

  private static final Object RETRY_TIMER = "retry";
  private static final Object TIMEOUT_TIMER = "timeout";
  @SuppressWarnings("unchecked")
  private static final Class<List<HostTensor>> OUTPUTS = (Class<List<HostTensor>>) (Class<?>) List.class;
  @SuppressWarnings("unchecked")
  private static final Class<List<DeviceBuffer>> DEVICE_OUTPUTS = (Class<List<DeviceBuffer>>) (Class<?>) List.class;

  private final String name;
  private final JobWork work;
  private final JobSettings settings;
  private final TimerScheduler<Command> timers;
  private final Executor blocking;
  private final Duration stepTimeout;
  private final ActorRef<ComputationActor.Command> step;
  private final List<ActorRef<JobResult>> requesters = new ArrayList<>();
  private final Set<ActorRef<Progress>> subscribers = new LinkedHashSet<>();

  private boolean started;
  private boolean stepAlive = true;
  private JobWork.Plan plan = new JobWork.Plan(0, 0);
  private long item = -1;
  private int attempt;
  private long attemptId;
  private long doneThisRun;
  private long startNanos;
  private long lastProgressNanos;
  private JobResult ending;
  private boolean resultSent;
  private boolean workClosed;
  // The work call (open, input or accept) running on the blocking dispatcher, if any: the work is closed
  // only after it has returned, as JobWork promises.
  private CompletableFuture<?> inFlight = CompletableFuture.completedFuture(null);

  /**
   * A job named {@code name} running {@code step} over {@code work}; it waits for {@link Start}. {@code
   * callbacks} serves the step's host callbacks (null if it has none). The step starts compiling at once.
   *
   * <p>Supervision: a failure of the job actor itself (a bug, never a failed item) stops it; its PostStop
   * closes the work and tells the starters the job failed. A restart would run the job again from its
   * first item while the step of the old incarnation might still be running.
   */
  public static Behavior<Command> create(
      String name, Program step, XlaClient client, CallbackRuntime callbacks, JobWork work, JobSettings settings) {
    Behavior<ComputationActor.Command> computation = ComputationActor.create(step, client, callbacks, settings);
    return job(name, computation, callbacks, work, settings);
  }

  /**
   * A job named {@code name} running the bound {@code step} model over {@code work} (see {@link
   * ComputationActor#create(Model, CallbackRuntime, JobSettings)}): the model's bound parameters stay on
   * the device for every item, and the work passes only the per-request inputs ({@link JobWork#arguments};
   * device buffers and donated state included). The model stays the caller's: close it after the job ended.
   */
  public static Behavior<Command> create(
      String name, Model step, CallbackRuntime callbacks, JobWork work, JobSettings settings) {
    Behavior<ComputationActor.Command> computation = ComputationActor.create(step, callbacks, settings);
    return job(name, computation, callbacks, work, settings);
  }

  /**
   * A job named {@code name} running the {@code main} program of {@code loaded} at its smallest batch size
   * over {@code work}: {@link #create(String, LoadedPackage, Role, int, CallbackRuntime, JobWork, JobSettings)}
   * with {@link Role#MAIN}.
   */
  public static Behavior<Command> create(
      String name, LoadedPackage loaded, CallbackRuntime callbacks, JobWork work, JobSettings settings) {
    Behavior<ComputationActor.Command> computation = ComputationActor.create(loaded, callbacks, settings);
    return job(name, computation, callbacks, work, settings);
  }

  /**
   * A job named {@code name} running the program of {@code role} at {@code size} of a loaded package over
   * {@code work}, as {@link #create(String, Model, CallbackRuntime, JobWork, JobSettings)} (see {@link
   * ComputationActor#create(LoadedPackage, Role, int, CallbackRuntime, JobSettings)}): refused at once while
   * the package's host callbacks are not all registered on {@code callbacks}. The package lends the Model:
   * close {@code loaded} after the job ended.
   */
  public static Behavior<Command> create(String name, LoadedPackage loaded, Role role, int size,
      CallbackRuntime callbacks, JobWork work, JobSettings settings) {
    Behavior<ComputationActor.Command> computation = ComputationActor.create(loaded, role, size, callbacks, settings);
    return job(name, computation, callbacks, work, settings);
  }

  /**
   * A job named {@code name} running the segmented {@code step} model over {@code work}, as {@link
   * #create(String, Model, CallbackRuntime, JobWork, JobSettings)} (see {@link
   * ComputationActor#create(SegmentedModel, CallbackRuntime, JobSettings)}). The model stays the caller's.
   */
  public static Behavior<Command> create(
      String name, SegmentedModel step, CallbackRuntime callbacks, JobWork work, JobSettings settings) {
    Behavior<ComputationActor.Command> computation = ComputationActor.create(step, callbacks, settings);
    return job(name, computation, callbacks, work, settings);
  }

  /** The job actor over {@code computation}, stopped on its own failure (see the supervision note above). */
  private static Behavior<Command> job(String name, Behavior<ComputationActor.Command> computation,
      CallbackRuntime callbacks, JobWork work, JobSettings settings) {
    ActorsSettings actors = callbacks != null ? callbacks.settings() : null;
    return Behaviors.<Command>supervise(
            Behaviors.setup(
                context ->
                    Behaviors.withTimers(
                        timers ->
                            new InferenceJob(
                                context,
                                timers,
                                name,
                                computation,
                                actors != null ? actors : ActorsSettings.create(context.getSystem()),
                                work,
                                settings))))
        .onFailure(SupervisorStrategy.stop());
  }

  private InferenceJob(
      ActorContext<Command> context,
      TimerScheduler<Command> timers,
      String name,
      Behavior<ComputationActor.Command> computation,
      ActorsSettings actors,
      JobWork work,
      JobSettings settings) {
    super(context);
    this.name = name;
    this.work = work;
    this.settings = settings;
    this.timers = timers;
    this.blocking = context.getSystem().dispatchers().lookup(DispatcherSelector.fromConfig(actors.runDispatcher()));
    // A step bounds itself (run timeout, native backstop); the ask's own timeout only guards against a lost reply.
    this.stepTimeout = actors.runTimeout().plus(actors.nativeBackstopSlack()).plusMinutes(1);
    this.step = context.spawn(computation, "step");
    context.watchWith(step, new StepStopped());
  }

  @Override
  public Receive<Command> createReceive() {
    return newReceiveBuilder()
        .onMessage(Start.class, this::onStart)
        .onMessage(Subscribe.class, this::onSubscribe)
        .onMessage(Cancel.class, this::onCancel)
        .onMessage(Opened.class, this::onOpened)
        .onMessage(OpenFailed.class, this::onOpenFailed)
        .onMessage(InputReady.class, this::onInputReady)
        .onMessage(StepDone.class, this::onStepDone)
        .onMessage(DeviceStepDone.class, this::onDeviceStepDone)
        .onMessage(Accepted.class, this::onAccepted)
        .onMessage(AttemptFailed.class, this::onAttemptFailed)
        .onMessage(RetryDue.class, this::onRetryDue)
        .onMessage(JobTimedOut.class, this::onJobTimedOut)
        .onMessage(StepStopped.class, this::onStepStopped)
        .onMessage(WorkClosed.class, this::onWorkClosed)
        .onSignal(PostStop.class, this::onPostStop)
        .build();
  }

  private Behavior<Command> onStart(Start s) {
    requesters.add(s.replyTo());
    if (started || ending != null) {
      return this;
    }
    started = true;
    startNanos = System.nanoTime();
    timers.startSingleTimer(TIMEOUT_TIMER, new JobTimedOut(), settings.timeout());
    getContext()
        .pipeToSelf(
            onBlocking(this::openWork),
            (opened, failure) -> failure == null ? new Opened(opened) : new OpenFailed(unwrap(failure)));
    return this;
  }

  /** Runs one work call on the blocking dispatcher and remembers it, so the work is closed after it. */
  private <T> CompletableFuture<T> onBlocking(java.util.function.Supplier<T> call) {
    CompletableFuture<T> f = CompletableFuture.supplyAsync(call, blocking);
    inFlight = f;
    return f;
  }

  private JobWork.Plan openWork() {
    try {
      return work.open();
    } catch (Exception e) {
      throw new CompletionException(e);
    }
  }

  private Behavior<Command> onSubscribe(Subscribe s) {
    subscribers.add(s.subscriber());
    if (started) {
      s.subscriber().tell(progress());
    }
    return this;
  }

  private Behavior<Command> onCancel(Cancel c) {
    requesters.add(c.replyTo());
    getContext().getLog().info("job '{}' cancelled: {}", name, c.reason());
    return end(new JobResult.Cancelled(name, done(), c.reason()));
  }

  private Behavior<Command> onOpened(Opened o) {
    if (ending != null) {
      return this;
    }
    plan = o.plan();
    if (plan.alreadyDone() > 0) {
      getContext().getLog().info("job '{}' resumes: {} of {} items already done", name, plan.alreadyDone(), plan.total());
    } else {
      getContext().getLog().info("job '{}' starts: {} items", name, plan.total());
    }
    publish(true);
    return nextItem(-1);
  }

  private Behavior<Command> onOpenFailed(OpenFailed f) {
    return end(failed(-1, 0, f.cause(), "job '" + name + "' could not open its work: " + describe(f.cause())));
  }

  private Behavior<Command> nextItem(long previous) {
    OptionalLong next = work.next(previous);
    if (next.isEmpty()) {
      return end(new JobResult.Completed(name, done(), elapsed()));
    }
    item = next.getAsLong();
    attempt = 1;
    tryItem();
    return this;
  }

  private void tryItem() {
    long id = ++attemptId;
    long current = item;
    getContext()
        .pipeToSelf(
            onBlocking(() -> inputOf(current)),
            (inputs, failure) -> failure == null ? new InputReady(id, inputs) : new AttemptFailed(id, unwrap(failure)));
  }

  private List<Argument> inputOf(long current) {
    try {
      return work.arguments(current);
    } catch (Exception e) {
      throw new CompletionException(e);
    }
  }

  private Behavior<Command> onInputReady(InputReady r) {
    if (r.attemptId() != attemptId || ending != null) {
      return this;
    }
    long id = r.attemptId();
    if (work.outputsOnDevice()) {
      getContext()
          .askWithStatus(
              DEVICE_OUTPUTS,
              step,
              stepTimeout,
              replyTo -> new ComputationActor.RunOnDevice(r.inputs(), replyTo),
              (outputs, failure) -> failure == null ? new DeviceStepDone(id, outputs) : new AttemptFailed(id, unwrap(failure)));
      return this;
    }
    List<HostTensor> hostInputs = new ArrayList<>(r.inputs().size());
    for (Argument a : r.inputs()) {
      if (a instanceof Argument.Host h) {
        hostInputs.add(h.tensor());
      }
    }
    boolean allHost = hostInputs.size() == r.inputs().size();
    getContext()
        .askWithStatus(
            OUTPUTS,
            step,
            stepTimeout,
            replyTo -> allHost ? new ComputationActor.Run(hostInputs, replyTo) : new ComputationActor.RunArguments(r.inputs(), replyTo),
            (outputs, failure) -> failure == null ? new StepDone(id, outputs) : new AttemptFailed(id, unwrap(failure)));
    return this;
  }

  private Behavior<Command> onDeviceStepDone(DeviceStepDone d) {
    if (d.attemptId() != attemptId || ending != null) {
      d.outputs().forEach(DeviceBuffer::close); // a stale step's outputs: nobody will take them
      return this;
    }
    long current = item;
    return accept(d.attemptId(), () -> work.acceptOnDevice(current, d.outputs()));
  }

  private Behavior<Command> onStepDone(StepDone d) {
    if (d.attemptId() != attemptId || ending != null) {
      return this;
    }
    long current = item;
    return accept(d.attemptId(), () -> work.accept(current, d.outputs()));
  }

  /** Hands a step's outputs to the work on the blocking dispatcher; its answer says whether to go on. */
  private Behavior<Command> accept(long id, java.util.concurrent.Callable<Boolean> accept) {
    getContext()
        .pipeToSelf(
            onBlocking(() -> {
              try {
                return accept.call();
              } catch (Exception e) {
                throw new CompletionException(e);
              }
            }),
            (goOn, failure) -> failure == null ? new Accepted(id, goOn) : new AttemptFailed(id, unwrap(failure)));
    return this;
  }

  private Behavior<Command> onAccepted(Accepted a) {
    if (a.attemptId() != attemptId || ending != null) {
      return this;
    }
    doneThisRun++;
    if (!a.goOn()) {
      return end(new JobResult.Completed(name, done(), elapsed()));
    }
    publish(false);
    return nextItem(item);
  }

  private Behavior<Command> onAttemptFailed(AttemptFailed f) {
    if (f.attemptId() != attemptId || ending != null) {
      return this;
    }
    Throwable cause = f.cause();
    if (isFatal(cause)) {
      return end(failed(item, attempt, cause,
          "item " + item + " failed with a fatal error on attempt " + attempt + ": " + describe(cause)));
    }
    if (attempt > settings.maxRetries()) {
      return end(failed(item, attempt, cause,
          "item " + item + " failed " + attempt + " times (" + JobSettings.MAX_RETRIES_KEY + " = " + settings.maxRetries()
              + "); last error: " + describe(cause)));
    }
    Duration backoff = settings.backoff(attempt);
    getContext().getLog().warn("job '{}': item {} failed (attempt {} of {}), retrying in {} ms: {}",
        name, item, attempt, settings.maxRetries() + 1, backoff.toMillis(), brief(cause));
    attempt++;
    timers.startSingleTimer(RETRY_TIMER, new RetryDue(attemptId), backoff);
    return this;
  }

  private Behavior<Command> onRetryDue(RetryDue r) {
    if (r.attemptId() == attemptId && ending == null) {
      tryItem();
    }
    return this;
  }

  private Behavior<Command> onJobTimedOut(JobTimedOut t) {
    return end(new JobResult.TimedOut(name, done(),
        "job '" + name + "' did not finish within " + format(settings.timeout()) + " (" + JobSettings.TIMEOUT_KEY + ")"));
  }

  private Behavior<Command> onStepStopped(StepStopped s) {
    stepAlive = false;
    if (ending == null) {
      // Not asked to stop: the computation died, so nothing more can be computed.
      ending = failed(item, attempt, null, "job '" + name + "': its step computation stopped unexpectedly");
    }
    return finish();
  }

  /**
   * Ends the job with {@code result} (the first result wins): stops the step, which cancels a step in
   * progress and closes the executable; the result is sent once the step has stopped.
   */
  private Behavior<Command> end(JobResult result) {
    if (ending != null) {
      return this; // already ending: requesters added meanwhile get the first result
    }
    ending = result;
    attemptId++; // late answers of the attempt in progress are ignored from now on
    timers.cancelAll();
    if (!stepAlive) {
      return finish();
    }
    getContext().stop(step);
    return this;
  }

  private Behavior<Command> finish() {
    if (workClosed) {
      return this; // closing already
    }
    // Closed before the result goes out, so a requester may start the same job again at once (the
    // output file's lock is released); closed after the work call in flight has returned (an open that
    // is still reading a large file would otherwise take the lock after the close); closed on the
    // blocking dispatcher, because closing forces the file to disk.
    workClosed = true;
    CompletableFuture<Void> closed = inFlight.handle((r, e) -> null).thenRunAsync(this::closeWorkOrThrow, blocking);
    getContext().pipeToSelf(closed, (ok, failure) -> new WorkClosed(failure == null ? null : unwrap(failure)));
    return this;
  }

  private Behavior<Command> onWorkClosed(WorkClosed c) {
    if (c.failure() != null) {
      getContext().getLog().warn("job '{}': closing its work failed: {}", name, describe(c.failure()));
    }
    publish(true);
    requesters.forEach(r -> r.tell(ending));
    resultSent = true;
    getContext().getLog().info("job '{}' ended: {}", name, ending);
    return Behaviors.stopped();
  }

  private void closeWorkOrThrow() {
    try {
      work.close();
    } catch (Exception e) {
      throw new CompletionException(e);
    }
  }

  private Behavior<Command> onPostStop(PostStop signal) {
    closeWork();
    if (!resultSent) {
      JobResult result = ending != null ? ending : failed(item, attempt, null, "job '" + name + "' stopped before it ended");
      requesters.forEach(r -> r.tell(result));
    }
    return this;
  }

  private void closeWork() {
    if (workClosed) {
      return;
    }
    workClosed = true;
    // The actor stopped without finishing (a bug in it): close after the call in flight, off this thread.
    String job = name;
    inFlight.handle((r, e) -> null).thenRunAsync(() -> {
      try {
        work.close();
      } catch (Exception e) {
        LoggerFactory.getLogger(InferenceJob.class).warn("job '{}': closing its work failed: {}", job, e.toString());
      }
    }, blocking);
  }

  private void publish(boolean force) {
    long now = System.nanoTime();
    if (!force && now - lastProgressNanos < settings.progressInterval().toNanos()) {
      return;
    }
    lastProgressNanos = now;
    Progress p = progress();
    subscribers.forEach(s -> s.tell(p));
  }

  private Progress progress() {
    Duration elapsed = elapsed();
    double seconds = elapsed.toNanos() / 1e9;
    double rate = doneThisRun > 0 && seconds > 0 ? doneThisRun / seconds : 0;
    long left = Math.max(0, plan.total() - done());
    Optional<Duration> eta =
        left == 0 ? Optional.of(Duration.ZERO) : rate > 0 ? Optional.of(Duration.ofMillis((long) (left / rate * 1000))) : Optional.empty();
    return new Progress(name, done(), plan.total(), rate, elapsed, eta);
  }

  private long done() {
    return plan.alreadyDone() + doneThisRun;
  }

  private Duration elapsed() {
    return started ? Duration.ofNanos(System.nanoTime() - startNanos) : Duration.ZERO;
  }

  private JobResult.Failed failed(long failedItem, int attempts, Throwable cause, String message) {
    getContext().getLog().error("job '{}' failed: {}", name, message);
    boolean fatal = cause != null && isFatal(cause);
    return new JobResult.Failed(
        name, done(), new JobResult.FailureReport(failedItem, attempts, fatal, Optional.ofNullable(cause), message));
  }

  /** Whether retrying cannot help: a program that does not compile, bad inputs, or a declared fatal error. */
  static boolean isFatal(Throwable t) {
    for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
      if (c instanceof CompileException || c instanceof InvalidArgumentException || c instanceof FatalJobException) {
        return true;
      }
    }
    return false;
  }

  private static String format(Duration d) {
    return d.toMillis() % 1000 == 0 ? d.toSeconds() + "s" : d.toMillis() + "ms";
  }

  private static String describe(Throwable t) {
    return t == null ? "unknown" : t.getClass().getName() + ": " + t.getMessage();
  }

  /** The cause's own message, with its class's simple name only if the message is empty. */
  private static String brief(Throwable t) {
    return t == null ? "unknown" : t.getMessage() != null && !t.getMessage().isBlank() ? t.getMessage() : t.getClass().getSimpleName();
  }

  private static Throwable unwrap(Throwable t) {
    Throwable c = t;
    while (c instanceof CompletionException && c.getCause() != null) {
      c = c.getCause();
    }
    return c;
  }
}
