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

/**
 * What a run's executing thread and its {@link RunSupervisor} share. The run's outcome is decided once,
 * by whichever comes first: the execution returning (success or failure) or the supervisor aborting it
 * (cancel, a timeout, a failed callback). An aborted run never reports success, even if XLA finishes
 * afterwards, and its caller learns of the abort at once through {@link #result()}. Thread-safe.
 *
 * @param <T> what a successful run gives (host tensors, or device buffers the caller will own)
 */
final class RunState<T> {
  private final CompletableFuture<T> result = new CompletableFuture<>();
  private final java.util.function.Consumer<? super T> discard;
  private final AtomicBoolean decided = new AtomicBoolean();
  private final AtomicReference<CallbackException> abortCause = new AtomicReference<>();
  private final Queue<HostCall> issued = new ConcurrentLinkedQueue<>();
  private final AtomicReference<DirectCall> directCall = new AtomicReference<>();
  private final AtomicReference<DirectCall> reportedOverdue = new AtomicReference<>();
  private final RuntimeMetrics metrics;
  private volatile long startNanos = System.nanoTime();
  private volatile RunContext context;

  RunState(RuntimeMetrics metrics) {
    this(metrics, outputs -> {});
  }

  /** {@code discard} frees the outputs of an execution that returned after the run was aborted. */
  RunState(RuntimeMetrics metrics, java.util.function.Consumer<? super T> discard) {
    this.metrics = metrics;
    this.discard = discard;
  }

  /** The run's outcome: its outputs, or the exception it ended with (the abort cause when aborted). */
  CompletableFuture<T> result() {
    return result;
  }

  /** The execution begins now (a queued run's time starts here, not when it was queued). */
  void executing() {
    startNanos = System.nanoTime();
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
