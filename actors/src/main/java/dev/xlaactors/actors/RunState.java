package dev.xlaactors.actors;

import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.RunContext;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pekko.actor.typed.ActorRef;

/**
 * What a run's executing thread and its {@link RunSupervisor} share. The run's outcome is decided once,
 * by whichever comes first: the execution returning (success or failure) or the supervisor aborting it
 * (cancel, a timeout, a failed callback). An aborted run never reports success, even if XLA finishes
 * afterwards, and its caller learns of the abort at once through {@link #result()}. Thread-safe.
 *
 * <p>The supervisor is spawned lazily, by the first of {@link #supervisor()}'s callers (a call that takes
 * the actor path, a failed or overdue direct call, a cancel, the watchdog when the run's deadline passed):
 * a run whose callbacks all go straight to their functions and answer in time spawns no actor and sends
 * no message. Once spawned it stays the run's (the slot is never emptied), and it is told {@link
 * RunSupervisor.RunEnded} exactly once, when the run has ended.
 *
 * @param <T> what a successful run gives (host tensors, or device buffers the caller will own)
 */
final class RunState<T> {
  private final CompletableFuture<T> result = new CompletableFuture<>();
  private final CompletableFuture<Void> endedStage = new CompletableFuture<>(); // completed by ended()
  private final java.util.function.Consumer<? super T> discard;
  private final AtomicBoolean decided = new AtomicBoolean();
  private final AtomicReference<CallbackException> abortCause = new AtomicReference<>();
  private final Queue<HostCall> issued = new ConcurrentLinkedQueue<>();
  private final AtomicReference<DirectCall> directCall = new AtomicReference<>();
  private final AtomicReference<DirectCall> reportedOverdue = new AtomicReference<>();
  private final AtomicBoolean reportedRunOverdue = new AtomicBoolean();
  private final RuntimeMetrics metrics;
  private final SupervisorSpawner spawner;
  private volatile long startNanos = System.nanoTime();
  private volatile RunContext context;
  private volatile ActorRef<RunSupervisor.Command> supervisor; // written under this
  private long deadlineNanos; // guarded by this: 0 while queued
  private boolean ended; // guarded by this

  /** Spawns the run's supervisor: its run timeout fires at {@code deadlineNanos}, or starts later if 0. */
  interface SupervisorSpawner {
    ActorRef<RunSupervisor.Command> spawn(RunState<?> state, long deadlineNanos);
  }

  RunState(RuntimeMetrics metrics, SupervisorSpawner spawner) {
    this(metrics, spawner, outputs -> {});
  }

  /** {@code discard} frees the outputs of an execution that returned after the run was aborted. */
  RunState(RuntimeMetrics metrics, SupervisorSpawner spawner, java.util.function.Consumer<? super T> discard) {
    this.metrics = metrics;
    this.spawner = spawner;
    this.discard = discard;
  }

  /**
   * The run's supervisor, spawned now if the run has none yet. A run that already ended gets one that
   * is told at once that it ended (it stops, and anything told to it later is dropped).
   */
  ActorRef<RunSupervisor.Command> supervisor() {
    ActorRef<RunSupervisor.Command> s = supervisor;
    if (s != null) {
      return s;
    }
    synchronized (this) {
      if (supervisor == null) {
        s = spawner.spawn(this, deadlineNanos);
        if (ended) {
          s.tell(new RunSupervisor.RunEnded());
        }
        supervisor = s;
      }
      return supervisor;
    }
  }

  /**
   * Cancels the run through its supervisor (spawned for it if needed); once the run has ended, the stage
   * says what the cancel did. A run whose outcome is already decided spawns nothing: its outcome stands
   * (a cancel could not change it, and its execution is returning or was already aborted).
   */
  java.util.concurrent.CompletionStage<RunHandle.CancelOutcome> cancel(String reason) {
    if (!decided.get()) {
      supervisor().tell(new RunSupervisor.Cancel(reason));
    }
    return result.handle((outputs, failure) -> {
      if (failure == null) {
        return RunHandle.CancelOutcome.ALREADY_FINISHED;
      }
      Throwable cause = failure instanceof java.util.concurrent.CompletionException && failure.getCause() != null
          ? failure.getCause() : failure;
      return cause instanceof XlaException x && x.code() == ErrorCode.CANCELLED
          ? RunHandle.CancelOutcome.CANCELLED : RunHandle.CancelOutcome.ALREADY_FAILED;
    });
  }

  /**
   * The run ended: its execution returned, or it was never executed (cancelled while queued, refused). Its
   * supervisor, if it has one, is told so and stops.
   */
  void ended() {
    if (directCall.get() != null) {
      // A direct call still in flight (its native wait gave up on it before the watchdog reported it):
      // the supervisor's RunEnded gives it up, interrupting its function and freeing the slot.
      supervisor();
    }
    ActorRef<RunSupervisor.Command> s;
    synchronized (this) {
      ended = true;
      s = supervisor;
    }
    if (s != null) {
      s.tell(new RunSupervisor.RunEnded());
    }
    endedStage.complete(null);
  }

  /**
   * Completes once the run has ended ({@link #ended()}): its execution returned or it will never execute.
   * An aborted run's {@link #result()} completes earlier, while XLA may still compute.
   */
  CompletableFuture<Void> whenEnded() {
    return endedStage;
  }

  /** The run's outcome: its outputs, or the exception it ended with (the abort cause when aborted). */
  CompletableFuture<T> result() {
    return result;
  }

  /**
   * The execution begins now (a queued run's time starts here, not when it was queued): the run must end
   * within {@code timeout}. A supervisor spawned while the run was queued starts its timer now.
   */
  void executing(java.time.Duration timeout) {
    long now = System.nanoTime();
    startNanos = now;
    ActorRef<RunSupervisor.Command> s;
    synchronized (this) {
      deadlineNanos = now + timeout.toNanos();
      if (deadlineNanos == 0) {
        deadlineNanos = 1; // 0 means "not executing yet"
      }
      s = supervisor;
    }
    if (s != null) {
      s.tell(new RunSupervisor.Executing());
    }
  }

  /** When the executing run times out ({@link System#nanoTime()}); 0 while it is queued. */
  synchronized long deadlineNanos() {
    return deadlineNanos;
  }

  /**
   * True once, the first time the watchdog finds the executing run past its deadline and still undecided:
   * the watchdog then tells the run's supervisor (spawning it if needed), which aborts the run.
   */
  boolean reportRunOverdue(long nowNanos) {
    long deadline = deadlineNanos();
    return deadline != 0 && nowNanos - deadline > 0 && !decided.get() && reportedRunOverdue.compareAndSet(false, true);
  }

  /** Records the abort cause; true if it is the first. Cancels the native run either way. */
  boolean recordAbort(CallbackException cause) {
    boolean first = abortCause.compareAndSet(null, cause);
    cancelNative();
    return first;
  }

  /**
   * Makes the abort the run's outcome if it had none yet, once the supervisor has failed and counted the
   * run's pending calls (the caller may read the metrics as soon as the outcome is out).
   */
  void abortDecided() {
    decide(null, abortCause.get());
  }

  /** Why the run was aborted, or null. */
  CallbackException abortCause() {
    return abortCause.get();
  }

  /**
   * The execution returned {@code outputs}: the run's outputs unless it was aborted first, in which case
   * this throws the abort cause and the outputs are dropped.
   */
  T succeeded(T outputs) {
    if (!decide(outputs, null)) {
      discard.accept(outputs);
      throw outcomeException();
    }
    return outputs;
  }

  /** The execution failed with {@code failure}: returns what the caller must see (the abort cause if aborted). */
  RuntimeException failed(RuntimeException failure) {
    CallbackException cause = abortCause.get();
    decide(null, cause != null ? cause : failure);
    return outcomeException();
  }

  /** Whether the run already has an outcome (a queued run cancelled before it executes has one). */
  boolean decided() {
    return decided.get();
  }

  /** A host call of this run reached Java (the sink): checked when the run ends. */
  void issued(HostCall call) {
    // Calls are mostly answered in order: dropping the answered ones at the head keeps the queue (and
    // the inputs it holds) short in a run that makes many calls.
    for (HostCall head = issued.peek(); head != null && head.answered(); head = issued.peek()) {
      issued.poll();
    }
    issued.add(call);
  }

  /**
   * Calls of this run that Java never answered: the native wait's backstop gave them up. Called once the
   * execution returned; each is marked answered so nothing answers it later.
   */
  List<HostCall> givenUpNatively() {
    List<HostCall> unanswered = issued.stream().filter(c -> !c.answered()).toList();
    unanswered.forEach(c -> c.fail(ErrorCode.DEADLINE_EXCEEDED, "the native wait's backstop gave up on it"));
    issued.clear();
    return unanswered;
  }

  /**
   * Claims the run's slot for a call that goes straight to the callback threads: true if no other such
   * call of this run is in flight (callbacks of one run run one at a time).
   */
  boolean claimDirectCall(DirectCall call) {
    return directCall.compareAndSet(null, call);
  }

  /** The run's direct call in flight, or null. */
  DirectCall directCall() {
    return directCall.get();
  }

  /** The direct call whose function runs {@code execution} is done with: the next call may go straight. */
  void directCallDone(CallbackExecution execution) {
    DirectCall current = directCall.get();
    if (current != null && current.execution() == execution) {
      directCall.compareAndSet(current, null);
    }
  }

  /** True the first time {@code call} is reported overdue (the watchdog tells the supervisor once). */
  boolean reportOverdue(DirectCall call) {
    return reportedOverdue.getAndSet(call) != call;
  }

  /** Attaches the native context once it exists; cancels it at once if the run was already aborted. */
  void attach(RunContext runContext) {
    this.context = runContext;
    if (abortCause.get() != null) {
      cancelNative();
    }
  }

  /** Decides the outcome if there is none yet (and counts the run once); true if this call decided it. */
  private boolean decide(T outputs, RuntimeException failure) {
    if (!decided.compareAndSet(false, true)) {
      return false;
    }
    // Counted before the result completes: whoever waits on it may read the metrics at once.
    boolean timedOut = failure instanceof XlaException x && x.code() == ErrorCode.DEADLINE_EXCEEDED;
    metrics.recordRun(System.nanoTime() - startNanos, failure != null, timedOut);
    if (failure == null) {
      result.complete(outputs);
    } else {
      result.completeExceptionally(failure);
    }
    return true;
  }

  private RuntimeException outcomeException() {
    Throwable t = result.handle((ok, e) -> e).join();
    return t instanceof RuntimeException r ? r : new XlaException(ErrorCode.INTERNAL, "run failed: " + t, t);
  }

  private void cancelNative() {
    RunContext c = context;
    if (c != null) {
      try {
        c.cancel();
      } catch (IllegalStateException alreadyClosed) {
        // the run already ended: nothing left to cancel
      }
    }
  }
}
