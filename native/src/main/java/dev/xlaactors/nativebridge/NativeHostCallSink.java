package dev.xlaactors.nativebridge;

import java.nio.ByteBuffer;

/**
 * Receives host calls from the bridge's {@code xla_actors.host_callback} FFI handler, on an XLA thread
 * that then blocks until the call is answered through {@link PjrtNative#completeHostCall} or {@link
 * PjrtNative#failHostCall}. Implementations must only hand the call on (e.g. tell an actor) and return
 * at once; an exception thrown here fails the call.
 */
public interface NativeHostCallSink {
  /**
   * @param runId the run the call belongs to
   * @param tag identifies the call in the answer
   * @param callback the {@code callback} attribute of the custom call
   * @param inputs copies of the inputs, little-endian, row-major; owned by Java
   * @param inputTypes PJRT buffer-type ordinals of the inputs
   * @param inputDims dimensions of the inputs
   * @param outputTypes PJRT buffer-type ordinals the program expects back
   * @param outputDims dimensions the program expects back
   * @return how long the native side waits for the answer, in milliseconds, before it fails the call
   *     itself (a backstop behind the actors' own timeouts)
   */
  long onHostCall(
      long runId,
      long tag,
      String callback,
      ByteBuffer[] inputs,
      int[] inputTypes,
      long[][] inputDims,
      int[] outputTypes,
      long[][] outputDims);
}
