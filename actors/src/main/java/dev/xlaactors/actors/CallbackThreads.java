package dev.xlaactors.actors;

import dev.xlaactors.runtime.InFlightExecutions;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * The threads of one {@link CallbackRuntime} that run callback functions ({@code
 * xla-actors.actors.callbacks.threads} of them).
 *
 * <p>Built for the latency of a call that follows the last within microseconds, as in a program making
 * callbacks in a loop: a thread that finds no work spins for {@code callbacks.spin} before it parks, and
 * a new call wakes a parked thread only when none is spinning, so the common case pays no thread
 * wake-up (which costs 2-60 us on a virtual machine). A thread that takes a call while more wait wakes
 * another, so calls of different runs still run in parallel.
 *
 * <p>A function whose call was given up (it timed out, or its run was aborted) is interrupted; while it
 * still runs its thread is <em>stuck</em>, and a new thread takes its place (up to {@code
 * callbacks.max-stuck-threads}), so hung functions cannot stop the callbacks of other runs. Thread-safe.
 */
final class CallbackThreads implements Executor, AutoCloseable {
  /** How long a spin only pauses before it starts yielding the core between checks. */
  private static final long PURE_SPIN_NANOS = 5_000;

  private final String name;
  private final int threads;
  private final int maxStuck;
  private final long spinNanos;
  private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
  private final ConcurrentLinkedDeque<Thread> parked = new ConcurrentLinkedDeque<>();
  private final Set<Thread> live = ConcurrentHashMap.newKeySet();
  private final AtomicInteger spinning = new AtomicInteger();
  private final AtomicInteger stuck = new AtomicInteger();
  private final AtomicInteger blocked = new AtomicInteger();
  private final AtomicInteger workers = new AtomicInteger();
  private final AtomicInteger numbers = new AtomicInteger();
  private volatile boolean closed;

  CallbackThreads(String name, int threads, int maxStuck) {
    this(name, threads, maxStuck, Duration.ZERO);
  }

  /** As above; an idle thread spins {@code spin} for the next call before it parks. */
  CallbackThreads(String name, int threads, int maxStuck, Duration spin) {
    this.name = name;
    this.threads = threads;
    this.maxStuck = maxStuck;
    this.spinNanos = spin.toNanos();
    for (int i = 0; i < threads; i++) {
      startWorker();
    }
  }

  @Override
  public void execute(Runnable task) {
    if (closed) {
      throw new RejectedExecutionException(name + " is closed");
    }
    tasks.offer(task);
    if (spinning.get() == 0) {
      wakeOne();
    }
  }

  /**
   * Runs {@code body} on this thread. When this thread is one of these threads (a callback that runs a
   * program, whose own callbacks need threads of this pool), another thread takes its place until {@code
   * body} returns, so nested runs never wait for the thread their caller holds: nesting does not consume the
   * bounded pool, at the cost of one thread per level in progress.
   */
  <T> T whileWaiting(java.util.function.Supplier<T> body) {
    if (!live.contains(Thread.currentThread())) {
      return body.get();
    }
    int nowBlocked = blocked.incrementAndGet();
    if (workers.get() - stuck.get() - nowBlocked < threads && !closed) {
      startWorker();
    }
    try {
      // A nested run: where its device has no free execution slot, it fails rather than wait for the
      // slots its callers hold (InFlightExecutions).
      return InFlightExecutions.nested(body);
    } finally {
      blocked.decrementAndGet(); // the surplus thread retires when it next looks for work
    }
  }

  /** Threads still running a function whose call was given up. */
  int stuck() {
    return stuck.get();
  }

  /** A thread became stuck (+1) or its function finally returned (-1): start a replacement if needed. */
  void stuckChanged(int delta) {
    int nowStuck = stuck.addAndGet(delta);
    if (delta > 0 && nowStuck <= maxStuck && workers.get() - nowStuck - blocked.get() < threads) {
      startWorker();
    }
  }

  private void wakeOne() {
    Thread t = parked.pollFirst();
    if (t != null) {
      LockSupport.unpark(t);
    }
  }

  private void startWorker() {
    workers.incrementAndGet();
    Thread t = new Thread(this::work, name + "-" + numbers.incrementAndGet());
    t.setDaemon(true);
    live.add(t);
    t.start();
  }

  private void work() {
    Thread self = Thread.currentThread();
    try {
      while (!closed) {
        if (retire()) {
          if (!tasks.isEmpty()) {
            wakeOne(); // a wake-up that reached this thread was meant for a call: pass it on
          }
          return;
        }
        Runnable task = next(self);
        if (task == null) {
          continue;
        }
        if (!tasks.isEmpty() && spinning.get() == 0) {
          wakeOne(); // more calls wait: another thread takes the next one
        }
        try {
          task.run();
        } catch (Throwable t) {
          // a task reports its own failures; nothing may kill the thread
        }
        Thread.interrupted(); // an interrupt meant for the last call must not reach the next one
      }
    } finally {
      live.remove(self);
    }
  }

  /** The next task: polled, then spun for, then parked for; null to look again (woken, or closing). */
  private Runnable next(Thread self) {
    Runnable task = tasks.poll();
    if (task != null) {
      return task;
    }
    if (spinNanos > 0) {
      spinning.incrementAndGet();
      try {
        long start = System.nanoTime();
        long until = start + spinNanos;
        long now;
        while ((task = tasks.poll()) == null && (now = System.nanoTime()) - until < 0 && !closed) {
          if (now - start < PURE_SPIN_NANOS) {
            Thread.onSpinWait();
          } else {
            // Then yield: on a busy machine the XLA thread that will make the next call may share
            // this core, and it runs now rather than after this thread's time slice.
            Thread.yield();
          }
        }
      } finally {
        spinning.decrementAndGet();
      }
      if (task != null) {
        return task;
      }
    }
    parked.addFirst(self); // most recently active first: its caches are warm
    task = tasks.poll(); // a call offered before we were listed as parked
    if (task == null && !closed) {
      LockSupport.park(this);
      // Woken for a call: take it now. Going back to the loop first let a surplus thread (a replacement whose
      // stuck or waiting thread came back) retire with the wake-up meant for the call, which then stayed queued
      // while the other threads slept.
      task = tasks.poll();
    }
    parked.remove(self);
    return task;
  }

  /** A surplus thread (a replaced stuck or waiting one that came back) leaves; true if this one should. */
  private boolean retire() {
    int w = workers.get();
    return w - stuck.get() - blocked.get() > threads && workers.compareAndSet(w, w - 1);
  }

  /** Stops the threads; functions still running are interrupted. */
  @Override
  public void close() {
    closed = true;
    for (Thread t : live) {
      t.interrupt();
      LockSupport.unpark(t);
    }
  }
}
