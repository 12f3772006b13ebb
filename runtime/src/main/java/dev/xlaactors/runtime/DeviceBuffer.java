package dev.xlaactors.runtime;

import static dev.xlaactors.nativebridge.pjrt.global.Pjrt.*;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.nativebridge.pjrt.PJRT_Buffer;
import dev.xlaactors.nativebridge.pjrt.PJRT_Buffer_CopyToDevice_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Buffer_Device_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Buffer_Memory_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Buffer_ReadyEvent_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Buffer_ToHostBuffer_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Error;
import dev.xlaactors.nativebridge.pjrt.PJRT_Event;
import dev.xlaactors.nativebridge.pjrt.PJRT_Buffer_UnsafePointer_Args;
import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.bytedeco.javacpp.Pointer;

/**
 * A tensor held by a device (for the CPU plugin, memory owned by XLA). Created by {@link XlaClient#upload}
 * or returned by {@link Executable#execute}; the caller owns it and closes it. It keeps its client alive.
 * Thread-safe; reading it while another thread closes it is either completed or refused with {@link
 * IllegalStateException}, never a crash.
 *
 * <p>Sharing and donation: {@link #share()} gives another owner of the same device memory (a bound
 * model parameter is one), freed when every owner is closed. A buffer passed to a run as {@code
 * Argument.donated(buffer)} is given to that run (PJRT may reuse its memory for an output): it is closed
 * when the run starts, and any later use fails with an {@link XlaException} (FAILED_PRECONDITION) that
 * names the run it was donated to. A shared buffer cannot be donated.
 */
public final class DeviceBuffer extends NativeHandle {
  private final XlaClient client;
  private final PJRT_Buffer buffer;
  private final TensorType type;
  private volatile Device device; // known at creation, or read from PJRT on first use
  // Whether the bytes can be read in place (host memory, dense row-major): -1 unknown, 0 no, 1 yes.
  private volatile int hostReadable;
  // Where an executable's output shares that answer with the later outputs at the same position, which
  // have the same layout: null for other buffers.
  private final int[] readableByOutput;
  private final int outputIndex;
  // How many open handles own this native buffer (this one and its shares): donation needs exactly one.
  private final AtomicInteger owners;
  private final AtomicBoolean ownerReleased = new AtomicBoolean();
  // The run this buffer was donated to ("run 3 of model 'gpt'"), or null.
  private final AtomicReference<String> donatedTo = new AtomicReference<>();

  /** Takes ownership of {@code buffer}; the caller holds a lease on {@code client}. */
  DeviceBuffer(XlaClient client, PJRT_Buffer buffer, TensorType type) {
    this(client, buffer, type, null);
  }

  DeviceBuffer(XlaClient client, PJRT_Buffer buffer, TensorType type, Device device) {
    this(client, buffer, type, device, null, 0);
  }

  /** Output {@code outputIndex} of a run; {@code readableByOutput} is its executable's per-output cache. */
  DeviceBuffer(
      XlaClient client, PJRT_Buffer buffer, TensorType type, Device device, int[] readableByOutput, int outputIndex) {
    this(client, buffer, type, device, readableByOutput, outputIndex, () -> destroy(client.api(), buffer));
  }

  /**
   * An upload that uses the host tensor's memory in place ({@code kImmutableZeroCopy}): {@code hostMemory}
   * keeps that memory the tensor's, unchanged, until the plugin says it is done with it ({@code hostDone},
   * once the buffer is destroyed and no execution still reads it).
   */
  DeviceBuffer(XlaClient client, PJRT_Buffer buffer, TensorType type, Device device, PJRT_Event hostDone,
      HostTensor.Hold hostMemory) {
    this(client, buffer, type, device, null, 0, () -> {
      destroy(client.api(), buffer);
      client.api().onReady(hostDone, "host memory of a " + type + " upload").whenComplete((ok, e) -> hostMemory.close());
    });
  }

  private DeviceBuffer(XlaClient client, PJRT_Buffer buffer, TensorType type, Device device, int[] readableByOutput,
      int outputIndex, Destroyer destroyer) {
    this(client, client, buffer, type, device, readableByOutput, outputIndex, destroyer, new AtomicInteger(1));
  }

  private DeviceBuffer(NativeHandle parent, XlaClient client, PJRT_Buffer buffer, TensorType type, Device device,
      int[] readableByOutput, int outputIndex, Destroyer destroyer, AtomicInteger owners) {
    super(parent, destroyer);
    this.owners = owners;
    this.client = client;
    this.buffer = buffer;
    this.type = type;
    this.device = device;
    this.readableByOutput = readableByOutput;
    this.outputIndex = outputIndex;
    this.hostReadable =
        readableByOutput != null ? readableByOutput[outputIndex] : client.api().inPlaceReadPossible ? -1 : 0;
  }

  /**
   * Downloads {@code buffer} ({@code byteSize} bytes) into {@code destination} (direct, from its start). A
   * buffer in host memory with the default dense row-major layout (the CPU plugin's) is read in place, a
   * memcpy once it is ready, which skips ToHostBuffer's hand-off to a worker thread (about 10 us);
   * {@code readable[0]} caches whether that holds (-1 unknown, 0 no, 1 yes) and is updated.
   */
  static void download(PjrtApi api, PJRT_Buffer buffer, long byteSize, ByteBuffer destination, int[] readable) {
    PJRT_Error error = XlaActors_BufferToHost(api.api, buffer, new Pointer(destination), byteSize, readable);
    api.check(error, PjrtApi.Failure.GENERIC, "device-to-host transfer");
  }

  static void destroy(PjrtApi api, PJRT_Buffer buffer) {
    api.destroyBuffer(buffer);
  }

  public TensorType type() {
    return type;
  }

  public XlaClient client() {
    return client;
  }

  PJRT_Buffer pointer() {
    return buffer;
  }

  /** The device the buffer lives on. */
  public Device device() {
    Device known = device;
    if (known != null) {
      return known;
    }
    PjrtApi api = client.api();
    api.need(api.bufferDevice, "PJRT_Buffer_Device");
    try (Lease lease = lease();
        PJRT_Buffer_Device_Args args = new PJRT_Buffer_Device_Args()) {
      args.struct_size(PJRT_Buffer_Device_Args_STRUCT_SIZE).buffer(buffer);
      api.check(() -> api.bufferDevice.call(args), PjrtApi.Failure.GENERIC, "PJRT_Buffer_Device");
      Device found = client.deviceOf(args.device());
      if (found == null) {
        throw new XlaException(ErrorCode.INTERNAL, "PJRT placed a buffer on a device the client does not list");
      }
      device = found;
      return found;
    }
  }

  /** The memory space the buffer lives in. */
  public MemorySpace memory() {
    PjrtApi api = client.api();
    api.need(api.bufferMemory, "PJRT_Buffer_Memory");
    try (Lease lease = lease();
        PJRT_Buffer_Memory_Args args = new PJRT_Buffer_Memory_Args()) {
      args.struct_size(PJRT_Buffer_Memory_Args_STRUCT_SIZE).buffer(buffer);
      api.check(() -> api.bufferMemory.call(args), PjrtApi.Failure.GENERIC, "PJRT_Buffer_Memory");
      return MemorySpace.describe(api, args.memory());
    }
  }

  /** The bytes the buffer takes on its device (may exceed {@code type().byteSize()} with padding). */
  public long onDeviceSizeInBytes() {
    try (Lease lease = lease()) {
      return client.api().onDeviceSize(buffer);
    }
  }

  /** A future completed when the buffer's data is ready on its device (exceptionally if computing it failed). */
  public CompletableFuture<Void> ready() {
    PjrtApi api = client.api();
    api.need(api.bufferReadyEvent, "PJRT_Buffer_ReadyEvent");
    try (Lease lease = lease();
        PJRT_Buffer_ReadyEvent_Args args = new PJRT_Buffer_ReadyEvent_Args()) {
      args.struct_size(PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE).buffer(buffer);
      api.check(() -> api.bufferReadyEvent.call(args), PjrtApi.Failure.GENERIC, "PJRT_Buffer_ReadyEvent");
      return api.onReady(args.event(), "buffer " + type);
    }
  }

  /**
   * Copies the buffer into a new host tensor. From 64 KiB on, the tensor's memory comes from the {@link
   * HostMemoryPool}: close it when done and the next download of its size reuses it.
   */
  public HostTensor toHost() {
    HostTensor tensor = HostTensor.uninitialized(type); // the download overwrites every byte
    try (Lease lease = lease();
        HostTensor.Hold hold = tensor.hold("download into")) {
      download(hold.data());
    } catch (RuntimeException e) {
      tensor.close();
      throw e;
    }
    return tensor;
  }

  /**
   * Copies the buffer into {@code destination}, a direct buffer with exactly {@code type().byteSize()}
   * bytes remaining (written little-endian, row-major, from its position; the position is not moved).
   * Lets callers that download often reuse one host buffer: a fresh direct buffer per download costs more
   * than the copy itself for large tensors (the new pages must be faulted in and zeroed).
   */
  public void copyTo(ByteBuffer destination) {
    if (!destination.isDirect() || destination.isReadOnly() || destination.remaining() != type.byteSize()) {
      throw new InvalidArgumentException(
          "copyTo needs a writable direct buffer with " + type.byteSize() + " bytes remaining for " + type
              + ", got " + (destination.isDirect() ? "" : "a non-direct buffer with ") + destination.remaining()
              + " bytes remaining" + (destination.isReadOnly() ? " (read-only)" : ""));
    }
    try (Lease lease = lease()) {
      download(destination.slice());
    }
  }

  /**
   * Starts copying the buffer to a new host tensor and returns at once; the future completes with the
   * tensor when the copy is done (exceptionally if it fails). The buffer stays alive until then, even if
   * closed meanwhile. The tensor's memory is pooled as with {@link #toHost()}.
   */
  public CompletableFuture<HostTensor> toHostAsync() {
    PjrtApi api = client.api();
    Lease lease = lease(); // released when the copy is done
    HostTensor tensor = HostTensor.uninitialized(type);
    HostTensor.Hold hold = tensor.hold("download into"); // PJRT writes into it until the event
    try (PJRT_Buffer_ToHostBuffer_Args args = new PJRT_Buffer_ToHostBuffer_Args()) {
      args.struct_size(PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE)
          .src(buffer)
          .dst(new Pointer(hold.data()))
          .dst_size(type.byteSize());
      api.check(() -> api.bufferToHostBuffer.call(args), PjrtApi.Failure.GENERIC, "PJRT_Buffer_ToHostBuffer");
      return api.onReady(args.event(), "device-to-host transfer")
          .handle(
              (ignored, error) -> {
                lease.close();
                hold.close();
                if (error != null) {
                  tensor.close();
                  throw error instanceof RuntimeException r ? r : new RuntimeException(error);
                }
                return tensor;
              });
    } catch (RuntimeException e) {
      lease.close();
      hold.close();
      tensor.close();
      throw e;
    }
  }

  /**
   * A copy of this buffer on {@code target}: a direct device-to-device copy when {@code target} belongs to
   * this buffer's client, through the host when it belongs to another client (another plugin, say). The
   * caller owns the copy; this buffer is unchanged.
   */
  public DeviceBuffer copyToDevice(Device target) {
    java.util.Objects.requireNonNull(target, "target");
    if (target.client() != client) {
      return target.client().upload(toHost(), target);
    }
    PjrtApi api = client.api();
    api.need(api.bufferCopyToDevice, "PJRT_Buffer_CopyToDevice");
    try (Lease lease = lease();
        PJRT_Buffer_CopyToDevice_Args args = new PJRT_Buffer_CopyToDevice_Args()) {
      args.struct_size(PJRT_Buffer_CopyToDevice_Args_STRUCT_SIZE).buffer(buffer).dst_device(target.pointer());
      api.check(() -> api.bufferCopyToDevice.call(args), PjrtApi.Failure.GENERIC, "PJRT_Buffer_CopyToDevice to " + target);
      DeviceBuffer copy = new DeviceBuffer(client, args.dst_buffer(), type, target);
      try {
        copy.ready().join();
      } catch (java.util.concurrent.CompletionException e) {
        copy.close();
        throw e.getCause() instanceof RuntimeException r ? r : e;
      }
      return copy;
    }
  }

  /** Downloads into {@code destination}, sharing what is learnt about readability with its executable. */
  private void download(ByteBuffer destination) {
    int[] readable = {hostReadable};
    try {
      download(client.api(), buffer, type.byteSize(), destination, readable);
    } finally {
      hostReadable = readable[0];
      if (readableByOutput != null && readable[0] >= 0) {
        readableByOutput[outputIndex] = readable[0]; // benign race: every writer writes the same answer
      }
    }
  }

  NativeHandle.Lease leaseBuffer() {
    return lease();
  }

  /**
   * Another owner of this buffer's device memory: a handle of its own, closed by its holder; the memory is
   * freed when this buffer and every share of it are closed. Used to bind a parameter to a model while the
   * caller keeps (or closes) its own handle. A shared buffer cannot be donated.
   */
  public DeviceBuffer share() {
    try (Lease lease = lease()) {
      owners.incrementAndGet();
      try {
        return new DeviceBuffer(this, client, buffer, type, device, readableByOutput, outputIndex, () -> {}, owners);
      } catch (RuntimeException e) {
        owners.decrementAndGet();
        throw e;
      }
    }
  }

  /** Whether {@code other} is this buffer or a share of it (the same native buffer). */
  public boolean sameMemoryAs(DeviceBuffer other) {
    return other != null && other.buffer.address() == buffer.address();
  }

  /** Whether this buffer was donated to a run (it is closed then; use the run's output instead). */
  public boolean isDonated() {
    return donatedTo.get() != null;
  }

  /**
   * The address of the buffer's memory on its device (PJRT_Buffer_UnsafePointer; host memory on the CPU
   * plugin), for diagnostics such as checking that a donated input's memory became an output's. Never
   * dereference it: the memory belongs to XLA.
   */
  public long unsafeDevicePointer() {
    PjrtApi api = client.api();
    api.need(api.bufferUnsafePointer, "PJRT_Buffer_UnsafePointer");
    try (Lease lease = lease();
        PJRT_Buffer_UnsafePointer_Args args = new PJRT_Buffer_UnsafePointer_Args()) {
      args.struct_size(PJRT_Buffer_UnsafePointer_Args_STRUCT_SIZE).buffer(buffer);
      api.check(() -> api.bufferUnsafePointer.call(args), PjrtApi.Failure.GENERIC, "PJRT_Buffer_UnsafePointer");
      return args.buffer_pointer();
    }
  }

  /**
   * Gives this buffer to run {@code run} (e.g. "run 3 of model 'gpt'"): refused if it is shared or already
   * donated; otherwise returns a lease that keeps the native buffer alive for the run, and closes this
   * handle, so every later use fails naming the run.
   */
  NativeHandle.Lease donateTo(String run) {
    Lease lease = lease(); // throws, naming the earlier run, if already donated
    if (owners.get() > 1) {
      lease.close();
      throw new InvalidArgumentException(
          "buffer " + type + " is shared (bound to a model, or shared with share()) and cannot be donated: "
              + "its other owners still read it; donate a copy (copyToDevice) or an unshared buffer");
    }
    if (!donatedTo.compareAndSet(null, run)) {
      lease.close();
      throw closedError();
    }
    close();
    return lease;
  }

  @Override
  protected void onClose() {
    if (ownerReleased.compareAndSet(false, true)) {
      owners.decrementAndGet();
    }
  }

  @Override
  protected RuntimeException closedError() {
    String run = donatedTo.get();
    if (run != null) {
      return new XlaException(ErrorCode.FAILED_PRECONDITION,
          "buffer " + type + " was donated to " + run + "; use the run's output instead");
    }
    return super.closedError();
  }

  @Override
  public String toString() {
    return "DeviceBuffer(" + type + (isClosed() ? ", closed)" : ")");
  }
}
