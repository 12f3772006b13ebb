package dev.xlaactors.runtime;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Host-callback inputs that became unreachable without being closed: each callback that leaves them is
 * named in one warning per process. Such an input still gives its pooled memory back (the cleaner), but
 * only once the garbage collector has found it, which the pool forces when lent memory piles up (see
 * {@link HostMemoryPool}): a callback that never closes its inputs costs collections and memory. Thread-safe.
 */
final class UnclosedInputs {
  private static final Logger LOG = LoggerFactory.getLogger(UnclosedInputs.class);
  private static final Set<String> WARNED = ConcurrentHashMap.newKeySet();

  private UnclosedInputs() {}

  /** An input of {@code callback} holding a {@code blockBytes}-byte block was collected without close(). */
  static void warnOnce(String callback, long blockBytes) {
    if (WARNED.add(callback)) {
      LOG.warn("host callback '{}' does not close its inputs: an input's pooled memory ({} bytes) came back only"
          + " when the garbage collector found the input unreachable, and until then such inputs hold memory the"
          + " pool cannot reuse; close each input when done with it (HostTensor.close), or register the callback"
          + " with borrowed inputs (CallbackOptions.borrowedInputs) (warned once per callback)", callback, blockBytes);
    }
  }

  /** Whether {@code callback} was warned about (for tests). */
  static boolean warned(String callback) {
    return WARNED.contains(callback);
  }
}
