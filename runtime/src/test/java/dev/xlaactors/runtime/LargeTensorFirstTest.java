package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A large tensor (64 KiB or more: aligned memory, whose address JavaCPP reads) made before anything else
 * of the runtime loaded the native library: it failed with UnsatisfiedLinkError. Runs in a fresh JVM,
 * since any earlier test would have loaded the library.
 */
class LargeTensorFirstTest {
  @Test
  void aLargeTensorCanBeTheProgramsFirstNativeUse() throws Exception {
    ChildJvm.Result r = ChildJvm.run(LargeTensorFirstTest.class, List.of());
    assertEquals(0, r.exitCode(), r.output());
    assertTrue(r.output().contains("sum=65536.0"), r.output());
  }

  /** The child: a 256 KiB tensor first of all. */
  public static void main(String[] args) {
    float[] ones = new float[1 << 16];
    java.util.Arrays.fill(ones, 1f);
    float sum = 0;
    for (float v : HostTensor.ofFloats(ones, ones.length).toFloatArray()) {
      sum += v;
    }
    System.out.println("sum=" + sum);
  }
}
