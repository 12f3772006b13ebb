package dev.xlaactors.runtime;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.PluginException;
import dev.xlaactors.nativebridge.PjrtNative;

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
    if (!plugin.hasFfiHandlers()) {
      throw new PluginException(
          ErrorCode.UNIMPLEMENTED, plugin + " has no FFI extension with handler registration");
    }
    return new RunContext(PjrtNative.executeContextCreate(plugin.handle(), runId, scaleAddFactor), runId);
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
