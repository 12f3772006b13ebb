package dev.xlaactors.runtime;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.PluginException;
import dev.xlaactors.nativebridge.NativeHostCallSink;
import dev.xlaactors.nativebridge.PjrtNative;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Per-run state handed to the bridge's XLA FFI handlers through a PJRT execute context, so nothing
 * run-specific is baked into a compiled program and one executable serves every run. Create one per
 * run, pass it to {@link Executable#execute(java.util.List, RunContext)}, close it after the run.
 * Thread-safe.
 */
public final class RunContext extends NativeHandle {
  private final long runId;

  private RunContext(long handle, long runId) {
    super(handle, null);
    this.runId = runId;
  }

  /**
   * A context for run {@code runId}. {@code scaleAddFactor} is the per-run factor of the bridge's
   * diagnostic handler {@code xla_actors.scale_add} ({@code out = in * factor + addend}), which proves
   * that per-run data reaches FFI handlers.
   */
  public static RunContext create(Plugin plugin, long runId, float scaleAddFactor) {
    checkFfi(plugin);
    return new RunContext(PjrtNative.executeContextCreate(plugin.handle(), runId, scaleAddFactor, null), runId);
  }

  /**
   * A context for run {@code runId} whose host calls go to {@code sink}. Each call's XLA thread waits at
   * most {@code nativeBackstop} for an answer and then fails the call itself: a last line of defence
   * behind the caller's own timeouts, so no run can hang.
   */
  public static RunContext withHostCalls(Plugin plugin, long runId, HostCallSink sink, Duration nativeBackstop) {
    checkFfi(plugin);
    long backstopMillis = Math.max(1, nativeBackstop.toMillis());
    NativeHostCallSink bridge =
        (id, tag, callback, inputs, inputTypes, inputDims, outputTypes, outputDims) -> {
          List<HostTensor> in = new ArrayList<>(inputs.length);
          for (int i = 0; i < inputs.length; i++) {
            TensorType type = new TensorType(DType.fromPjrtType(inputTypes[i]), Shape.of(inputDims[i]));
            in.add(HostTensor.of(type, inputs[i].order(ByteOrder.LITTLE_ENDIAN)));
          }
          List<TensorType> out = new ArrayList<>(outputTypes.length);
          for (int i = 0; i < outputTypes.length; i++) {
            out.add(new TensorType(DType.fromPjrtType(outputTypes[i]), Shape.of(outputDims[i])));
          }
          sink.accept(new HostCall(id, tag, callback, in, out));
          return backstopMillis;
        };
    return new RunContext(PjrtNative.executeContextCreate(plugin.handle(), runId, 1f, bridge), runId);
  }

  private static void checkFfi(Plugin plugin) {
    if (!plugin.hasFfiHandlers()) {
      throw new PluginException(
          ErrorCode.UNIMPLEMENTED, plugin + " has no FFI extension with handler registration");
    }
  }

  /**
   * Cancels the run's future host calls: each fails at once with a cancellation error, which aborts the
   * run. Calls already waiting are answered by whoever holds them.
   */
  public void cancel() {
    try (Lease lease = lease()) {
      PjrtNative.executeContextCancel(lease.handle());
    }
  }

  public long runId() {
    return runId;
  }

  NativeHandle.Lease leaseContext() {
    return lease();
  }

  @Override
  protected void destroy(long handle) {
    PjrtNative.executeContextDestroy(handle);
  }
}
