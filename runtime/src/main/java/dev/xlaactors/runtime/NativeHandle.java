package dev.xlaactors.runtime;

import java.lang.ref.Cleaner;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Base of every Java object that owns a native PJRT object.
 *
 * <p>Lifetime: a handle is reference counted. Its owner holds one reference, released by {@link
 * #close()}; every native call holds another for its duration ({@link #lease()}), and every child (a
 * buffer of a client, an executable of a client) holds one on its parent. The native object is destroyed
 * when the count reaches zero, so closing a client while a buffer or a call on another thread still uses
 * it is safe: the destruction waits for them. A handle that is never closed is released by a {@link
 * Cleaner} once it is unreachable, so forgetting {@code close()} leaks nothing for long; closing
 * explicitly frees native memory at once and is still the rule.
 *
 * <p>Thread-safety: {@code close()} is idempotent and may race with other calls; a call that starts after
 * {@code close()} throws {@link IllegalStateException} and never reaches native code.
 */
public abstract class NativeHandle implements AutoCloseable {
  private static final Cleaner CLEANER = Cleaner.create();

  /**
   * Destroys a native object; built from native pointers only, never from the handle object itself (a
   * cleaning action that referred to its handle would keep it reachable forever).
   */
  @FunctionalInterface
  protected interface Destroyer {
    void destroy();
  }

  /** The counted state; shared with the cleaner, so it holds no reference to the handle. */
  private static final class State implements Runnable {
    private final AtomicInteger references = new AtomicInteger(1);
    private final AtomicBoolean closed = new AtomicBoolean();
    private final Destroyer destroyer;
    private final State parent;

    State(Destroyer destroyer, State parent) {
      this.destroyer = destroyer;
      this.parent = parent;
    }

    /** The owner's release: run by close() or by the cleaner, at most once. */
    @Override
    public void run() {
      if (closed.compareAndSet(false, true)) {
        release();
      }
    }

    boolean retain() {
      while (true) {
        int n = references.get();
        if (n == 0) {
          return false;
        }
        if (references.compareAndSet(n, n + 1)) {
          return true;
        }
      }
    }

    void release() {
      if (references.decrementAndGet() == 0) {
        try {
          destroyer.destroy();
        } finally {
          if (parent != null) {
            parent.release();
          }
        }
      }
    }
  }

  private final State state;
  private final Cleaner.Cleanable cleanable;

  /** Takes ownership of the native object {@code destroyer} frees; keeps {@code parent} (may be null) alive. */
  protected NativeHandle(NativeHandle parent, Destroyer destroyer) {
    if (parent != null && !parent.state.retain()) {
      // Unreachable when the caller holds a lease on the parent, as every creator does: the parent's
      // native object is gone, so destroying this child now would touch freed memory.
      throw parent.closedError();
    }
    this.state = new State(destroyer, parent == null ? null : parent.state);
    this.cleanable = CLEANER.register(this, state);
  }

  /** Whether {@link #close()} was called. */
  public final boolean isClosed() {
    return state.closed.get();
  }

  /** Whether the native object has been destroyed (its last reference released); for tests. */
  final boolean nativeDestroyed() {
    return state.references.get() == 0;
  }

  /** Releases the owner's reference. Safe to call any number of times from any thread. */
  @Override
  public final void close() {
    if (!state.closed.get()) {
      onClose();
    }
    cleanable.clean();
  }

  /** Called by {@link #close()} before the owner's reference is released (may run more than once). */
  protected void onClose() {}

  /** A reference held for the duration of one native call; use with try-with-resources. */
  protected final Lease lease() {
    if (state.closed.get() || !state.retain()) {
      throw closedError();
    }
    return new Lease();
  }

  /** Throws {@link IllegalStateException} if closed. */
  protected final void checkOpen() {
    if (state.closed.get()) {
      throw closedError();
    }
  }

  /**
   * The error a use after {@link #close()} throws; a subclass may say more (why it was closed, what to use
   * instead). Never touches native code.
   */
  protected RuntimeException closedError() {
    return new IllegalStateException(getClass().getSimpleName() + " is closed");
  }

  /**
   * One in-flight use of the handle: the native object lives at least until this lease is closed. A lease
   * belongs to the thread that took it (try-with-resources); closing it twice releases once.
   */
  protected final class Lease implements AutoCloseable {
    private boolean released;

    private Lease() {}

    @Override
    public void close() {
      if (!released) {
        released = true;
        state.release();
      }
    }
  }
}
