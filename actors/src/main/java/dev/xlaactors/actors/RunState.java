package dev.xlaactors.actors;

import dev.xlaactors.error.CallbackException;
import dev.xlaactors.runtime.RunContext;
import java.util.concurrent.atomic.AtomicReference;

/**
 * What a run's executing thread and its {@link RunSupervisor} share: why the run was aborted (the first
 * cause wins) and the native run context to cancel. Thread-safe.
 */
final class RunState {
  private final AtomicReference<CallbackException> abortCause = new AtomicReference<>();
  private volatile RunContext context;

  /** Records the abort cause; true if it is the first. Cancels the native run either way. */
  boolean recordAbort(CallbackException cause) {
    boolean first = abortCause.compareAndSet(null, cause);
    cancelNative();
    return first;
  }

  /** Why the run was aborted, or null. */
  CallbackException abortCause() {
    return abortCause.get();
  }

  /** Attaches the native context once it exists; cancels it at once if the run was already aborted. */
  void attach(RunContext runContext) {
    this.context = runContext;
    if (abortCause.get() != null) {
      cancelNative();
    }
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
