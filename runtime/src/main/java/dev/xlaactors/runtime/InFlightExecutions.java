package dev.xlaactors.runtime;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import java.util.List;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.function.Supplier;

/**
 * The executions of one client in flight on each of its devices, against the XLA CPU client's limit of
 * {@value #CPU_PER_DEVICE} per device: an execution past it waits inside the plugin ({@code
 * PjRtCpuExecutable::ExecuteHelper} takes a slot of the device's semaphore and holds it until the
 * execution ends). That wait is a deadlock when the executions holding the slots are themselves waiting
 * for it: a host callback that runs a program (a nested run) holds its caller's slot until the nested run
 * returns, so 32 levels of nesting, or 16 concurrent runs of depth 2 on device 0, stalled for good.
 *
 * <p>So, on a CPU client: a run on host inputs that names no device goes to device 0 while it has a free
 * slot, else to the device with the most free slots ({@link #reserve}); and a nested run (started from
 * inside a host call, see {@link #nested}) that finds its device full fails at once with a
 * RESOURCE_EXHAUSTED {@link XlaException} naming the limit, rather than waiting for a slot that its own
 * callers hold. A run that is not nested waits for a slot, as before. Other plugins are not limited here.
 * Thread-safe.
 */
public final class InFlightExecutions {
  /**
   * Executions the XLA CPU client runs at once per device (its per-device semaphore; seen in a stalled
   * process as 32 executions in host calls and the 33rd in {@code xla::Semaphore::ScopedAcquire}).
   */
  public static final int CPU_PER_DEVICE = 32;

  /** How many nested spans (host-call functions waiting in a run) the current thread is in. */
  private static final ThreadLocal<int[]> NESTING = ThreadLocal.withInitial(() -> new int[1]);

  /** The slot this thread reserved for its next execution ({@link #reserve}), until that execution takes it. */
  private static final ThreadLocal<Slot> RESERVED = new ThreadLocal<>();

  private final AtomicIntegerArray counts;
  private final int limit; // 0: not limited (not a CPU client)

  InFlightExecutions(int devices, String platformName) {
    this.counts = new AtomicIntegerArray(Math.max(1, devices));
    this.limit = "cpu".equalsIgnoreCase(platformName) ? CPU_PER_DEVICE : 0;
  }

  /**
   * Runs {@code body} as part of a host call of a run in flight: runs it starts are nested, and fail at
   * once instead of waiting when their device has no free slot. The runtime marks executions itself (a
   * host-call function that runs inline, on the XLA thread, is inside one); a callback layer that runs
   * host-call functions on threads of its own marks them with this.
   */
  public static <T> T nested(Supplier<T> body) {
    int[] depth = NESTING.get();
    depth[0]++;
    try {
      return body.get();
    } finally {
      depth[0]--;
    }
  }

  /** Whether the current thread is inside an execution or a {@link #nested} span. */
  public static boolean isNested() {
    return NESTING.get()[0] > 0;
  }

  /** Executions in flight on {@code device} now. */
  public int count(Device device) {
    return counts.get(device.index());
  }

  /** The most executions in flight per device that this client allows before a nested run fails (0: no limit). */
  public int limit() {
    return limit;
  }

  /**
   * Reserves a slot for a run that may go to any of {@code candidates} (the first is preferred): on the
   * preferred device while it has a free slot, else on the one with the fewest executions in flight that
   * has one. The device is chosen and its slot taken in one step, so concurrent runs cannot all pick the
   * same device's last slot. When every device is full a nested run is refused (as {@link #acquire}); any
   * other run takes the preferred device and waits there inside the plugin. The run's execution on this
   * thread takes the reservation over ({@link #acquire} on {@link Slot#device()}); close the slot after
   * the run (closing twice is harmless).
   */
  Slot reserve(List<Device> candidates, Supplier<String> program) {
    Device preferred = candidates.get(0);
    Device chosen = null;
    if (limit == 0 || tryTake(preferred)) {
      chosen = preferred;
      if (limit == 0) {
        counts.incrementAndGet(preferred.index());
      }
    } else {
      List<Device> byLoad = new java.util.ArrayList<>(candidates);
      byLoad.sort(java.util.Comparator.comparingInt(this::count));
      for (Device d : byLoad) {
        if (tryTake(d)) {
          chosen = d;
          break;
        }
      }
      if (chosen == null) {
        if (isNested()) {
          throw refusal(preferred, program);
        }
        counts.incrementAndGet(preferred.index());
        chosen = preferred;
      }
    }
    Slot slot = new Slot(chosen, false);
    RESERVED.set(slot);
    return slot;
  }

  /** Takes a slot on {@code device} if it has a free one. */
  private boolean tryTake(Device device) {
    int index = device.index();
    while (true) {
      int now = counts.get(index);
      if (now >= limit) {
        return false;
      }
      if (counts.compareAndSet(index, now, now + 1)) {
        return true;
      }
    }
  }

  /**
   * Takes a slot on {@code device} for one execution of {@code program} (named in the error); the
   * returned slot must be closed when the execution has ended. A slot this thread {@linkplain #reserve
   * reserved} on {@code device} is taken over; otherwise a nested execution past the limit is refused.
   */
  Slot acquire(Device device, Supplier<String> program) {
    Slot reserved = RESERVED.get();
    if (reserved != null) {
      RESERVED.remove();
      if (!reserved.closed && reserved.device.index() == device.index()) {
        reserved.executing = true;
        NESTING.get()[0]++;
        return reserved;
      }
    }
    int index = device.index();
    int now = counts.incrementAndGet(index);
    if (limit > 0 && now > limit && isNested()) {
      counts.decrementAndGet(index);
      throw refusal(device, program);
    }
    NESTING.get()[0]++;
    return new Slot(device, true);
  }

  private XlaException refusal(Device device, Supplier<String> program) {
    return new XlaException(ErrorCode.RESOURCE_EXHAUSTED,
        "nested run of '" + program.get() + "' refused: " + device + " already runs " + limit + " executions, the most"
            + " the XLA CPU client runs at once per device, and a nested run would wait for a slot that the runs"
            + " waiting on its callbacks hold (a deadlock); every level of callbacks that run programs holds one"
            + " slot until it returns: nest less deeply or run fewer nested runs at once (runs without device"
            + " arguments spread over the client's " + counts.length() + " devices; a client created with the"
            + " option cpu_device_count has more)");
  }

  /** One execution's slot (or a run's reservation of one); close it once, when the execution has ended. */
  final class Slot implements AutoCloseable {
    private final Device device;
    private boolean executing; // taken by an execution: it counts as a nesting level of this thread
    private boolean closed;

    private Slot(Device device, boolean executing) {
      this.device = device;
      this.executing = executing;
    }

    /** The device the slot is on. */
    Device device() {
      return device;
    }

    @Override
    public void close() {
      if (!closed) {
        closed = true;
        if (executing) {
          NESTING.get()[0]--;
        } else if (RESERVED.get() == this) {
          RESERVED.remove();
        }
        counts.decrementAndGet(device.index());
      }
    }
  }
}
