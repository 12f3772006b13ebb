package dev.xlaactors.actors;

import java.util.concurrent.Executor;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The threads of one {@link CallbackRuntime} that run callback functions ({@code
 * xla-actors.actors.callbacks.threads} of them). A function whose call was given up (it timed out, or its
 * run was aborted) is interrupted; while it still runs its thread is <em>stuck</em>, and the pool starts a
 * replacement (up to {@code callbacks.max-stuck-threads}), so hung functions cannot stop the callbacks of
 * other runs. Thread-safe.
 */
final class CallbackThreads implements Executor, AutoCloseable {
  private final int threads;
  private final int maxStuck;
  private final ThreadPoolExecutor pool;
  private final AtomicInteger stuck = new AtomicInteger();

  CallbackThreads(String name, int threads, int maxStuck) {
    this(name, threads, maxStuck, java.time.Duration.ZERO);
  }

  /** As above; an idle thread spins {@code spin} for the next call before it parks. */
  CallbackThreads(String name, int threads, int maxStuck, java.time.Duration spin) {
    this.threads = threads;
    this.maxStuck = maxStuck;
    AtomicInteger numbers = new AtomicInteger();
    this.pool =
        new ThreadPoolExecutor(
            threads, threads, 60, TimeUnit.SECONDS, new SpinningQueue(spin.toNanos()),
            r -> {
              Thread t = new Thread(r, name + "-" + numbers.incrementAndGet());
              t.setDaemon(true);
              return t;
            });
  }

  @Override
  public void execute(Runnable task) {
    pool.execute(task);
  }

  /** Threads still running a function whose call was given up. */
  int stuck() {
    return stuck.get();
  }

  /** A thread became stuck (+1) or its function finally returned (-1): resize the pool to cover it. */
  synchronized void stuckChanged(int delta) {
    int size = threads + Math.min(maxStuck, Math.max(0, stuck.addAndGet(delta)));
    if (size > pool.getMaximumPoolSize()) {
      pool.setMaximumPoolSize(size);
      pool.setCorePoolSize(size); // starts a thread for the calls queued behind the stuck one
    } else if (size < pool.getCorePoolSize()) {
      pool.setCorePoolSize(size);
      pool.setMaximumPoolSize(size);
    }
  }

  /** Stops the threads; functions still running are interrupted. */
  @Override
  public void close() {
    pool.shutdownNow();
  }
}
