package dev.xlaactors.actors;

import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * The callback threads' task queue: a thread that finds it empty spins for a short while (HOCON {@code
 * callbacks.spin}) before it parks, so a call that arrives within microseconds of the last one, as in a
 * program making callbacks in a loop, does not pay a thread wake-up. A plain blocking queue, not a
 * transfer queue: a transfer queue hands a new task to a thread already parked in {@code take} (which
 * must then be woken) even while another thread spins for it.
 */
final class SpinningQueue extends LinkedBlockingQueue<Runnable> {
  private final long spinNanos;

  SpinningQueue(long spinNanos) {
    this.spinNanos = spinNanos;
  }

  private Runnable spinPoll() {
    if (spinNanos <= 0) {
      return poll();
    }
    long until = System.nanoTime() + spinNanos;
    Runnable task;
    while ((task = poll()) == null && System.nanoTime() < until) {
      Thread.onSpinWait();
    }
    return task;
  }

  @Override
  public Runnable take() throws InterruptedException {
    Runnable task = spinPoll();
    return task != null ? task : super.take();
  }

  @Override
  public Runnable poll(long timeout, TimeUnit unit) throws InterruptedException {
    Runnable task = spinPoll();
    return task != null ? task : super.poll(timeout, unit);
  }
}
