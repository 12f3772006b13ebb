package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The pool under a small direct-memory limit (a child JVM with {@code -XX:MaxDirectMemorySize=65m} and the
 * default 256 MiB bound): idle blocks of other size classes, and blocks of tensors nobody closed, must not
 * make an allocation fail that would succeed without the pool. (64 MiB would hold two 32 MiB tensors
 * exactly; each block takes {@link HostMemoryPool#ALIGNMENT} bytes more, to start its bytes aligned.)
 */
class HostMemoryPressureTest {
  private static final TensorType MIB_8 = TensorType.of(DType.F32, 2 << 20);
  private static final TensorType MIB_16 = TensorType.of(DType.F32, 4 << 20);
  private static final TensorType MIB_32 = TensorType.of(DType.F32, 8 << 20);

  @Test
  void idleAndUnclosedBlocksGiveWayWhenDirectMemoryRunsShort() throws Exception {
    ChildJvm.Result result =
        ChildJvm.run(HostMemoryPressureTest.class, List.of("-Xmx256m", "-XX:MaxDirectMemorySize=65m"));
    assertEquals(0, result.exitCode(), result.output());
    assertTrue(result.output().contains("pressure ok"), result.output());
  }

  /** The child: fails with a non-zero exit (an OutOfMemoryError) if the pool hoards direct memory. */
  public static void main(String[] args) {
    HostMemoryPool pool = new HostMemoryPool(256 << 20);
    // 56 MiB idle in three classes, then two 32 MiB tensors open at once: 88 MiB without dropping.
    HostTensor.uninitialized(MIB_32, pool).close();
    HostTensor.uninitialized(MIB_16, pool).close();
    HostTensor.uninitialized(MIB_8, pool).close();
    HostTensor first = HostTensor.uninitialized(MIB_32, pool);
    HostTensor second = HostTensor.uninitialized(MIB_32, pool);
    first.close();
    second.close();
    // Churn that never closes: the cleaner gives blocks back only after a collection.
    for (int i = 0; i < 40; i++) {
      try {
        HostTensor.zeros(i % 2 == 0 ? MIB_16 : MIB_32, pool);
      } catch (OutOfMemoryError e) {
        System.out.println("failed at " + i + ": " + pool.stats());
        throw e;
      }
    }
    System.out.println("pressure ok " + pool.stats());
  }
}
