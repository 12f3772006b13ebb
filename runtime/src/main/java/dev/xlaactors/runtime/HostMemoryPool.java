package dev.xlaactors.runtime;

import dev.xlaactors.error.InvalidArgumentException;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;

/**
 * The process-wide pool of host memory behind large {@link HostTensor}s: the tensors the runtime fills
 * itself (host-callback inputs, downloads of device buffers) and {@link HostTensor#zeros}. A fresh direct
 * {@code ByteBuffer} costs more than copying into it (the JDK zeroes it, which faults every page in, and
 * freeing it waits for the garbage collector, or for {@code System.gc()} once direct memory runs short):
 * 3.8 to 5.3 ms for 16 MiB against about 1 ms for the copy. A block that a closed tensor gave back is
 * handed to the next tensor of its size class as it is, neither zeroed nor faulted again; a fresh block
 * is pre-faulted by the JDK's zeroing, so every block a tensor gets is resident.
 *
 * <p>Blocks come in power-of-two size classes from {@value #MIN_BLOCK_BYTES} bytes to 1 GiB; a tensor takes
 * the smallest class that holds it. The tensors the runtime fills itself and {@link HostTensor#zeros} take
 * a block from {@value #MIN_POOLED_BYTES} bytes (64 KiB) on, smaller ones get memory of their own (they are
 * often never closed); {@link HostTensor#filled}, whose tensors their maker closes (the rows of a served
 * model's requests and answers, many per second), takes one at every size. Larger tensors get memory of
 * their own size, freed by the garbage collector as before.
 *
 * <p>Bound: the pool keeps at most {@link #limitBytes()} bytes of idle blocks, set by {@code
 * xla-actors.runtime.host-memory.pool-bytes} (read when the pool is first used, and again by every
 * {@link XlaClient#create(RuntimeSettings)}); a block given back past the bound is dropped: freed at once
 * when no buffer over it can still be reachable, else by the garbage collector. When the JVM's direct-memory
 * limit refuses a fresh block, the pool drops its idle blocks (and, for a second, the blocks given back),
 * collects garbage and tries once more.
 *
 * <p>Lent blocks (those of open tensors) are bounded too: a tensor that is never closed gives its block
 * back only when the garbage collector finds it unreachable, which a JVM with little heap garbage may not
 * do for gigabytes. So before lending a block that takes the lent bytes past the same bound, the pool
 * collects garbage and waits for the blocks of unreachable tensors to come back ({@link Stats#reclaims()}):
 * until the cleaner has given none back for 50 ms ({@value #RECLAIM_WAIT_MILLIS} ms before the first), at
 * most 1 s. Blocks of tensors still in use cannot come back: then
 * the next reclaim waits until twice the bytes lent after this one, so a program that really holds many
 * tensors pays a collection per doubling, not per tensor. The JVM's direct-memory limit ({@code
 * -XX:MaxDirectMemorySize}) bounds the rest.
 *
 * <p>Thread-safe; every operation is a short critical section.
 */
public final class HostMemoryPool {
  static {
    NativeLibrary.load(); // blocks are mapped and zeroed through JavaCPP's Pointer
  }

  /**
   * The smallest tensor, in bytes, whose memory comes from the pool without asking ({@link
   * HostTensor#zeros}, downloads, callback inputs); {@link HostTensor#filled} pools every size.
   */
  public static final int MIN_POOLED_BYTES = 64 << 10;

  /** The smallest block: one {@link #ALIGNMENT}, which a block's start is aligned to anyway. */
  public static final int MIN_BLOCK_BYTES = 64;

  /**
   * Where a block's bytes start: a multiple of this many bytes, the alignment XLA's CPU plugin needs to
   * use host memory in place (see {@link XlaClient#upload(HostTensor, Device)}).
   */
  static final int ALIGNMENT = 64;

  /** How many bytes past {@code address} the first {@link #ALIGNMENT}-aligned address is (0 to 63). */
  static int alignedOffset(long address) {
    return (int) ((ALIGNMENT - address % ALIGNMENT) % ALIGNMENT);
  }

  private static final int MIN_CLASS = Integer.numberOfTrailingZeros(MIN_BLOCK_BYTES);
  private static final int MAX_CLASS = 30; // 1 GiB: the largest power of two a ByteBuffer can hold

  /** How long a reclaim waits for the cleaner to give back a first block of an unreachable tensor. */
  static final long RECLAIM_WAIT_MILLIS = 200;

  /** How long, after direct memory ran short, blocks given back are dropped rather than kept. */
  private static final long PRESSURE_NANOS = 1_000_000_000L;

  /** Frees a direct buffer's memory at once ({@code Unsafe.invokeCleaner}); null: left to the GC. */
  private static final MethodHandle FREE = freeHandle();

  private static volatile HostMemoryPool shared;

  private volatile boolean underPressure;
  private volatile long pressureEndsNanos;

  private final List<ArrayDeque<Block>> idle; // by size class (log2 of the block size)
  private long limitBytes;
  private long idleBytes;
  private long freshBlocks;
  private long reusedBlocks;
  private long returnedBlocks;
  private long droppedBlocks;
  private long cleanerReturns;
  private long lentBytes;
  private long reclaims;
  private long reclaimAtBytes; // lent bytes past which the next acquire reclaims first; 0: at limitBytes
  private final Object reclaiming = new Object(); // one reclaim at a time; the others wait for its outcome

  /**
   * Counters of a pool, all since it was created except {@code idleBytes}.
   *
   * @param freshBlocks blocks allocated because no idle block of their class was there
   * @param reusedBlocks tensors that took an idle block
   * @param returnedBlocks blocks given back and kept for reuse
   * @param droppedBlocks blocks that left the pool: given back past the bound, trimmed, or given back
   *     while direct memory ran short (freed at once when nothing can read them, else by the GC)
   * @param cleanerReturns blocks given back by the cleaner because their tensor became unreachable
   *     without {@link HostTensor#close()} (counted in {@code returnedBlocks} or {@code droppedBlocks} too)
   * @param idleBytes bytes of idle blocks now
   * @param limitBytes the most idle bytes the pool keeps, and the lent bytes past which it reclaims
   * @param lentBytes bytes of blocks lent to tensors not yet closed nor collected
   * @param reclaims times the pool collected garbage to get back the blocks of unclosed, unreachable tensors
   *     before lending more
   */
  public record Stats(
      long freshBlocks,
      long reusedBlocks,
      long returnedBlocks,
      long droppedBlocks,
      long cleanerReturns,
      long idleBytes,
      long limitBytes,
      long lentBytes,
      long reclaims) {}

  /** A block of pooled memory: a direct buffer that owns it, and its size class. */
  static final class Block {
    /** Owns the native memory (freed by the JDK once the block is unreachable); never handed out. */
    private final ByteBuffer memory;
    private final int sizeClass;
    // Whether a tensor had the block before: until then it holds the JDK's zeros.
    private volatile boolean used;
    // Buffers made by newRoot whose tensor's cleaner has not run yet: while one may be reachable, so may
    // views of the memory, which must then not be freed under them.
    private final AtomicInteger liveRoots = new AtomicInteger();
    private volatile boolean dropped; // out of the pool for good
    private final AtomicBoolean freed = new AtomicBoolean();

    private Block(ByteBuffer memory, int sizeClass) {
      this.memory = memory;
      this.sizeClass = sizeClass;
    }

    long bytes() {
      return 1L << sizeClass;
    }

    /** Whether a former tensor may have left bytes in the block (a fresh one is all zeros). */
    boolean used() {
      return used;
    }

    /**
     * A new little-endian buffer over the first {@code bytes} bytes that is its own root: not derived from
     * {@link #memory} (JNI's NewDirectByteBuffer), so views of it refer to it and not to the block, and a
     * cleaner registered on it runs only once every view of it is unreachable too. It does not keep the
     * block alive: its owner must (see HostTensor).
     */
    ByteBuffer newRoot(int bytes) {
      liveRoots.incrementAndGet();
      try (BytePointer pointer = new BytePointer(memory)) {
        // memory has ALIGNMENT bytes spare
        try (BytePointer aligned = pointer.getPointer(alignedOffset(pointer.address()))) {
          return aligned.position(0).limit(bytes).capacity(bytes).asByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
        }
      }
    }

    /**
     * Nothing can read the memory through a root any more (its tensor was closed without handing out a
     * view, or its cleaner ran): a dropped block with no roots left is freed.
     */
    void rootCollected() {
      if (liveRoots.decrementAndGet() == 0 && dropped) {
        free();
      }
    }

    /**
     * The block leaves the pool: its memory is freed at once when no buffer over it can be reachable, else
     * once the last such buffer is found unreachable (or by the GC with the block).
     */
    void drop() {
      dropped = true;
      if (liveRoots.get() == 0) {
        free();
      }
    }

    private void free() {
      if (FREE != null && freed.compareAndSet(false, true)) {
        try {
          FREE.invokeExact(memory);
        } catch (Throwable e) {
          // Not freed now; the garbage collector frees it with the block.
        }
      }
    }
  }

  HostMemoryPool(long limitBytes) {
    checkLimit(limitBytes);
    this.limitBytes = limitBytes;
    this.idle = new ArrayList<>(MAX_CLASS + 1);
    for (int c = 0; c <= MAX_CLASS; c++) {
      idle.add(new ArrayDeque<>());
    }
  }

  /**
   * The process's pool, created on first use with the bound of the application's config ({@code
   * RuntimeSettings.load()}); a bad value there fails this call with a message naming the key.
   */
  public static HostMemoryPool shared() {
    HostMemoryPool pool = shared;
    if (pool == null) {
      synchronized (HostMemoryPool.class) {
        pool = shared;
        if (pool == null) {
          pool = new HostMemoryPool(RuntimeSettings.load().hostMemoryPoolBytes());
          shared = pool;
        }
      }
    }
    return pool;
  }

  /** Sets the shared pool's bound, creating the pool with it if it does not exist yet (no config read). */
  static void configureShared(long limitBytes) {
    synchronized (HostMemoryPool.class) {
      if (shared == null) {
        shared = new HostMemoryPool(limitBytes);
        return;
      }
    }
    shared.setLimitBytes(limitBytes);
  }

  /** The size class of a tensor of {@code bytes} bytes (at least 1): log2 of its block's size. */
  private static int sizeClass(long bytes) {
    return Math.max(MIN_CLASS, 64 - Long.numberOfLeadingZeros(bytes - 1));
  }

  /** The direct memory a fresh block for a tensor of {@code bytes} bytes takes. */
  static long blockBytes(long bytes) {
    return (1L << sizeClass(bytes)) + ALIGNMENT;
  }

  /** Whether a tensor of {@code bytes} bytes takes its memory from a pool without asking. */
  static boolean pooled(long bytes) {
    return bytes >= MIN_POOLED_BYTES && poolable(bytes);
  }

  /** Whether a pool has a size class for a tensor of {@code bytes} bytes (what {@link HostTensor#filled} takes). */
  static boolean poolable(long bytes) {
    return bytes >= 1 && bytes <= (1L << MAX_CLASS);
  }

  /**
   * A block of at least {@code bytes} bytes ({@link #poolable} must hold): an idle one with whatever its
   * last tensor left in it, or a fresh one (zeroed, every page touched).
   */
  Block acquire(long bytes) {
    int sizeClass = sizeClass(bytes);
    long blockBytes = 1L << sizeClass;
    if (overLendBound(blockBytes)) {
      reclaimUnreachable(blockBytes);
    }
    synchronized (this) {
      Block block = idle.get(sizeClass).pollLast(); // the most recently used: the likeliest still in cache
      if (block != null) {
        idleBytes -= block.bytes();
        reusedBlocks++;
        lentBytes += blockBytes;
        return block;
      }
      freshBlocks++;
    }
    Block block = new Block(allocateFresh((int) blockBytes + ALIGNMENT), sizeClass);
    synchronized (this) {
      lentBytes += blockBytes;
    }
    return block;
  }

  private synchronized long lentBytes() {
    return lentBytes;
  }

  /** Whether lending {@code more} bytes takes the lent bytes past the bound at which the pool reclaims first. */
  private synchronized boolean overLendBound(long more) {
    return limitBytes > 0 && lentBytes + more > Math.max(limitBytes, reclaimAtBytes);
  }

  /**
   * Collects garbage and waits for the cleaner to give back the blocks of tensors that became
   * unreachable without being closed, until lending {@code more} bytes stays within the bound or the
   * cleaner goes quiet. What is still lent after it is in use: the next reclaim waits for twice that.
   */
  private void reclaimUnreachable(long more) {
    synchronized (reclaiming) {
      if (!overLendBound(more)) {
        return; // the reclaim this thread waited for was enough
      }
      System.gc();
      // Wait while the cleaner gives blocks back: until within the bound, or until it has gone quiet (no
      // block back for 50 ms once some came, for RECLAIM_WAIT_MILLIS before any came), at most 1 s.
      long start = System.nanoTime();
      long lastBack = start;
      long lastLent = lentBytes();
      boolean anyBack = false;
      while (overLendBound(more)) {
        try {
          Thread.sleep(1);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          break;
        }
        long now = System.nanoTime();
        long lent = lentBytes();
        if (lent < lastLent) {
          lastLent = lent;
          lastBack = now;
          anyBack = true;
        } else if (now - lastBack > (anyBack ? 50 : RECLAIM_WAIT_MILLIS) * 1_000_000L || now - start > 1_000_000_000L) {
          break; // what is still lent is in use
        }
      }
      synchronized (this) {
        reclaims++;
        reclaimAtBytes = 2 * (lentBytes + more);
      }
    }
  }

  private ByteBuffer allocateFresh(int bytes) {
    try {
      return ByteBuffer.allocateDirect(bytes);
    } catch (OutOfMemoryError e) {
      // Direct memory is short, and the blocks the pool keeps count against the limit. Drop the idle ones,
      // drop blocks given back for a while too (the cleaner's returns for tensors that this collection
      // finds unreachable among them), and collect: the retry's own System.gc() then frees what was dropped.
      pressureEndsNanos = System.nanoTime() + PRESSURE_NANOS;
      underPressure = true;
      trim(0);
      System.gc();
      return ByteBuffer.allocateDirect(bytes);
    }
  }

  private boolean underPressure() {
    if (underPressure && System.nanoTime() - pressureEndsNanos > 0) {
      underPressure = false;
    }
    return underPressure;
  }

  /** Takes {@code block} back: kept for reuse within the bound, dropped past it. */
  void release(Block block, boolean byCleaner) {
    block.used = true;
    synchronized (this) {
      lentBytes -= block.bytes();
      if (lentBytes * 4 < reclaimAtBytes) {
        reclaimAtBytes = 0; // the tensors that raised it are gone: reclaim at the bound again
      }
      if (byCleaner) {
        cleanerReturns++;
      }
      if (idleBytes + block.bytes() <= limitBytes && !underPressure()) {
        idle.get(block.sizeClass).addLast(block);
        idleBytes += block.bytes();
        returnedBlocks++;
      } else {
        droppedBlocks++;
        block.drop();
      }
    }
  }

  /** The most bytes of idle blocks the pool keeps. */
  public synchronized long limitBytes() {
    return limitBytes;
  }

  /**
   * Sets the most bytes of idle blocks the pool keeps (0: none, every large tensor gets fresh memory);
   * idle blocks past a lower bound are dropped at once.
   */
  public void setLimitBytes(long limitBytes) {
    checkLimit(limitBytes);
    synchronized (this) {
      this.limitBytes = limitBytes;
    }
    trim(limitBytes);
  }

  /** Drops idle blocks, largest first, until at most {@code keepBytes} bytes of them are left. */
  synchronized void trim(long keepBytes) {
    for (int c = MAX_CLASS; c >= MIN_CLASS && idleBytes > keepBytes; c--) {
      while (idleBytes > keepBytes && !idle.get(c).isEmpty()) {
        idle.get(c).pollFirst().drop();
        idleBytes -= 1L << c;
        droppedBlocks++;
      }
    }
  }

  /** The pool's counters now. */
  public synchronized Stats stats() {
    return new Stats(
        freshBlocks, reusedBlocks, returnedBlocks, droppedBlocks, cleanerReturns, idleBytes, limitBytes, lentBytes,
        reclaims);
  }

  /** Zeroes the first {@code bytes} bytes of {@code buffer}, a direct buffer. */
  static void zero(ByteBuffer buffer, long bytes) {
    try (Pointer pointer = new Pointer(buffer)) {
      Pointer.memset(pointer, 0, bytes);
    }
  }

  private static MethodHandle freeHandle() {
    try {
      Class<?> unsafeClass = Class.forName("sun.misc.Unsafe");
      java.lang.reflect.Field field = unsafeClass.getDeclaredField("theUnsafe");
      field.setAccessible(true);
      return MethodHandles.lookup()
          .findVirtual(unsafeClass, "invokeCleaner", MethodType.methodType(void.class, ByteBuffer.class))
          .bindTo(field.get(null));
    } catch (ReflectiveOperationException | RuntimeException e) {
      return null; // no jdk.unsupported: dropped blocks are freed by the garbage collector
    }
  }

  private static void checkLimit(long limitBytes) {
    if (limitBytes < 0) {
      throw new InvalidArgumentException(
          RuntimeSettings.HOST_MEMORY_POOL_BYTES_KEY + " must be >= 0 bytes, got " + limitBytes
              + " (0 turns pooling off)");
    }
  }

  @Override
  public String toString() {
    return "HostMemoryPool(" + stats() + ")";
  }
}
