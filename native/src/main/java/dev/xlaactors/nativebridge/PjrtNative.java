package dev.xlaactors.nativebridge;

import java.nio.ByteBuffer;

/**
 * The raw JNI binding of the C++ bridge over the PJRT C API. Handles are native pointers passed as
 * {@code long}; this class checks nothing, so only the idiomatic layer in {@code dev.xlaactors.runtime}
 * calls it, after validating every argument and ensuring each handle is open and its parents outlive it.
 *
 * <p>Every method that can fail throws a {@link dev.xlaactors.error.XlaException} subclass built by the
 * bridge; no C++ exception or PJRT error object ever crosses the boundary.
 */
public final class PjrtNative {
  static {
    BridgeLibrary.load();
  }

  private PjrtNative() {}

  // ---- plugin (loaded once, never unloaded) ----
  public static native long pluginLoad(String path);

  public static native int[] pluginApiVersion(long plugin);

  public static native boolean pluginHasFfiHandlers(long plugin);

  // ---- client ----
  public static native long clientCreate(long plugin, boolean asynchronous);

  public static native void clientDestroy(long client);

  public static native String clientPlatformName(long client);

  public static native int clientDeviceCount(long client);

  /** {@code {id, kind}} of the addressable device at {@code index}. */
  public static native String[] clientDeviceDescription(long client, int index);

  // ---- compile ----
  public static native long compile(long client, byte[] code, String format, byte[] compileOptions);

  /** Output element types as {@code PJRT_Buffer_Type} ordinals. */
  public static native int[] executableOutputTypes(long executable);

  public static native long[][] executableOutputDims(long executable);

  public static native void executableDestroy(long executable);

  // ---- buffers ----
  public static native long bufferFromHost(
      long client, int deviceIndex, ByteBuffer data, long byteOffset, long byteLength, int type, long[] dims);

  public static native void bufferToHost(long buffer, ByteBuffer data, long byteOffset);

  public static native void bufferDestroy(long buffer);

  // ---- execute ----
  /** A per-run execute context; {@code hostCallSink} may be null for runs without host callbacks. */
  public static native long executeContextCreate(
      long plugin, long runId, float scaleAddFactor, NativeHostCallSink hostCallSink);

  public static native void executeContextDestroy(long context);

  /** Makes the run's later host calls fail at once with a cancellation error. */
  public static native void executeContextCancel(long context);

  // ---- host callbacks ----
  /**
   * Copies {@code outputs} (direct buffers, one per result, exactly sized) into the waiting host call's
   * result buffers and wakes it. False when the call is no longer waiting; then nothing is written.
   */
  public static native boolean completeHostCall(long tag, ByteBuffer[] outputs);

  /** Fails the waiting host call with an absl status code and message; false when it is not waiting. */
  public static native boolean failHostCall(long tag, int statusCode, String message);

  /** Host calls currently waiting for a reply, across all runs. */
  public static native int pendingHostCallCount();

  /** Runs on the first addressable device, waits for completion and returns the output buffers. */
  public static native long[] execute(long executable, long[] arguments, long context);
}
