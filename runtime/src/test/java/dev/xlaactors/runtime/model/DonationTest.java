package dev.xlaactors.runtime.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Donation: only buffers passed as Argument.donated are given to a run; the rest stay valid. */
class DonationTest {
  static final int ROWS = 1024;
  static final int WIDTH = 256; // a 1 MiB cache
  // cache' = dynamic_update_slice(cache, new, pos): a KV-cache-like update, the cache aliased to the output.
  static final String UPDATE = """
      func.func @main(%cache: tensor<1024x256xf32> {tf.aliasing_output = 0 : i32}, %new: tensor<1x256xf32>,
                      %pos: tensor<i32>) -> tensor<1024x256xf32> {
        %zero = stablehlo.constant dense<0> : tensor<i32>
        %r = stablehlo.dynamic_update_slice %cache, %new, %pos, %zero
            : (tensor<1024x256xf32>, tensor<1x256xf32>, tensor<i32>, tensor<i32>) -> tensor<1024x256xf32>
        return %r : tensor<1024x256xf32>
      }
      """;
  // The same step with a bound projection w: cache'[pos] = x . w.
  static final String PROJECTED_UPDATE = """
      func.func @main(%w: tensor<256x256xf32>, %cache: tensor<1024x256xf32> {jax.buffer_donor = true},
                      %x: tensor<1x256xf32>, %pos: tensor<i32>) -> tensor<1024x256xf32> {
        %zero = stablehlo.constant dense<0> : tensor<i32>
        %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<1x256xf32>, tensor<256x256xf32>) -> tensor<1x256xf32>
        %r = stablehlo.dynamic_update_slice %cache, %y, %pos, %zero
            : (tensor<1024x256xf32>, tensor<1x256xf32>, tensor<i32>, tensor<i32>) -> tensor<1024x256xf32>
        return %r : tensor<1024x256xf32>
      }
      """;

  private static XlaClient client;
  private static Executable update;

  @BeforeAll
  static void open() {
    client = XlaClient.create();
    update = client.compile(UPDATE);
  }

  @AfterAll
  static void close() {
    update.close();
    client.close();
  }

  static HostTensor row(float value) {
    float[] v = new float[WIDTH];
    java.util.Arrays.fill(v, value);
    return HostTensor.ofFloats(v, 1, WIDTH);
  }

  @Test
  void theProgramTextSaysWhichParametersMayBeDonated() {
    assertEquals(Set.of(0), update.donatableParameters());
    try (Executable projected = client.compile(PROJECTED_UPDATE)) {
      assertEquals(Set.of(1), projected.donatableParameters());
    }
  }

  /** What {@link #donateSteps} saw: the last cache, the steps whose output took the donated memory, the address at step 1. */
  record DonatedSteps(DeviceBuffer cache, int sameMemory, long addressAtStep1) {}

  /**
   * {@code steps} runs of {@code update} ({@link #UPDATE}, compiled for {@code on}) over a zeroed cache on
   * {@code on}, each donating the cache it got: step s writes s + 1 into row s.
   */
  static DonatedSteps donateSteps(XlaClient on, Executable update, int steps) {
    DeviceBuffer cache = on.upload(HostTensor.zeros(TensorType.of(DType.F32, ROWS, WIDTH)));
    long address = -1;
    int sameMemory = 0;
    for (int step = 0; step < steps; step++) {
      DeviceBuffer previous = cache;
      long before = previous.unsafeDevicePointer();
      cache = update.execute(Argument.donated(previous), Argument.of(row(step + 1)), Argument.of(HostTensor.scalar(step))).get(0);
      assertTrue(previous.isDonated() && previous.isClosed());
      if (cache.unsafeDevicePointer() == before) {
        sameMemory++;
      }
      if (step == 1) {
        address = cache.unsafeDevicePointer();
      }
    }
    return new DonatedSteps(cache, sameMemory, address);
  }

  /** Rows below {@code steps} hold their step's value (row r: r + 1), the others 0, at both ends of each row. */
  static void assertRowsWritten(DeviceBuffer cache, int steps) {
    float[] values = cache.toHost().toFloatArray();
    for (int r = 0; r < ROWS; r++) {
      float expected = r < steps ? r + 1 : 0;
      assertEquals(expected, values[r * WIDTH], "row " + r);
      assertEquals(expected, values[r * WIDTH + WIDTH - 1], "row " + r);
    }
  }

  @Test
  void aDonatedCacheIsUpdatedInPlaceForAHundredSteps() {
    // The first output may get fresh memory (the upload's memory can be the host tensor's own); from
    // then on each step's output must be the donated cache's memory itself.
    DonatedSteps done = donateSteps(client, update, 100);
    assertTrue(done.sameMemory() >= 99, "the output reused the donated memory in " + done.sameMemory() + " of 100 steps");
    assertEquals(done.addressAtStep1(), done.cache().unsafeDevicePointer(), "one cache memory from step 1 on");
    assertRowsWritten(done.cache(), 100);
    done.cache().close();
  }

  @Test
  void aBufferNotDonatedStaysValidAndUnchangedEvenWhereTheParameterIsAliased() {
    try (DeviceBuffer cache = client.upload(HostTensor.zeros(TensorType.of(DType.F32, ROWS, WIDTH)))) {
      try (DeviceBuffer out = update.execute(cache, client.upload(row(7)), client.upload(HostTensor.scalar(3))).get(0)) {
        assertNotEquals(cache.unsafeDevicePointer(), out.unsafeDevicePointer(), "PJRT copied instead of donating");
        assertEquals(7f, out.toHost().toFloatArray()[3 * WIDTH]);
      }
      assertFalse(cache.isDonated());
      assertEquals(0f, cache.toHost().toFloatArray()[3 * WIDTH], "the caller's cache is unchanged");
    }
  }

  @Test
  void usingADonatedBufferFailsNamingTheRunItWentTo() {
    DeviceBuffer cache = client.upload(HostTensor.zeros(TensorType.of(DType.F32, ROWS, WIDTH)));
    try (DeviceBuffer out = update.execute(Argument.donated(cache), Argument.of(row(1)), Argument.of(HostTensor.scalar(0))).get(0)) {
      XlaException used = assertThrows(XlaException.class, cache::toHost);
      assertEquals(ErrorCode.FAILED_PRECONDITION, used.code());
      assertTrue(used.getMessage().matches(
          "buffer f32\\[1024,256\\] was donated to run \\d+ of executable '.*' \\(argument 0 of @main\\); use the run's output instead"),
          used.getMessage());
      XlaException again = assertThrows(XlaException.class,
          () -> update.execute(Argument.donated(cache), Argument.of(row(1)), Argument.of(HostTensor.scalar(0))));
      assertTrue(again.getMessage().contains("was donated to run"), again.getMessage());
      XlaException read = assertThrows(XlaException.class,
          () -> update.execute(Argument.of(cache), Argument.of(row(1)), Argument.of(HostTensor.scalar(0))));
      assertTrue(read.getMessage().contains("was donated to run"), read.getMessage());
    }
  }

  @Test
  void donatingWhereTheProgramDoesNotAliasOrABufferPassedTwiceOrASharedBufferIsRefused() {
    try (DeviceBuffer cache = client.upload(HostTensor.zeros(TensorType.of(DType.F32, ROWS, WIDTH)));
        DeviceBuffer fresh = client.upload(row(2))) {
      InvalidArgumentException notAliased = assertThrows(InvalidArgumentException.class,
          () -> update.execute(Argument.of(cache), Argument.donated(fresh), Argument.of(HostTensor.scalar(0))));
      assertTrue(notAliased.getMessage().startsWith("argument 1 of @main (f32[1,256]) is donated, but the program does not alias"),
          notAliased.getMessage());
      assertFalse(fresh.isClosed(), "a refused donation leaves the buffer its owner's");
      DeviceBuffer share = cache.share();
      InvalidArgumentException shared = assertThrows(InvalidArgumentException.class,
          () -> update.execute(Argument.donated(cache), Argument.of(row(1)), Argument.of(HostTensor.scalar(0))));
      assertTrue(shared.getMessage().contains("is shared"), shared.getMessage());
      share.close();
      assertFalse(cache.isClosed());
    }
  }

  @Test
  void aModelRefusesToDonateItsBoundParameterAndUpdatesADonatedCache() {
    float[] w = ModelTest.random(WIDTH * WIDTH, 9);
    try (Executable exe = client.compile(PROJECTED_UPDATE);
        DeviceBuffer weights = client.upload(HostTensor.ofFloats(w, WIDTH, WIDTH));
        Model model = Model.bind(exe, List.of("w", "cache", "x", "pos"), Map.of("w", weights))) {
      assertEquals(Set.of("cache"), model.donatableInputs());
      DeviceBuffer cache = client.upload(HostTensor.zeros(TensorType.of(DType.F32, ROWS, WIDTH)));
      float[] x = ModelTest.random(WIDTH, 10);
      for (int step = 0; step < 5; step++) {
        DeviceBuffer previous = cache;
        cache = model.execute(List.of(Argument.donated(cache), Argument.of(HostTensor.ofFloats(x, 1, WIDTH)),
            Argument.of(HostTensor.scalar(step))), null).get(0);
        if (step == 4) {
          XlaException used = assertThrows(XlaException.class, previous::toHost);
          assertEquals("buffer f32[1024,256] was donated to run 5 of model '" + model.name()
              + "' (argument 1 of @main); use the run's output instead", used.getMessage());
        }
      }
      float[] expected = ModelTest.times(x, w, WIDTH, WIDTH);
      float[] values = cache.toHost().toFloatArray();
      assertArrayEquals(expected, java.util.Arrays.copyOfRange(values, 4 * WIDTH, 5 * WIDTH), 1e-3f);
      // A model whose cache input has w's type, to try donating the bound w itself.
      String sameTypes = PROJECTED_UPDATE.replace("1024x256", "256x256");
      try (Executable exe2 = client.compile(sameTypes);
          Model model2 = Model.bind(exe2, List.of("w", "cache", "x", "pos"), Map.of("w", weights))) {
        InvalidArgumentException bound = assertThrows(InvalidArgumentException.class, () -> model2.execute(List.of(
            Argument.donated(weights), Argument.of(HostTensor.ofFloats(x, 1, WIDTH)), Argument.of(HostTensor.scalar(0))), null));
        assertTrue(bound.getMessage().contains("donates the buffer bound to parameter 'w': bound parameters are shared"),
            bound.getMessage());
        assertFalse(weights.isClosed(), "the refused donation left the weights alone");
      }
      cache.close();
    }
  }

  /**
   * A jax.export artifact (bytecode, not read by the runtime) of a cache update exported with
   * donate_argnums=1: the donatable parameter comes from the compiled module's aliases, and a donated
   * cache keeps its device memory across steps, as for text programs.
   */
  @Test
  void aBytecodeExportWithDonateArgnumsDonatesItsCacheInPlace() {
    JaxExport export = JaxExportArtifactTest.load("donated");
    int rows = 64;
    int width = 16;
    float[] w = new float[width * width];
    for (int i = 0; i < w.length; i++) {
      w[i] = (i % 7) - 3;
    }
    try (Executable exe = export.compile(client);
        DeviceBuffer weights = client.upload(HostTensor.ofFloats(w, width, width))) {
      assertEquals(Set.of(1), exe.donatableParameters(), "read from the compiled module");
      assertEquals(Set.of(1), exe.donatableParameters(), "cached");
      DeviceBuffer cache = client.upload(HostTensor.zeros(TensorType.of(DType.F32, rows, width)));
      long address = -1;
      for (int step = 0; step < rows; step++) {
        float[] x = new float[width];
        java.util.Arrays.fill(x, step + 1);
        DeviceBuffer previous = cache;
        long before = previous.unsafeDevicePointer();
        List<DeviceBuffer> out = exe.execute(Argument.of(weights), Argument.donated(previous),
            Argument.of(HostTensor.ofFloats(x, 1, width)), Argument.of(HostTensor.scalar(step)));
        cache = out.get(0);
        out.get(1).close();
        assertTrue(previous.isDonated() && previous.isClosed());
        assertEquals(before, cache.unsafeDevicePointer(), "step " + step + " updated the donated cache in place");
        if (step == 0) {
          address = cache.unsafeDevicePointer();
        }
      }
      assertEquals(address, cache.unsafeDevicePointer());
      float[] values = cache.toHost().toFloatArray();
      for (int r = 0; r < rows; r++) {
        for (int c = 0; c < width; c++) {
          float expected = 0;
          for (int k = 0; k < width; k++) {
            expected += (r + 1) * w[k * width + c];
          }
          assertEquals(expected, values[r * width + c], 1e-3, "row " + r + " column " + c);
        }
      }
      DeviceBuffer other = client.upload(HostTensor.ofFloats(w, width, width));
      DeviceBuffer cacheNow = cache;
      InvalidArgumentException refused = assertThrows(InvalidArgumentException.class,
          () -> exe.execute(Argument.donated(other), Argument.of(cacheNow),
              Argument.of(HostTensor.zeros(TensorType.of(DType.F32, 1, width))), Argument.of(HostTensor.scalar(0))));
      assertTrue(refused.getMessage().contains("does not alias that parameter") && refused.getMessage().contains("[1]"),
          refused.getMessage());
      assertFalse(other.isDonated(), "a refused donation leaves the buffer to its caller");
      other.close();
      cache.close();
    }
  }
}
