package dev.xlaactors.runtime;

import dev.xlaactors.nativebridge.PjrtNative;

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
