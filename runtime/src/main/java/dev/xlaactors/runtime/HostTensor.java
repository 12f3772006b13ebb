package dev.xlaactors.runtime;

import dev.xlaactors.error.InvalidArgumentException;
import java.lang.ref.Cleaner;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

/**
 * An immutable tensor in host memory: a {@link TensorType} and its row-major elements in a direct
 * little-endian {@link ByteBuffer}, which is what PJRT copies from and to without an extra hop.
 *
 * <p>Shapes: the {@code of...(values, dims...)} factories take the shape as {@code dims}. Without dims,
 * one value makes a scalar (shape {@code []}) and any other number of values a vector ({@code [n]}); so
 * {@code ofFloats(new float[] {x})} is a scalar, while {@code ofFloats(new float[] {x}, 1)} and {@link
 * #vector(float...)} are one-element vectors. Pass dims whenever the count could be 1.
 *
 * <p>Lifetime: a tensor holds host memory until it is closed or unreachable. Tensors the runtime fills
 * itself (host-callback inputs, {@link DeviceBuffer#toHost} and other downloads) and {@link #zeros}, from
 * 64 KiB to 1 GiB, and {@link #filled} at every size up to 1 GiB, take their memory from the process-wide
 * {@link HostMemoryPool}: {@link #close()} gives
 * it back at once for the next such tensor, which saves allocating, zeroing and faulting in fresh memory
 * (milliseconds for megabytes). Closing is optional: a pooled tensor that is never closed gives its
 * memory back when it and every view from {@link #data()} have become unreachable (a {@link Cleaner}), so
 * code that never closes stays correct, only slower. Tensors made from Java values ({@code of...}) own
 * memory of their exact size and closing them only makes them unreadable.
 *
 * <p>Borrowed tensors ({@link #isBorrowed()}): the inputs of a callback registered with borrowed inputs
 * are XLA's own buffers, lent for the call, not copies. They are read through the {@code to...Array}
 * accessors, returned as outputs or uploaded while the call waits, and {@link #copy()} keeps them; after
 * the call every use fails with {@link IllegalStateException}, and {@link #data()} always does.
 *
 * <p>Thread-safe: the contents never change while the tensor is open, and readers get read-only views.
 * Reads ({@code to...Array}) and native uses (uploads, host-call answers) that race with {@link #close()}
 * either finish on intact contents (the memory goes back only after them) or fail with {@link
 * IllegalStateException}.
 */
public final class HostTensor implements AutoCloseable {
  /**
   * The most bytes one host tensor holds: 2 GiB less 65 bytes (a ByteBuffer's int capacity, less room to
   * align the block to 64 bytes). Also the largest host-callback input ({@link HostCall#MAX_INPUT_BYTES}).
   */
  public static final long MAX_BYTES = Integer.MAX_VALUE - HostMemoryPool.ALIGNMENT;

  /** Gives back the memory of pooled tensors that were never closed. */
  private static final Cleaner CLEANER =
      Cleaner.create(
          task -> {
            Thread thread = new Thread(task, "xla-actors-host-memory-cleaner");
            thread.setDaemon(true);
            return thread;
          });

  private final TensorType type;
  // For a pooled tensor, a buffer that is its own root over the block (see HostMemoryPool.Block.newRoot):
  // the views data() hands out refer to it, so the cleaner registered on it waits for them too.
  private final ByteBuffer data;
  private final Lifetime lifetime;

  private HostTensor(TensorType type, ByteBuffer data) {
    this(type, data, new Lifetime(null, null, null, null));
  }

  private HostTensor(TensorType type, ByteBuffer data, Lifetime lifetime) {
    this.type = type;
    this.data = data;
    this.lifetime = lifetime;
  }

  /**
   * Who may still use a tensor's memory: the owner (until close) and each in-flight read or native use
   * ({@link Hold}). The memory goes back to its pool when the last of them is done, or when the cleaner
   * finds the tensor's buffer unreachable. Holds no reference to the tensor or its buffer (it is the
   * cleaner's action), but keeps the block alive: a view that outlives close() still points into it.
   */
  private static final class Lifetime implements Runnable {
    private final AtomicInteger references = new AtomicInteger(1);
    private final AtomicBoolean closed = new AtomicBoolean();
    private final AtomicBoolean givenBack = new AtomicBoolean();
    private final AtomicBoolean rootGone = new AtomicBoolean();
    // Whether data() handed out a view, which may outlive the tensor and still read the memory.
    private volatile boolean viewed;
    private final HostMemoryPool pool; // null with block: the memory is not pooled
    private final HostMemoryPool.Block block;
    private final BorrowedMemory borrowed; // non-null: the memory is not ours, each use asks its lender
    private final String callback; // non-null: an input of this host callback, warned about when leaked

    Lifetime(HostMemoryPool pool, HostMemoryPool.Block block, BorrowedMemory borrowed, String callback) {
      this.pool = pool;
      this.block = block;
      this.borrowed = borrowed;
      this.callback = callback;
    }

    /** The owner's release; true the first time. */
    boolean close() {
      if (closed.compareAndSet(false, true)) {
        if (borrowed == null) {
          release();
        }
        return true;
      }
      return false;
    }

    /** One more user, unless the tensor is closed (or its memory already went back, or its lender took it). */
    boolean retain() {
      if (closed.get()) {
        return false;
      }
      if (borrowed != null) {
        return borrowed.enter();
      }
      while (true) {
        int n = references.get();
        if (n == 0) {
          return false;
        }
        if (references.compareAndSet(n, n + 1)) {
          return true;
        }
      }
    }

    void release() {
      if (borrowed != null) {
        borrowed.exit();
        return;
      }
      if (references.decrementAndGet() == 0) {
        giveBack(false);
      }
    }

    /** The cleaner's action: nothing can reach the memory any more (a Hold keeps the buffer reachable). */
    @Override
    public void run() {
      boolean leaked = !closed.getAndSet(true) && !givenBack.get();
      giveBack(true);
      rootGone();
      if (leaked && callback != null && block != null) {
        UnclosedInputs.warnOnce(callback, block.bytes());
      }
    }

    private void giveBack(boolean byCleaner) {
      if (block != null && givenBack.compareAndSet(false, true)) {
        pool.release(block, byCleaner);
        if (!viewed) {
          rootGone(); // no view was handed out, and no read or native use is left: nothing can read it
        }
      }
    }

    /** Nothing can read the memory through this tensor any more: a dropped block may be freed. */
    private void rootGone() {
      if (block != null && rootGone.compareAndSet(false, true)) {
        block.rootCollected();
      }
    }
  }

  /**
   * One read or native use of the tensor's memory (use with try-with-resources): until it is closed, the
   * tensor's memory stays its own, even if the tensor is closed meanwhile. It refers to the tensor, so the
   * tensor's buffer stays reachable while native code uses its address.
   */
  final class Hold implements AutoCloseable {
    private boolean released;

    private Hold() {}

    /** The tensor's buffer, for native code to read or (when the runtime fills a new tensor) write. */
    ByteBuffer data() {
      return data;
    }

    @Override
    public void close() {
      if (!released) {
        released = true;
        lifetime.release();
      }
    }
  }

  /**
   * A hold on the memory for {@code use} (named in the error: "upload", "read"), refused with {@link
   * IllegalStateException} once the tensor is closed, or a borrowed tensor's lender has taken it back.
   */
  Hold hold(String use) {
    if (!lifetime.retain()) {
      throw lifetime.borrowed != null && !lifetime.closed.get() ? lenderTookItBack(use) : closedError(use);
    }
    return new Hold();
  }

  /** Why the tensor can no longer be used for {@code use} (closed, or borrowed past its call), or null. */
  String unreadableReason(String use) {
    try (Hold ignored = hold(use)) {
      return null;
    } catch (IllegalStateException e) {
      return e.getMessage();
    }
  }

  /**
   * Memory a tensor only borrows: XLA's buffer of a host call's input, lent while the call waits. Each use
   * of it is bracketed by {@link #enter()} and {@link #exit()}; the lender does not take the memory back
   * while a use is in progress, so a use must be short and never wait for anything (a copy).
   */
  interface BorrowedMemory {
    /** Starts one use; false once the lender has taken the memory back (read nothing then). */
    boolean enter();

    /** Ends a use that {@link #enter()} allowed. */
    void exit();

    /** Whose memory it is, for errors: "input 0 of host callback 'f'". */
    String owner();
  }

  /**
   * A tensor over {@code memory}'s bytes ({@code data}, a buffer over memory that is not Java's), usable
   * while its lender allows: each read and native use asks it ({@link BorrowedMemory#enter()}), and
   * {@link #data()} refuses, since a view could outlive the memory.
   */
  static HostTensor borrowed(TensorType type, ByteBuffer data, BorrowedMemory memory) {
    Objects.requireNonNull(memory, "memory");
    if (data.capacity() != type.byteSize()) {
      throw new IllegalArgumentException("borrowed memory of " + data.capacity() + " bytes for " + type);
    }
    return new HostTensor(type, data.order(ByteOrder.LITTLE_ENDIAN), new Lifetime(null, null, memory, null));
  }

  /** Who lent this tensor's memory, or null when the memory is the tensor's own. */
  BorrowedMemory lender() {
    return lifetime.borrowed;
  }

  /**
   * Whether this tensor's memory is borrowed: a host-callback input that is XLA's own buffer (the callback
   * was registered with borrowed inputs), readable only until its call is answered or given up, and with
   * no {@link #data()} view. {@link #copy()} keeps its contents.
   */
  public boolean isBorrowed() {
    return lifetime.borrowed != null;
  }

  /**
   * A new tensor with the same type and contents, in memory of its own (pooled when large): what keeps a
   * borrowed host-callback input past its call. Fails with {@link IllegalStateException} when this tensor
   * can no longer be read (closed, or borrowed and its call has ended).
   */
  public HostTensor copy() {
    HostTensor copy = uninitialized(type);
    long bytes = type.byteSize();
    try (Hold from = hold("copy"); Hold to = copy.hold("copy into")) {
      if (bytes > 0) {
        org.bytedeco.javacpp.Pointer.memcpy(
            new org.bytedeco.javacpp.Pointer(to.data()), new org.bytedeco.javacpp.Pointer(from.data()), bytes);
      }
    } catch (RuntimeException | Error e) {
      copy.close();
      throw e;
    }
    return copy;
  }

  /**
   * A tensor of {@code type} whose contents are whatever its memory held (zeros or a former tensor's
   * bytes), for the runtime to overwrite completely before anyone else sees it: callback inputs,
   * downloads. From the shared pool when its size is pooled.
   */
  static HostTensor uninitialized(TensorType type) {
    return pooled(type, HostMemoryPool.shared(), false, null);
  }

  /**
   * As {@link #uninitialized(TensorType)}, for an input of host callback {@code callback}: if it is
   * never closed, its memory comes back only through the garbage collector, and the callback is named
   * in one warning.
   */
  static HostTensor callbackInput(TensorType type, String callback) {
    return pooled(type, HostMemoryPool.shared(), false, Objects.requireNonNull(callback, "callback"));
  }

  /** As {@link #uninitialized(TensorType)}, from {@code pool}. */
  static HostTensor uninitialized(TensorType type, HostMemoryPool pool) {
    return pooled(type, pool, false, null);
  }

  /** As {@link #zeros(TensorType)}, from {@code pool}. */
  static HostTensor zeros(TensorType type, HostMemoryPool pool) {
    return pooled(type, pool, true, null);
  }

  private static HostTensor pooled(TensorType type, HostMemoryPool pool, boolean zeroed, String callback) {
    return pooled(type, pool, zeroed, callback, false);
  }

  /** {@code anySize}: from the pool at every size it has a class for, not only from 64 KiB. */
  private static HostTensor pooled(TensorType type, HostMemoryPool pool, boolean zeroed, String callback, boolean anySize) {
    Objects.requireNonNull(type, "type");
    long bytes = type.byteSize();
    if (!(anySize ? HostMemoryPool.poolable(bytes) : HostMemoryPool.pooled(bytes)) || pool.limitBytes() == 0) {
      return new HostTensor(type, allocate(bytes)); // allocateDirect zeroes
    }
    HostMemoryPool.Block block;
    try {
      block = pool.acquire(bytes);
    } catch (OutOfMemoryError e) { // the JVM's direct-memory limit refused a fresh block, even after a GC
      throw DirectMemory.exhausted(HostMemoryPool.blockBytes(bytes), "a host tensor " + type + " (" + bytes + " bytes)", e);
    }
    ByteBuffer root;
    try {
      root = block.newRoot((int) bytes);
      if (zeroed && block.used()) {
        HostMemoryPool.zero(root, bytes);
      }
    } catch (RuntimeException | Error e) {
      pool.release(block, false);
      throw e;
    }
    Lifetime lifetime = new Lifetime(pool, block, null, callback);
    CLEANER.register(root, lifetime);
    return new HostTensor(type, root, lifetime);
  }

  /**
   * Closes the tensor: its data can no longer be read ({@link #data()} and the {@code to...Array}
   * accessors throw {@link IllegalStateException}; {@link #type()} still answers) nor uploaded or
   * returned from a callback, and a pooled tensor's memory goes back to the {@link HostMemoryPool} at once
   * (after any read or transfer in progress). Idempotent and thread-safe; closing is optional (see the
   * class doc).
   *
   * <p>Views that {@link #data()} handed out before the close stay valid Java buffers (the memory is never
   * freed under them, so they cannot crash the JVM), but once the memory is reused they show the bytes of
   * whichever tensor reuses it. Close a tensor only when nothing will read it or its views again.
   */
  @Override
  public void close() {
    lifetime.close();
  }

  /** Whether {@link #close()} was called (or the tensor's memory was reclaimed). */
  public boolean isClosed() {
    return lifetime.closed.get();
  }

  /**
   * Wraps the remaining bytes of {@code data} (exactly {@code type.byteSize()} of them) as a tensor.
   * The bytes are copied unless the buffer is direct and little-endian; then they are shared and must
   * not be modified afterwards (nor while a buffer uploaded from the tensor is open: on the CPU plugin an
   * upload may use them in place, see {@link XlaClient#upload(HostTensor, Device)}).
   */
  public static HostTensor of(TensorType type, ByteBuffer data) {
    Objects.requireNonNull(type, "type");
    Objects.requireNonNull(data, "data");
    long bytes = type.byteSize();
    if (data.remaining() != bytes) {
      throw new InvalidArgumentException(
          "tensor " + type + " needs " + bytes + " bytes of data, got " + data.remaining());
    }
    if (data.isDirect() && data.order() == ByteOrder.LITTLE_ENDIAN) {
      // slice(): capacity == size, which the native layer relies on
      return new HostTensor(type, data.slice().asReadOnlyBuffer().order(ByteOrder.LITTLE_ENDIAN));
    }
    ByteBuffer copy = allocate(bytes);
    copy.put(data.duplicate());
    copy.flip();
    return new HostTensor(type, copy);
  }

  /**
   * A tensor of zeros. From 64 KiB to 1 GiB its memory comes from the {@link HostMemoryPool} (zeroed
   * again when reused): close it when done to give it back.
   */
  public static HostTensor zeros(TensorType type) {
    return zeros(type, HostMemoryPool.shared());
  }

  /**
   * A tensor of {@code type} whose bytes {@code fill} writes: it is given a writable little-endian buffer
   * over the tensor's memory (position 0, limit the tensor's size), zeroed, and must not keep it or write
   * through it once it returns (the tensor's contents never change afterwards). Up to 1 GiB the memory
   * comes from the {@link HostMemoryPool} at every size (not only from 64 KiB as for {@link #zeros}): close
   * the tensor when done to give it back, which saves allocating and zeroing fresh direct memory for each
   * such tensor (a batch assembled many times a second, the rows of each request a server answers); one
   * never closed goes back through the garbage collector. If {@code fill} throws, the tensor is closed and
   * the exception propagates.
   */
  public static HostTensor filled(TensorType type, Consumer<? super ByteBuffer> fill) {
    Objects.requireNonNull(fill, "fill");
    HostTensor tensor = pooled(type, HostMemoryPool.shared(), true, null, true);
    try {
      tensor.lifetime.viewed = true; // a buffer fill kept would still point into the memory: never free it under one
      fill.accept(tensor.data.duplicate().order(ByteOrder.LITTLE_ENDIAN));
    } catch (RuntimeException | Error e) {
      tensor.close();
      throw e;
    }
    return tensor;
  }

  /** Raw little-endian element bytes, in row-major order. */
  public static HostTensor ofBytes(DType dtype, byte[] bytes, long... dims) {
    TensorType type = checked(dtype, bytes.length / Math.max(1, dtype.byteSize()), dims);
    if (bytes.length != type.byteSize()) {
      throw new InvalidArgumentException(
          "tensor " + type + " needs " + type.byteSize() + " bytes, got " + bytes.length);
    }
    ByteBuffer b = allocate(bytes.length);
    b.put(bytes).flip();
    return new HostTensor(type, b);
  }

  /** A rank-1 f32 tensor of {@code values}, whatever their number (one value is a vector of one). */
  public static HostTensor vector(float... values) {
    return ofFloats(values, values.length);
  }

  /** A rank-1 s32 tensor of {@code values}, whatever their number (one value is a vector of one). */
  public static HostTensor vector(int... values) {
    return ofInts(values, values.length);
  }

  /** f32 values of shape {@code dims}; without dims a scalar for one value, else a vector (see the class doc). */
  public static HostTensor ofFloats(float[] values, long... dims) {
    TensorType type = checked(DType.F32, values.length, dims);
    ByteBuffer b = allocate(type.byteSize());
    b.asFloatBuffer().put(values);
    return new HostTensor(type, b);
  }

  public static HostTensor ofDoubles(double[] values, long... dims) {
    TensorType type = checked(DType.F64, values.length, dims);
    ByteBuffer b = allocate(type.byteSize());
    b.asDoubleBuffer().put(values);
    return new HostTensor(type, b);
  }

  /** f16 elements, each rounded to nearest-even from the given floats. */
  public static HostTensor ofHalfFloats(float[] values, long... dims) {
    TensorType type = checked(DType.F16, values.length, dims);
    ByteBuffer b = allocate(type.byteSize());
    for (float v : values) {
      b.putShort(HalfFloats.floatToHalf(v));
    }
    b.flip();
    return new HostTensor(type, b);
  }

  /** bf16 elements, each rounded to nearest-even from the given floats. */
  public static HostTensor ofBFloat16s(float[] values, long... dims) {
    TensorType type = checked(DType.BF16, values.length, dims);
    ByteBuffer b = allocate(type.byteSize());
    for (float v : values) {
      b.putShort(HalfFloats.floatToBFloat16(v));
    }
    b.flip();
    return new HostTensor(type, b);
  }

  /** Integers of a signed or unsigned integer dtype; each value must fit the dtype's range. */
  public static HostTensor ofLongs(DType dtype, long[] values, long... dims) {
    if (!dtype.isInteger()) {
      throw new InvalidArgumentException("ofLongs needs an integer dtype, got " + dtype.shortName());
    }
    TensorType type = checked(dtype, values.length, dims);
    ByteBuffer b = allocate(type.byteSize());
    for (int i = 0; i < values.length; i++) {
      long v = values[i];
      checkRange(dtype, v, i);
      switch (dtype.byteSize()) {
        case 1 -> b.put((byte) v);
        case 2 -> b.putShort((short) v);
        case 4 -> b.putInt((int) v);
        default -> b.putLong(v);
      }
    }
    b.flip();
    return new HostTensor(type, b);
  }

  public static HostTensor ofInts(int[] values, long... dims) {
    TensorType type = checked(DType.S32, values.length, dims);
    ByteBuffer b = allocate(type.byteSize());
    b.asIntBuffer().put(values);
    return new HostTensor(type, b);
  }

  public static HostTensor ofLongs(long[] values, long... dims) {
    TensorType type = checked(DType.S64, values.length, dims);
    ByteBuffer b = allocate(type.byteSize());
    b.asLongBuffer().put(values);
    return new HostTensor(type, b);
  }

  public static HostTensor ofBooleans(boolean[] values, long... dims) {
    TensorType type = checked(DType.PRED, values.length, dims);
    ByteBuffer b = allocate(type.byteSize());
    for (boolean v : values) {
      b.put((byte) (v ? 1 : 0));
    }
    b.flip();
    return new HostTensor(type, b);
  }

  public static HostTensor scalar(float value) {
    return ofFloats(new float[] {value});
  }

  public static HostTensor scalar(int value) {
    return ofInts(new int[] {value});
  }

  public TensorType type() {
    return type;
  }

  public DType dtype() {
    return type.dtype();
  }

  public Shape shape() {
    return type.shape();
  }

  /**
   * A read-only little-endian view of the element bytes (position 0). It stays readable after {@link
   * #close()}, but may then show another tensor's bytes: see there.
   */
  public ByteBuffer data() {
    if (lifetime.borrowed != null) {
      throw new IllegalStateException(
          "HostTensor(" + type + ") is " + lifetime.borrowed.owner() + ", XLA's own buffer lent for the call"
              + " (the callback was registered with CallbackOptions.borrowedInputs), so it hands out no view that"
              + " could outlive the call: read it with the to...Array methods, or copy() it for a tensor of its own");
    }
    lifetime.viewed = true; // before the check: a close() that misses it has made the check fail
    if (lifetime.closed.get()) {
      throw closedError("read");
    }
    return view();
  }

  private ByteBuffer view() {
    return data.asReadOnlyBuffer().order(ByteOrder.LITTLE_ENDIAN);
  }

  /**
   * A c64 tensor from interleaved (real, imaginary) float pairs: {@code values.length / 2} elements,
   * shaped by {@code dims} (a vector of that length when none are given).
   */
  public static HostTensor ofComplex64(float[] interleaved, long... dims) {
    TensorType type = checkedComplex(DType.C64, interleaved.length, dims);
    ByteBuffer b = allocate(type.byteSize());
    b.asFloatBuffer().put(interleaved);
    return new HostTensor(type, b);
  }

  /** A c128 tensor from interleaved (real, imaginary) double pairs; see {@link #ofComplex64}. */
  public static HostTensor ofComplex128(double[] interleaved, long... dims) {
    TensorType type = checkedComplex(DType.C128, interleaved.length, dims);
    ByteBuffer b = allocate(type.byteSize());
    b.asDoubleBuffer().put(interleaved);
    return new HostTensor(type, b);
  }

  /** The type of {@code values} interleaved (real, imaginary) numbers shaped by {@code dims}. */
  private static TensorType checkedComplex(DType dtype, int values, long[] dims) {
    if (values % 2 != 0) {
      throw new InvalidArgumentException("complex values come in (real, imaginary) pairs, got an odd count " + values);
    }
    long count = values / 2;
    Shape shape = dims.length == 0 ? Shape.of(count) : Shape.of(dims);
    if (shape.elementCount() != count) {
      throw new InvalidArgumentException(
          "shape " + shape + " holds " + shape.elementCount() + " complex elements, got " + count + " pairs");
    }
    return new TensorType(dtype, shape);
  }

  /** Elements of a c64 tensor as interleaved (real, imaginary) floats. */
  public float[] toComplex64Array() {
    if (dtype() != DType.C64) {
      throw wrongAccessor("toComplex64Array", "c64");
    }
    float[] out = new float[2 * count()];
    try (Hold hold = hold("read")) {
      view().asFloatBuffer().get(out);
    }
    return out;
  }

  /** Elements of a c128 tensor as interleaved (real, imaginary) doubles. */
  public double[] toComplex128Array() {
    if (dtype() != DType.C128) {
      throw wrongAccessor("toComplex128Array", "c128");
    }
    double[] out = new double[2 * count()];
    try (Hold hold = hold("read")) {
      view().asDoubleBuffer().get(out);
    }
    return out;
  }

  /** Elements as floats: f32 as is, f16/bf16/f64 converted. */
  public float[] toFloatArray() {
    int n = count();
    float[] out = new float[n];
    try (Hold hold = hold("read")) {
      readFloats(view(), 0, out, 0, n);
    }
    return out;
  }

  /**
   * Elements {@code [from, from + count)} as floats (f32 as is, f16/bf16/f64 converted) into {@code out} from
   * {@code at}: a part of a tensor read without an array of its own (a decode step's logits rows, each into its
   * slot's row).
   */
  public void readFloats(int from, float[] out, int at, int count) {
    int n = count();
    if (from < 0 || count < 0 || from > n - count || at < 0 || at > out.length - count) {
      throw new InvalidArgumentException("readFloats: elements " + from + ".." + ((long) from + count) + " of a tensor of " + n
          + " into " + at + ".." + ((long) at + count) + " of an array of " + out.length + ": a range is outside its bounds");
    }
    try (Hold hold = hold("read")) {
      readFloats(view(), from, out, at, count);
    }
  }

  /** Elements [from, from + count) of b as floats into out from at. */
  private void readFloats(ByteBuffer b, int from, float[] out, int at, int count) {
    switch (dtype()) {
      case F32 -> b.asFloatBuffer().get(from, out, at, count);
      case F16 -> {
        for (int i = 0; i < count; i++) {
          out[at + i] = HalfFloats.halfToFloat(b.getShort(2 * (from + i)));
        }
      }
      case BF16 -> {
        for (int i = 0; i < count; i++) {
          out[at + i] = HalfFloats.bfloat16ToFloat(b.getShort(2 * (from + i)));
        }
      }
      case F64 -> {
        for (int i = 0; i < count; i++) {
          out[at + i] = (float) b.getDouble(8 * (from + i));
        }
      }
      default -> throw wrongAccessor("toFloatArray", "f32, f16, bf16 or f64");
    }
  }

  public double[] toDoubleArray() {
    if (dtype() != DType.F64) {
      float[] f = toFloatArray();
      double[] out = new double[f.length];
      for (int i = 0; i < f.length; i++) {
        out[i] = f[i];
      }
      return out;
    }
    double[] out = new double[count()];
    try (Hold hold = hold("read")) {
      view().asDoubleBuffer().get(out);
    }
    return out;
  }

  /** Elements of an integer or pred tensor as longs (unsigned types zero-extended). */
  public long[] toLongArray() {
    if (!dtype().isInteger() && dtype() != DType.PRED) {
      throw wrongAccessor("toLongArray", "an integer or pred dtype");
    }
    int n = count();
    long[] out = new long[n];
    boolean unsigned = dtype().isUnsignedInteger() || dtype() == DType.PRED;
    try (Hold hold = hold("read")) {
      ByteBuffer b = view();
      for (int i = 0; i < n; i++) {
        out[i] =
            switch (dtype().byteSize()) {
              case 1 -> unsigned ? Byte.toUnsignedLong(b.get(i)) : b.get(i);
              case 2 -> unsigned ? Short.toUnsignedLong(b.getShort(2 * i)) : b.getShort(2 * i);
              case 4 -> unsigned ? Integer.toUnsignedLong(b.getInt(4 * i)) : b.getInt(4 * i);
              default -> b.getLong(8 * i);
            };
      }
    }
    return out;
  }

  /** Elements of an s32 tensor. */
  public int[] toIntArray() {
    if (dtype() != DType.S32) {
      throw wrongAccessor("toIntArray", "s32");
    }
    int[] out = new int[count()];
    try (Hold hold = hold("read")) {
      view().asIntBuffer().get(out);
    }
    return out;
  }

  public boolean[] toBooleanArray() {
    if (dtype() != DType.PRED) {
      throw wrongAccessor("toBooleanArray", "pred");
    }
    boolean[] out = new boolean[count()];
    try (Hold hold = hold("read")) {
      ByteBuffer b = view();
      for (int i = 0; i < out.length; i++) {
        out[i] = b.get(i) != 0;
      }
    }
    return out;
  }

  /** A copy of the raw element bytes. */
  public byte[] toByteArray() {
    byte[] out = new byte[data.capacity()];
    try (Hold hold = hold("read")) {
      view().get(out);
    }
    return out;
  }

  @Override
  public String toString() {
    return "HostTensor(" + type + (isBorrowed() ? ", borrowed" : "") + (isClosed() ? ", closed)" : ")");
  }

  private IllegalStateException lenderTookItBack(String use) {
    return new IllegalStateException(
        "cannot " + use + " HostTensor(" + type + "): it is " + lifetime.borrowed.owner() + ", XLA's own buffer"
            + " lent for the call only, and the call has been answered or given up; copy() it during the call"
            + " to keep it");
  }

  private IllegalStateException closedError(String use) {
    return new IllegalStateException(
        "cannot " + use + " HostTensor(" + type + "): the tensor was closed (close() gave its memory back"
            + " for reuse); " + use + " it before closing it");
  }

  private int count() {
    long n = type.shape().elementCount();
    if (n > Integer.MAX_VALUE) {
      throw new InvalidArgumentException("tensor " + type + " has too many elements for a Java array");
    }
    return (int) n;
  }

  private InvalidArgumentException wrongAccessor(String method, String expected) {
    return new InvalidArgumentException(method + " needs " + expected + ", the tensor is " + type);
  }

  private static ByteBuffer allocate(long bytes) {
    if (bytes > MAX_BYTES) {
      throw new InvalidArgumentException("tensors over 2 GiB are not supported, got " + bytes + " bytes (a host tensor holds at most "
          + MAX_BYTES + " bytes)");
    }
    if (bytes < HostMemoryPool.MIN_POOLED_BYTES) {
      return DirectMemory.allocate((int) bytes, bytes).order(ByteOrder.LITTLE_ENDIAN);
    }
    // Large tensors start aligned, as the CPU plugin needs to upload them in place (XlaClient.upload). The
    // slice keeps the whole allocation reachable, which the garbage collector frees with it.
    ByteBuffer memory = DirectMemory.allocate((int) bytes + HostMemoryPool.ALIGNMENT, bytes);
    NativeLibrary.load(); // Pointer's natives: a large tensor may be the program's first native use
    int start;
    try (org.bytedeco.javacpp.Pointer pointer = new org.bytedeco.javacpp.Pointer(memory)) {
      start = HostMemoryPool.alignedOffset(pointer.address());
    }
    return memory.position(start).limit(start + (int) bytes).slice().order(ByteOrder.LITTLE_ENDIAN);
  }

  private static TensorType checked(DType dtype, long count, long[] dims) {
    Shape shape = dims.length == 0 && count != 1 ? Shape.of(count) : Shape.of(dims);
    if (shape.elementCount() != count) {
      throw new InvalidArgumentException(
          "shape " + shape + " holds " + shape.elementCount() + " elements, got " + count + " values");
    }
    return new TensorType(dtype, shape);
  }

  private static void checkRange(DType dtype, long v, int index) {
    int bits = dtype.byteSize() * 8;
    boolean ok;
    if (dtype.isUnsignedInteger()) {
      ok = bits == 64 || (v >= 0 && v < (1L << bits));
    } else {
      ok = bits == 64 || (v >= -(1L << (bits - 1)) && v < (1L << (bits - 1)));
    }
    if (!ok) {
      throw new InvalidArgumentException(
          "value " + v + " at index " + index + " does not fit " + dtype.shortName());
    }
  }
}
