package dev.xlaactors.runtime;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.nativebridge.PjrtNative;
import java.nio.ByteBuffer;

/**
 * A tensor held by a device (for the CPU plugin, memory owned by XLA). Created by {@link
 * XlaClient#upload} or returned by {@link Executable#execute}; the caller owns it and closes it. It
 * keeps its client alive. Thread-safe; reading it while another thread closes it is either completed
 * or refused with {@link IllegalStateException}, never a crash.
 */
public final class DeviceBuffer extends NativeHandle {
  private final XlaClient client;
  private final TensorType type;

  DeviceBuffer(XlaClient client, long handle, TensorType type) {
    super(handle, client);
    this.client = client;
    this.type = type;
  }

  public TensorType type() {
    return type;
  }

  public XlaClient client() {
    return client;
  }

  /** Copies the buffer into a new host tensor. */
  public HostTensor toHost() {
    HostTensor tensor = HostTensor.zeros(type);
    try (Lease lease = lease()) {
      PjrtNative.bufferToHost(lease.handle(), tensor.nativeData(), 0);
    }
    return tensor;
  }

  /**
   * Copies the buffer into {@code destination}, a direct buffer with exactly {@code type().byteSize()}
   * bytes remaining (written little-endian, row-major, from its position; the position is not moved).
   * Lets callers that download often reuse one host buffer: a fresh direct buffer per download costs
   * more than the copy itself for large tensors (the new pages must be faulted in and zeroed).
   */
  public void copyTo(ByteBuffer destination) {
    if (!destination.isDirect() || destination.isReadOnly() || destination.remaining() != type.byteSize()) {
      throw new InvalidArgumentException(
          "copyTo needs a writable direct buffer with " + type.byteSize() + " bytes remaining for " + type
              + ", got " + (destination.isDirect() ? "" : "a non-direct buffer with ") + destination.remaining()
              + " bytes remaining" + (destination.isReadOnly() ? " (read-only)" : ""));
    }
    try (Lease lease = lease()) {
      // The native side writes from the buffer's start; slice so the position is respected.
      PjrtNative.bufferToHost(lease.handle(), destination.slice(), 0);
    }
  }

  NativeHandle.Lease leaseBuffer() {
    return lease();
  }

  @Override
  protected void destroy(long handle) {
    PjrtNative.bufferDestroy(handle);
  }

  @Override
  public String toString() {
    return "DeviceBuffer(" + type + (isClosed() ? ", closed)" : ")");
  }
}
