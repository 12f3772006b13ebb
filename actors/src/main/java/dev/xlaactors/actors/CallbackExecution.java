package dev.xlaactors.actors;

/**
 * One host call's function, as the callback threads run it and as its {@link RunSupervisor} sees it: the
 * two agree here, under one lock, on whether the function's answer still counts. A call given up before
 * its function starts is skipped; one given up while its function runs interrupts it (the thread counts
 * as stuck until the function returns); an answer that comes after the call was given up is dropped, so
 * it is neither counted nor seen by XLA.
 *
 * <p>An inline call's function runs on the thread that made the call (XLA's, or a segmented run's), which
 * is not ours to interrupt: giving it up only drops its answer when it returns.
 */
final class CallbackExecution {
  private enum State { QUEUED, RUNNING, RETURNED, ANSWERED, ABANDONED }

  private final CallbackThreads threads;
  private final boolean inline;
  private State state = State.QUEUED;
  private Thread runner;
  private boolean stuck;

  CallbackExecution(CallbackThreads threads) {
    this(threads, false);
  }

  CallbackExecution(CallbackThreads threads, boolean inline) {
    this.threads = threads;
    this.inline = inline;
  }

  /** On the callback thread, before the function: false if the call was given up (skip the function). */
  synchronized boolean begin() {
    if (state != State.QUEUED) {
      return false;
    }
    state = State.RUNNING;
    runner = Thread.currentThread();
    return true;
  }

  /** The function returned or threw: true if the call still waits for what it gave (not given up). */
  synchronized boolean returned() {
    if (state == State.RUNNING) {
      state = State.RETURNED;
      return true;
    }
    return false;
  }

  /** The function's outputs are good: true if they still count (the call is the function's to complete). */
  synchronized boolean claimAnswer() {
    if (state == State.RETURNED) {
      state = State.ANSWERED;
      return true;
    }
    return false;
  }

  /** On the callback thread, after the function (whatever happened): frees the thread for the next call. */
  synchronized void end() {
    returned();
    runner = null;
    Thread.interrupted(); // an interrupt meant for this call must not reach the next one
    if (stuck) {
      stuck = false;
      threads.stuckChanged(-1);
    }
  }

  /**
   * The supervisor gives the call up: true if its answer had not been claimed (the supervisor fails and
   * counts the call), false if the function's answer already won.
   */
  synchronized boolean abandon() {
    switch (state) {
      case ANSWERED, ABANDONED -> {
        return false;
      }
      case RUNNING -> {
        if (!inline) {
          runner.interrupt();
          stuck = true;
          threads.stuckChanged(+1);
        }
      }
      default -> {}
    }
    state = State.ABANDONED;
    return true;
  }
}
