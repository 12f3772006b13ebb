package dev.xlaactors.actors;

import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.HostTensor;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.PostStop;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;

/**
 * Supervises one run of a program with host callbacks: it receives the run's host calls, hands them to
 * the {@link CallbackDispatcher} one at a time in arrival (program) order, tracks every pending reply tag,
 * and enforces the per-callback and per-run timeouts from configuration. When a callback throws, returns
 * a bad result, times out, is unknown, or the actor serving it stops, it aborts the run: every pending call
 * fails at once with the cause, later calls fail on arrival, and the run's execution ends with a {@link
 * CallbackException} naming the callback and the cause. Other runs are unaffected.
 *
 * <p>Calls to registered functions usually bypass it ({@link CallbackRuntime}'s fast path): such a call
 * sits in the run's {@link RunState}, where an abort finds, fails and counts it, and the {@link
 * DirectCallWatchdog} tells the supervisor when it is overdue.
 *
 * <p>Spawned lazily, when its run first needs it: a call that takes the actor path, a failed or overdue
 * direct call, a cancel, a run deadline passed (told by the watchdog), or {@link RunHandle#supervisor()};
 * a run that needs none ends without one and costs no actor or message. It stops when told the run
 * ended; if it stops for any other reason it fails whatever is still pending, so no XLA thread is left
 * waiting on it.
 */
public final class RunSupervisor extends AbstractBehavior<RunSupervisor.Command> {

  /** Messages the supervisor understands. */
  public sealed interface Command {}

  /** A host call of this run arrived from the native bridge (sent from the XLA thread). */
  public record HostCallArrived(HostCall call) implements Command {}

  /** Cancels the run: pending and later callbacks fail with a cancellation error naming {@code reason}. */
  public record Cancel(String reason) implements Command {}

  /** The dispatcher answered the call {@code tag} successfully. */
  record CallbackSucceeded(long tag) implements Command {}

  /** The call {@code tag} failed; the run is aborted with {@code cause}. */
  record CallbackFailed(long tag, CallbackException cause) implements Command {}

  /** The call {@code tag} is served by {@code server}, whose death must abort the run. */
  record ServedBy(long tag, ActorRef<?> server) implements Command {}

  /**
   * A host call of this run that went straight to the callback threads ({@link CallbackRuntime}'s fast
   * path) is past its deadline: told by the {@link DirectCallWatchdog}.
   */
  record DirectCallTimedOut(DirectCall call) implements Command {}

  /** The run left the queue and executes now: its timeout starts. */
  record Executing() implements Command {}

  /** The run's execution returned (successfully or not); the supervisor stops. */
  record RunEnded() implements Command {}

  private record ServerAnswered(CallbackServer.Response response) implements Command {}

  private record CallTimedOut(long tag) implements Command {}

  /** The run's deadline passed: sent by its own timer, or by the {@link DirectCallWatchdog} when the run had no supervisor yet. */
  record RunTimedOut() implements Command {}

  private record ServerStopped(ActorRef<?> server) implements Command {}

  private record DispatcherStopped() implements Command {}

  private record Pending(HostCall call, long arrivedNanos, ActorRef<?> server, CallbackExecution execution) {
    Pending servedBy(ActorRef<?> by) {
      return new Pending(call, arrivedNanos, by, execution);
    }
  }

  private static final Object RUN_TIMER = "run-timeout";

  private final long runId;
  private final RunState<?> state;
  private final ActorRef<CallbackDispatcher.Command> dispatcher;
  private final ActorsSettings settings;
  private final RuntimeMetrics metrics;
  private final TimerScheduler<Command> timers;
  private final ActorRef<CallbackServer.Response> serverReplies;
  private final CallbackThreads callbackThreads;
  private final ArrayDeque<Pending> queued = new ArrayDeque<>();
  private final Map<Long, Pending> inFlight = new HashMap<>();

  /**
   * A supervisor for run {@code runId}. No supervision strategy: a failure stops it, and its PostStop
   * handler then fails the run's pending calls, which is the safe outcome for a run half-way through.
   * Spawned by the run's {@link RunState} when the run first needs it (possibly mid-run): the run's
   * timeout fires at {@code runDeadlineNanos} ({@link System#nanoTime()}), or, for a run still queued
   * ({@code 0}), starts when told {@link Executing}.
   */
  static Behavior<Command> create(
      long runId,
      RunState<?> state,
      ActorRef<CallbackDispatcher.Command> dispatcher,
      ActorsSettings settings,
      RuntimeMetrics metrics,
      CallbackThreads callbackThreads,
      long runDeadlineNanos) {
    return Behaviors.withMdc(
        Command.class,
        Map.of("runId", Long.toString(runId)),
        Behaviors.setup(
            context ->
                Behaviors.withTimers(
                    timers -> new RunSupervisor(
                        context, timers, runId, state, dispatcher, settings, metrics, callbackThreads, runDeadlineNanos))));
  }

  private RunSupervisor(
      ActorContext<Command> context,
      TimerScheduler<Command> timers,
      long runId,
      RunState<?> state,
      ActorRef<CallbackDispatcher.Command> dispatcher,
      ActorsSettings settings,
      RuntimeMetrics metrics,
      CallbackThreads callbackThreads,
      long runDeadlineNanos) {
    super(context);
    this.runId = runId;
    this.state = state;
    this.dispatcher = dispatcher;
    this.settings = settings;
    this.metrics = metrics;
    this.timers = timers;
    this.serverReplies = context.messageAdapter(CallbackServer.Response.class, ServerAnswered::new);
    this.callbackThreads = callbackThreads;
    if (runDeadlineNanos != 0) {
      Duration left = Duration.ofNanos(Math.max(0, runDeadlineNanos - System.nanoTime()));
      timers.startSingleTimer(RUN_TIMER, new RunTimedOut(), left);
    }
    context.watchWith(dispatcher, new DispatcherStopped());
  }

  @Override
  public Receive<Command> createReceive() {
    return newReceiveBuilder()
        .onMessage(HostCallArrived.class, this::onHostCallArrived)
        .onMessage(DirectCallTimedOut.class, this::onDirectCallTimedOut)
        .onMessage(CallbackSucceeded.class, this::onCallbackSucceeded)
        .onMessage(CallbackFailed.class, this::onCallbackFailed)
        .onMessage(ServedBy.class, this::onServedBy)
        .onMessage(ServerAnswered.class, this::onServerAnswered)
        .onMessage(CallTimedOut.class, this::onCallTimedOut)
        .onMessage(RunTimedOut.class, this::onRunTimedOut)
        .onMessage(ServerStopped.class, this::onServerStopped)
        .onMessage(DispatcherStopped.class, this::onDispatcherStopped)
        .onMessage(Cancel.class, this::onCancel)
        .onMessage(Executing.class, this::onExecuting)
        .onMessage(RunEnded.class, this::onRunEnded)
        .onSignal(PostStop.class, this::onPostStop)
        .build();
  }

  private Behavior<Command> onHostCallArrived(HostCallArrived m) {
    CallbackException abort = state.abortCause();
    if (abort != null) {
      m.call().fail(ErrorCode.CANCELLED, "run " + runId + " was aborted: " + abort.getMessage());
      return this;
    }
    queued.add(new Pending(m.call(), System.nanoTime(), null, new CallbackExecution(callbackThreads)));
    dispatchNext();
    return this;
  }

  private Behavior<Command> onDirectCallTimedOut(DirectCallTimedOut m) {
    if (state.directCall() == m.call()) {
      abort(callbackTimedOut(m.call().call().callbackName()), true);
    }
    return this;
  }

  /** Callbacks of one run execute one at a time, in the order the program made them. */
  private void dispatchNext() {
    if (!inFlight.isEmpty() || queued.isEmpty()) {
      return;
    }
    Pending next = queued.poll();
    HostCall call = next.call();
    inFlight.put(call.tag(), next);
    timers.startSingleTimer(call.tag(), new CallTimedOut(call.tag()), settings.callbackTimeoutOf(call.callbackName()));
    dispatcher.tell(
        new CallbackDispatcher.Dispatch(
            call, getContext().getSelf(), serverReplies, metrics, next.arrivedNanos(), next.execution(), null));
  }

  /** Bookkeeping only: whoever answered the call has counted it (before releasing XLA). */
  private Behavior<Command> onCallbackSucceeded(CallbackSucceeded m) {
    Pending done = inFlight.remove(m.tag());
    if (done != null) {
      timers.cancel(m.tag());
      unwatch(done);
    }
    dispatchNext();
    return this;
  }

  private Behavior<Command> onCallbackFailed(CallbackFailed m) {
    abort(m.cause(), false);
    return this;
  }

  private Behavior<Command> onServedBy(ServedBy m) {
    Pending pending = inFlight.get(m.tag());
    if (pending != null) {
      inFlight.put(m.tag(), pending.servedBy(m.server()));
      getContext().watchWith(m.server(), new ServerStopped(m.server()));
    }
    return this;
  }

  private Behavior<Command> onServerAnswered(ServerAnswered m) {
    CallbackServer.Response response = m.response();
    Pending pending = inFlight.get(response.tag());
    if (pending == null) {
      return this; // late: the call already timed out or the run was aborted
    }
    HostCall call = pending.call();
    if (response.error() != null) {
      // A server that answers with a CallbackException has already said what went wrong and with which
      // code (a remote node that became unreachable: UNAVAILABLE); anything else is a callback that threw.
      abort(response.error() instanceof CallbackException named ? named : threw(call.callbackName(), response.error()), false);
      return this;
    }
    Optional<String> mismatch = call.mismatch(response.outputs());
    if (mismatch.isPresent()) {
      abort(new CallbackException(call.callbackName(), ErrorCode.INVALID_ARGUMENT, mismatch.get()), false);
      return this;
    }
    metrics.recordCallback(call.callbackName(), System.nanoTime() - pending.arrivedNanos(), false, false);
    // Bookkeeping first (as the function path does: RunEnded must not overtake it), then the copy of the
    // outputs into XLA's memory, which can be large: on the callback dispatcher, not this actor's thread.
    // complete() is a no-op if the run was aborted meanwhile.
    Behavior<Command> next = onCallbackSucceeded(new CallbackSucceeded(response.tag()));
    List<HostTensor> outputs = response.outputs();
    callbackThreads.execute(() -> call.complete(outputs));
    return next;
  }

  private Behavior<Command> onCallTimedOut(CallTimedOut m) {
    Pending pending = inFlight.get(m.tag());
    if (pending != null) {
      abort(callbackTimedOut(pending.call().callbackName()), true);
    }
    return this;
  }

  private CallbackException callbackTimedOut(String name) {
    ActorsSettings.Timeout timeout = settings.callbackTimeout(name);
    return new CallbackException(
        name,
        ErrorCode.DEADLINE_EXCEEDED,
        "callback '" + name + "' did not answer within " + format(timeout.duration()) + " (" + timeout.key() + ")");
  }

  private Behavior<Command> onRunTimedOut(RunTimedOut m) {
    abort(
        new CallbackException(
            null,
            ErrorCode.DEADLINE_EXCEEDED,
            "run " + runId + " did not finish within " + format(settings.runTimeout()) + " (xla-actors.actors.runs.timeout)"),
        true);
    return this;
  }

  private Behavior<Command> onServerStopped(ServerStopped m) {
    for (Pending p : inFlight.values()) {
      if (m.server().equals(p.server())) {
        String name = p.call().callbackName();
        abort(
            new CallbackException(
                name, ErrorCode.UNAVAILABLE, "callback '" + name + "': the actor serving it (" + m.server().path() + ") stopped"),
            false);
        break;
      }
    }
    return this;
  }

  private Behavior<Command> onDispatcherStopped(DispatcherStopped m) {
    abort(new CallbackException(null, ErrorCode.UNAVAILABLE, "the callback dispatcher stopped during run " + runId), false);
    return this;
  }

  private Behavior<Command> onCancel(Cancel m) {
    abort(new CallbackException(null, ErrorCode.CANCELLED, "run " + runId + " was cancelled: " + m.reason()), false);
    return this;
  }

  private Behavior<Command> onExecuting(Executing m) {
    timers.startSingleTimer(RUN_TIMER, new RunTimedOut(), settings.runTimeout());
    return this;
  }

  private Behavior<Command> onRunEnded(RunEnded m) {
    // The execution returned, so nothing is waiting any more: any leftover call was answered or given up
    // natively (and counted by the runtime as a timeout). Its function, if still running, is interrupted;
    // failing the call is a no-op that makes sure nothing answers it.
    for (Pending p : inFlight.values()) {
      p.execution().abandon();
      p.call().fail(ErrorCode.ABORTED, "run " + runId + " ended");
    }
    DirectCall direct = state.directCall();
    if (direct != null) {
      direct.execution().abandon();
      direct.call().fail(ErrorCode.ABORTED, "run " + runId + " ended");
      state.directCallDone(direct.execution());
    }
    inFlight.clear();
    queued.clear();
    return Behaviors.stopped();
  }

  private Behavior<Command> onPostStop(PostStop signal) {
    if (!inFlight.isEmpty() || !queued.isEmpty() || state.directCall() != null) {
      abort(new CallbackException(null, ErrorCode.ABORTED, "the supervisor of run " + runId + " stopped"), false);
    }
    return this;
  }

  /**
   * Aborts the run with {@code cause} (the first cause wins): cancels the run natively so later calls fail
   * on arrival, fails every pending call now, and then makes the abort the run's outcome, which its caller
   * gets at once even if XLA is still computing.
   */
  private void abort(CallbackException cause, boolean timedOut) {
    if (state.recordAbort(cause)) {
      // DEBUG: the run's caller gets the cause as its exception (a job logs its retry), so a WARN here
      // would report every failure twice.
      getContext().getLog().debug("aborting run {}: {}", runId, cause.getMessage());
    }
    CallbackException first = state.abortCause();
    String message = first.getMessage();
    for (Pending p : inFlight.values()) {
      timers.cancel(p.call().tag());
      if (!p.execution().abandon()) {
        continue; // its function's answer won the race: counted and delivered by the function's thread
      }
      // Count before failing: the failure releases the XLA thread, and the run's caller may read the
      // metrics as soon as the run ends.
      metrics.recordCallback(p.call().callbackName(), System.nanoTime() - p.arrivedNanos(), true, timedOut);
      p.call().fail(first.code(), message);
    }
    DirectCall direct = state.directCall();
    if (direct != null) {
      if (direct.execution().abandon()) {
        metrics.recordCallback(direct.call().callbackName(), System.nanoTime() - direct.arrivedNanos(), true, timedOut);
        direct.call().fail(first.code(), message);
      }
      state.directCallDone(direct.execution());
    }
    for (Pending p : queued) {
      p.call().fail(ErrorCode.CANCELLED, "run " + runId + " was aborted: " + message);
    }
    inFlight.clear();
    queued.clear();
    state.abortDecided();
  }

  private void unwatch(Pending p) {
    if (p.server() != null && inFlight.values().stream().noneMatch(o -> p.server().equals(o.server()))) {
      getContext().unwatch(p.server());
    }
  }

  /** The exception for a callback that threw: names the callback and the Java exception's class and message. */
  static CallbackException threw(String name, Throwable thrown) {
    return new CallbackException(
        name, ErrorCode.ABORTED, "callback '" + name + "' threw " + thrown.getClass().getName() + ": " + thrown.getMessage(), thrown);
  }

  private static String format(Duration d) {
    return d.toMillis() % 1000 == 0 ? d.toSeconds() + "s" : d.toMillis() + "ms";
  }
}
