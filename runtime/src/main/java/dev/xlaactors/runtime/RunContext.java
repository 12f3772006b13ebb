package dev.xlaactors.runtime;

import static dev.xlaactors.nativebridge.pjrt.global.Pjrt.*;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.PluginException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.nativebridge.pjrt.PJRT_ExecuteContext;
import dev.xlaactors.nativebridge.pjrt.XlaActors_RunContext;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Function;
import java.util.function.Predicate;

/**
 * Per-run state handed to the bridge's XLA FFI handlers through a PJRT execute context, so nothing
 * run-specific is baked into a compiled program and one executable serves every run. Create one per
 * run, pass it to {@link Executable#execute(java.util.List, RunContext)}, close it after the run.
 * Thread-safe.
 */
public final class RunContext extends NativeHandle {
  static {
    NativeLibrary.load();
  }

  private final long runId;
  private final XlaActors_RunContext context;

  private RunContext(XlaActors_RunContext context, long runId, long sinkId) {
    super(null, () -> {
      XlaActors_RunContext_Destroy(context);
      if (sinkId != 0) {
        HostCallBridge.unregister(sinkId);
      }
    });
    this.runId = runId;
    this.context = context;
  }

  /**
   * A context for run {@code runId}. {@code scaleAddFactor} is the per-run factor of the bridge's
   * diagnostic handler {@code xla_actors.scale_add} ({@code out = in * factor + addend}), which proves
   * that per-run data reaches FFI handlers.
   */
  public static RunContext create(Plugin plugin, long runId, float scaleAddFactor) {
    return create(plugin, runId, scaleAddFactor, 0);
  }

  /**
   * A context for run {@code runId} whose host calls go to {@code sink}. Each call's XLA thread waits at
   * most {@code nativeBackstop} for an answer and then fails the call itself: a last line of defence
   * behind the caller's own timeouts, so no run can hang.
   */
  public static RunContext withHostCalls(Plugin plugin, long runId, HostCallSink sink, Duration nativeBackstop) {
    Objects.requireNonNull(nativeBackstop, "nativeBackstop");
    return withHostCalls(plugin, runId, sink, name -> nativeBackstop);
  }

  /**
   * As {@link #withHostCalls(Plugin, long, HostCallSink, Duration)}, with a backstop per call: a call to
   * the callback named {@code n} waits natively at most {@code backstopByCallback.apply(n)}, asked on the
   * XLA thread just before the call reaches {@code sink}. When it fires, the run fails with an error that
   * names the callback and the backstop, and the call stays unanswered ({@link HostCall#answered()}).
   */
  public static RunContext withHostCalls(
      Plugin plugin, long runId, HostCallSink sink, Function<String, Duration> backstopByCallback) {
    return withHostCalls(plugin, runId, sink, backstopByCallback, name -> false);
  }

  /**
   * As {@link #withHostCalls(Plugin, long, HostCallSink, Function)}; the inputs of a call to a callback
   * named {@code n} for which {@code borrowsInputs.test(n)} are XLA's own buffers, lent for the call
   * ({@link HostTensor#isBorrowed()}), not copies.
   */
  public static RunContext withHostCalls(Plugin plugin, long runId, HostCallSink sink,
      Function<String, Duration> backstopByCallback, Predicate<String> borrowsInputs) {
    Objects.requireNonNull(sink, "sink");
    Objects.requireNonNull(backstopByCallback, "backstopByCallback");
    Objects.requireNonNull(borrowsInputs, "borrowsInputs");
    long sinkId = HostCallBridge.register(
        sink, name -> Math.max(1, backstopByCallback.apply(name).toMillis()), borrowsInputs);
    try {
      return create(plugin, runId, 1f, sinkId);
    } catch (RuntimeException e) {
      HostCallBridge.unregister(sinkId);
      throw e;
    }
  }

  private static RunContext create(Plugin plugin, long runId, float scaleAddFactor, long sinkId) {
    if (!plugin.hasFfiHandlers()) {
      throw new PluginException(
          ErrorCode.UNIMPLEMENTED,
          plugin + " cannot run FFI handlers, so per-run data cannot reach them: " + plugin.ffiUnavailableReason());
    }
    byte[] error = new byte[1024];
    XlaActors_RunContext context =
        XlaActors_RunContext_Create(plugin.api().api, runId, scaleAddFactor, sinkId, error, error.length);
    if (context == null) {
      int n = 0;
      while (n < error.length && error[n] != 0) {
        n++;
      }
      throw new XlaException(ErrorCode.INTERNAL, new String(error, 0, n, StandardCharsets.UTF_8));
    }
    return new RunContext(context, runId, sinkId);
  }

  /**
   * Cancels the run's future host calls: each fails at once with a cancellation error, which aborts the
   * run. Calls already waiting are answered by whoever holds them.
   */
  public void cancel() {
    try (Lease lease = lease()) {
      XlaActors_RunContext_Cancel(context);
    }
  }

  public long runId() {
    return runId;
  }

  PJRT_ExecuteContext executeContext() {
    return XlaActors_RunContext_ExecuteContext(context);
  }

  NativeHandle.Lease leaseContext() {
    return lease();
  }
}
