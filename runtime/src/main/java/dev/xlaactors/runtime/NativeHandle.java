package dev.xlaactors.runtime;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Base of every Java object that owns a native PJRT object.
 *
 * <p>Lifetime: a handle is reference counted. Its owner holds one reference, released by {@link
 * #close()}; every native call holds another for its duration ({@link #lease()}), and every child
 * (a buffer of a client, an executable of a client) holds one on its parent. The native object is
 * destroyed when the count reaches zero, so closing a client while a buffer or a call on another
 * thread still uses it is safe: the destruction waits for them.
 *
 * <p>Thread-safety: {@code close()} is idempotent and may race with other calls; a call that starts
 * after {@code close()} throws {@link IllegalStateException} and never reaches native code.
 */
public abstract class NativeHandle implements AutoCloseable {
  private final long handle;
  private final NativeHandle parent;
  private final AtomicInteger references = new AtomicInteger(1);
  private final AtomicBoolean closed = new AtomicBoolean();

  /** Takes ownership of {@code handle}; keeps {@code parent} (may be null) alive until destroyed. */
  protected NativeHandle(long handle, NativeHandle parent) {
    if (handle == 0) {
      throw new IllegalArgumentException("null native handle");
    }
    if (parent != null) {
      parent.retain();
    }
    this.handle = handle;
    this.parent = parent;
  }

  /** Destroys the native object. Called exactly once, when the last reference is released. */
  protected abstract void destroy(long handle);

  /** The raw pointer, for a view that shares its parent's native object (see {@link Executable}). */
  final long rawHandle() {
    return handle;
  }

  /** Whether {@link #close()} was called. */
  public final boolean isClosed() {
    return closed.get();
  }

  /** Releases the owner's reference. Safe to call any number of times from any thread. */
  @Override
  public final void close() {
    if (closed.compareAndSet(false, true)) {
      try {
        onClose();
      } finally {
        release();
      }
    }
  }

  /** Called once by the first {@link #close()}, before the owner's reference is released. */
  protected void onClose() {}

  /** A reference held for the duration of one native call; use with try-with-resources. */
  protected final Lease lease() {
    if (closed.get()) {
      throw closedError();
    }
    retain();
    return new Lease();
  }

  /** Throws {@link IllegalStateException} if closed. */
  protected final void checkOpen() {
    if (closed.get()) {
      throw closedError();
    }
  }

  private IllegalStateException closedError() {
    return new IllegalStateException(getClass().getSimpleName() + " is closed");
  }

  private void retain() {
    while (true) {
      int n = references.get();
      if (n == 0) {
        throw closedError();
      }
      if (references.compareAndSet(n, n + 1)) {
        return;
      }
    }
  }

  private void release() {
    if (references.decrementAndGet() == 0) {
      try {
        destroy(handle);
      } finally {
        if (parent != null) {
          parent.release();
        }
      }
    }
  }

  /** One in-flight use of the handle; exposes the raw pointer only while held. */
  protected final class Lease implements AutoCloseable {
    private final AtomicBoolean released = new AtomicBoolean();

    private Lease() {}

    /** The native pointer, valid until this lease is closed. */
    public long handle() {
      return handle;
    }

    @Override
    public void close() {
      if (released.compareAndSet(false, true)) {
        release();
      }
    }
  }
}
