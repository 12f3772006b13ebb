package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.ExecutionFailedException;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.bytedeco.javacpp.Pointer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Pooled host memory on the real CPU plugin: reuse after close, zeroing, closed tensors, callback inputs
 * and downloads in reused (dirty) blocks, the cleaner fallback, the pool's bound and its config key.
 */
class HostMemoryPoolTest {
  /** 256 KiB: pooled, a whole size class. */
  private static final TensorType BLOCK = TensorType.of(DType.F32, 65_536);
  /** 200,000 bytes: pooled in the same 256 KiB class, which it does not fill. */
  private static final TensorType PART = TensorType.of(DType.F32, 50_000);

  private static final String CALLBACK =
      """
      func.func @main(%x: tensor<50000xf32>) -> tensor<50000xf32> {
        %1 = stablehlo.custom_call @xla_actors.host_callback(%x) {api_version = 4 : i32,
               backend_config = {callback = "f"}, has_side_effect = true} : (tensor<50000xf32>) -> tensor<50000xf32>
        %2 = stablehlo.negate %1 : tensor<50000xf32>
        return %2 : tensor<50000xf32>
      }
      """;

  private static XlaClient client;
  private static Executable callbackProgram;
  private static final ExecutorService answerers = Executors.newCachedThreadPool();

  @BeforeAll
  static void start() {
    client = XlaClient.create();
    callbackProgram = client.compile(CALLBACK);
  }

  @AfterAll
  static void stop() {
    answerers.shutdownNow();
    callbackProgram.close();
    if (identityProgram != null) {
      identityProgram.close();
    }
    client.close();
  }

  private static long address(HostTensor tensor) {
    try (Pointer pointer = new Pointer(tensor.data())) {
      return pointer.address();
    }
  }

  private static float[] filled(int n, float start) {
    float[] values = new float[n];
    for (int i = 0; i < n; i++) {
      values[i] = start + i;
    }
    return values;
  }

  /** Writes {@code value} into every float of a tensor the test owns (as the runtime fills new tensors). */
  private static void fill(HostTensor tensor, float value) {
    try (HostTensor.Hold hold = tensor.hold("fill")) {
      ByteBuffer bytes = hold.data();
      for (int i = 0; i < bytes.capacity() / 4; i++) {
        bytes.putFloat(4 * i, value);
      }
    }
  }

  private static void awaitGc(BooleanSupplier done, Duration limit) throws InterruptedException {
    long end = System.nanoTime() + limit.toNanos();
    while (!done.getAsBoolean() && System.nanoTime() < end) {
      System.gc();
      Thread.sleep(20);
    }
  }

  @Test
  void aClosedTensorsBlockIsTheNextTensorsOfItsClass() {
    HostMemoryPool pool = new HostMemoryPool(1 << 20);
    HostTensor first = HostTensor.uninitialized(BLOCK, pool);
    long firstAddress = address(first);
    first.close();
    HostTensor second = HostTensor.uninitialized(PART, pool); // smaller, same 256 KiB class
    assertEquals(firstAddress, address(second));
    HostMemoryPool.Stats stats = pool.stats();
    assertEquals(1, stats.freshBlocks());
    assertEquals(1, stats.reusedBlocks());
    assertEquals(0, stats.idleBytes());
    // A second open tensor of the class gets another block.
    HostTensor third = HostTensor.uninitialized(PART, pool);
    assertNotEquals(address(second), address(third));
    assertEquals(2, pool.stats().freshBlocks());
    second.close();
    third.close();
    assertEquals(2 * 256 << 10, pool.stats().idleBytes());
  }

  @Test
  void zerosFromAReusedDirtyBlockAreZeros() {
    HostMemoryPool pool = new HostMemoryPool(1 << 20);
    HostTensor dirty = HostTensor.uninitialized(BLOCK, pool);
    fill(dirty, 7f);
    long block = address(dirty);
    dirty.close();
    HostTensor zeros = HostTensor.zeros(PART, pool);
    assertEquals(block, address(zeros));
    assertArrayEquals(new float[50_000], zeros.toFloatArray());
    assertEquals(200_000, zeros.toByteArray().length);
  }

  @Test
  void aFilledTensorTakesAPooledBlockZeroedWhereFillDidNotWrite() {
    HostTensor dirty = HostTensor.uninitialized(BLOCK);
    fill(dirty, 7f);
    long block = address(dirty);
    dirty.close();
    HostTensor filled = HostTensor.filled(PART, b -> {
      assertEquals(0, b.position());
      assertEquals(200_000, b.limit());
      b.putFloat(4, 3f);
    });
    assertEquals(block, address(filled), "the block the dirty tensor gave back");
    float[] expected = new float[50_000];
    expected[1] = 3f;
    assertArrayEquals(expected, filled.toFloatArray());
    assertTrue(filled.data().isReadOnly());
    filled.close();
    // A fill that throws: the tensor goes back, the exception reaches the caller.
    IllegalStateException thrown = assertThrows(IllegalStateException.class, () -> HostTensor.filled(BLOCK, b -> {
      throw new IllegalStateException("no input");
    }));
    assertEquals("no input", thrown.getMessage());
    HostTensor small = HostTensor.filled(TensorType.of(DType.F32, 2), b -> b.putFloat(0, 1f));
    assertArrayEquals(new float[] {1f, 0f}, small.toFloatArray());
  }

  @Test
  void aClosedTensorRefusesReadsAndUsesButKeepsItsType() {
    HostTensor pooled = HostTensor.zeros(BLOCK);
    HostTensor small = HostTensor.vector(1f, 2f);
    for (HostTensor tensor : List.of(pooled, small)) {
      assertFalse(tensor.isClosed());
      tensor.close();
      assertTrue(tensor.isClosed());
      IllegalStateException read = assertThrows(IllegalStateException.class, tensor::toFloatArray);
      assertTrue(read.getMessage().contains("the tensor was closed"), read.getMessage());
      assertTrue(read.getMessage().contains(tensor.type().toString()), read.getMessage());
      assertThrows(IllegalStateException.class, tensor::data);
      assertThrows(IllegalStateException.class, tensor::toByteArray);
      IllegalStateException upload = assertThrows(IllegalStateException.class, () -> client.upload(tensor));
      assertTrue(upload.getMessage().startsWith("cannot upload"), upload.getMessage());
      assertTrue(tensor.toString().contains("closed"));
      assertEquals(tensor.type(), tensor.type()); // metadata still answers
    }
  }

  @Test
  void closingTwiceGivesTheMemoryBackOnce() {
    HostMemoryPool pool = new HostMemoryPool(1 << 20);
    HostTensor tensor = HostTensor.uninitialized(BLOCK, pool);
    tensor.close();
    assertDoesNotThrow(tensor::close);
    assertEquals(1, pool.stats().returnedBlocks());
    assertEquals(256 << 10, pool.stats().idleBytes());
    // Both of the next two tensors must not get the one block.
    HostTensor a = HostTensor.uninitialized(BLOCK, pool);
    HostTensor b = HostTensor.uninitialized(BLOCK, pool);
    assertNotEquals(address(a), address(b));
  }

  @Test
  void aReadInProgressKeepsTheMemoryUntilItEnds() {
    HostMemoryPool pool = new HostMemoryPool(1 << 20);
    HostTensor tensor = HostTensor.uninitialized(BLOCK, pool);
    try (HostTensor.Hold hold = tensor.hold("read")) {
      tensor.close();
      assertEquals(0, pool.stats().returnedBlocks(), "given back while held");
    }
    assertEquals(1, pool.stats().returnedBlocks());
  }

  @Test
  void theBoundLimitsIdleBytesAndDropsTheRest() {
    HostMemoryPool pool = new HostMemoryPool(512 << 10); // two 256 KiB blocks
    List<HostTensor> tensors =
        List.of(HostTensor.uninitialized(BLOCK, pool), HostTensor.uninitialized(BLOCK, pool), HostTensor.uninitialized(BLOCK, pool));
    tensors.forEach(HostTensor::close);
    HostMemoryPool.Stats stats = pool.stats();
    assertEquals(512 << 10, stats.idleBytes());
    assertEquals(2, stats.returnedBlocks());
    assertEquals(1, stats.droppedBlocks());
    pool.setLimitBytes(256 << 10);
    assertEquals(256 << 10, pool.stats().idleBytes());
    assertEquals(2, pool.stats().droppedBlocks());
    pool.setLimitBytes(0);
    assertEquals(0, pool.stats().idleBytes());
    // With a bound of 0 large tensors get memory of their own, as before the pool.
    HostTensor own = HostTensor.zeros(BLOCK, pool);
    own.close();
    assertEquals(0, pool.stats().idleBytes());
    assertEquals(3, pool.stats().freshBlocks());
  }

  @Test
  void smallTensorsDoNotUseThePool() {
    HostMemoryPool pool = new HostMemoryPool(1 << 20);
    HostTensor small = HostTensor.uninitialized(TensorType.of(DType.F32, 1024), pool); // 4 KiB
    small.close();
    assertEquals(new HostMemoryPool.Stats(0, 0, 0, 0, 0, 0, 1 << 20, 0, 0), pool.stats());
  }

  @Test
  void anUnclosedTensorGoesBackWhenItAndItsViewsAreUnreachable() throws InterruptedException {
    HostMemoryPool pool = new HostMemoryPool(1 << 20);
    Object[] holder = {HostTensor.uninitialized(BLOCK, pool), null};
    holder[1] = ((HostTensor) holder[0]).data(); // a view outlives its tensor
    holder[0] = null;
    awaitGc(() -> pool.stats().cleanerReturns() > 0, Duration.ofMillis(500));
    assertEquals(0, pool.stats().cleanerReturns(), "memory given back while a view could still read it");
    holder[1] = null;
    awaitGc(() -> pool.stats().cleanerReturns() > 0, Duration.ofSeconds(20));
    assertEquals(1, pool.stats().cleanerReturns());
    assertEquals(256 << 10, pool.stats().idleBytes());
  }

  @Test
  void aViewOfAClosedTensorStaysReadable() {
    HostMemoryPool pool = new HostMemoryPool(0); // nothing kept: the block is dropped at close
    HostTensor tensor = HostTensor.zeros(BLOCK, pool);
    ByteBuffer view = tensor.data();
    tensor.close();
    System.gc();
    assertEquals(0f, view.getFloat(4 * 65_535)); // still the block's memory, never freed under the view
  }

  @Test
  void callbackInputsClosedInsideTheFunctionDoNotCorruptTheCall() {
    long reusedBefore = HostMemoryPool.shared().stats().reusedBlocks();
    for (int round = 0; round < 4; round++) {
      float[] x = filled(50_000, round * 100_000f);
      // The function reads its input, closes it, and answers with a new tensor.
      HostCallSink closesAndAnswersNew =
          call -> {
            HostTensor input = call.inputs().get(0);
            float[] values = input.toFloatArray();
            input.close();
            for (int i = 0; i < values.length; i++) {
              values[i] *= 2;
            }
            call.complete(List.of(HostTensor.ofFloats(values)));
          };
      // The function answers with its input, on another thread, and closes it once the call is answered.
      HostCallSink echoesThenCloses =
          call -> answerers.submit(() -> {
            call.complete(call.inputs());
            call.inputs().forEach(HostTensor::close);
          });
      float[] doubled = run(closesAndAnswersNew, x);
      float[] echoed = run(echoesThenCloses, x);
      for (int i = 0; i < x.length; i++) {
        assertEquals(-2 * x[i], doubled[i]);
        assertEquals(-x[i], echoed[i]);
      }
    }
    assertTrue(HostMemoryPool.shared().stats().reusedBlocks() > reusedBefore, "callback inputs never reused a block");
  }

  @Test
  void returningAClosedInputFailsTheCallWithAClearMessage() {
    HostCallSink closesWhatItReturns =
        call -> {
          call.inputs().forEach(HostTensor::close);
          call.complete(call.inputs());
        };
    ExecutionFailedException e =
        assertThrows(ExecutionFailedException.class, () -> run(closesWhatItReturns, filled(50_000, 0)));
    assertTrue(e.getMessage().contains("returned a closed tensor f32[50000] as output 0"), e.getMessage());
  }

  private static float[] run(HostCallSink sink, float[] x) {
    try (RunContext context = RunContext.withHostCalls(client.plugin(), 77, sink, Duration.ofSeconds(20))) {
      List<HostTensor> out = callbackProgram.run(List.of(HostTensor.ofFloats(x)), context);
      try (HostTensor result = out.get(0)) {
        return result.toFloatArray();
      }
    }
  }

  @Test
  void downloadsIntoReusedDirtyBlocksAreExact() throws Exception {
    float[] values = filled(50_000, -25_000f);
    try (DeviceBuffer buffer = client.upload(HostTensor.ofFloats(values))) {
      // toHost, toHostAsync and run each download into the block the dirty tensor just gave back.
      for (int way = 0; way < 3; way++) {
        HostTensor dirty = HostTensor.uninitialized(BLOCK);
        fill(dirty, Float.NaN);
        long block = address(dirty);
        dirty.close();
        HostTensor downloaded =
            switch (way) {
              case 0 -> buffer.toHost();
              case 1 -> buffer.toHostAsync().get(30, TimeUnit.SECONDS);
              default -> identity().run(HostTensor.ofFloats(values)).get(0);
            };
        assertEquals(block, address(downloaded), "download " + way + " did not reuse the dirty block");
        assertArrayEquals(values, downloaded.toFloatArray(), "download " + way);
        assertEquals(PART, downloaded.type());
        downloaded.close();
      }
    }
  }

  private static Executable identityProgram;

  private static synchronized Executable identity() {
    if (identityProgram == null) {
      identityProgram =
          client.compile(
              "func.func @main(%x: tensor<50000xf32>) -> tensor<50000xf32> {\n  return %x : tensor<50000xf32>\n}\n");
    }
    return identityProgram;
  }

  @Test
  void aTensorClosedRightAfterAnAsyncUploadStartsStillArrivesIntact() throws Exception {
    float[] values = filled(65_536, 3f);
    for (int i = 0; i < 8; i++) {
      HostTensor tensor = HostTensor.uninitialized(BLOCK);
      try (HostTensor.Hold hold = tensor.hold("fill")) {
        hold.data().asFloatBuffer().put(values);
      }
      var upload = client.uploadAsync(tensor, client.devices().get(0));
      tensor.close(); // the upload holds the memory until the plugin is done reading it
      HostTensor dirtier = HostTensor.uninitialized(BLOCK); // may take the block once it is given back
      fill(dirtier, -1f);
      try (DeviceBuffer buffer = upload.get(30, TimeUnit.SECONDS);
          HostTensor back = buffer.toHost()) {
        assertArrayEquals(values, back.toFloatArray());
      }
      dirtier.close();
    }
  }

  @Test
  void theConfigKeyIsReadAndBadValuesAreRefusedNamingIt() {
    String key = RuntimeSettings.HOST_MEMORY_POOL_BYTES_KEY;
    assertEquals("xla-actors.runtime.host-memory.pool-bytes", key);
    assertEquals(256L << 20, RuntimeSettings.load().hostMemoryPoolBytes());
    RuntimeSettings set = RuntimeSettings.fromConfig(ConfigFactory.parseString(key + " = 32 MiB").withFallback(ConfigFactory.load()));
    assertEquals(32L << 20, set.hostMemoryPoolBytes());
    for (String bad : List.of("-1", "lots", "[1, 2]")) {
      XlaException e =
          assertThrows(
              XlaException.class,
              () -> RuntimeSettings.fromConfig(ConfigFactory.parseString(key + " = " + bad).withFallback(ConfigFactory.load())),
              bad);
      assertTrue(e.getMessage().contains(key), e.getMessage());
      assertTrue(e.getMessage().contains(">= 0") || e.getMessage().contains("size in bytes"), e.getMessage());
    }
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> new HostMemoryPool(-1));
    assertTrue(e.getMessage().contains(key), e.getMessage());
  }

  @Test
  void theClientAppliesItsSettingsBoundToTheSharedPool() {
    long before = HostMemoryPool.shared().limitBytes();
    try (XlaClient other = XlaClient.create(RuntimeSettings.load().withHostMemoryPoolBytes(8 << 20))) {
      assertEquals(8 << 20, HostMemoryPool.shared().limitBytes());
      assertTrue(HostMemoryPool.shared().stats().idleBytes() <= 8 << 20);
    } finally {
      HostMemoryPool.shared().setLimitBytes(before);
    }
  }

  @Test
  void whatThePoolLendsIsBoundedByReclaimingUnclosedUnreachableTensors() {
    HostMemoryPool pool = new HostMemoryPool(1 << 20);
    TensorType block = TensorType.of(DType.F32, 16 << 10); // 64 KiB, one block each
    long most = 0;
    for (int i = 0; i < 400; i++) { // 25 MiB of tensors never closed
      HostTensor.uninitialized(block, pool);
      most = Math.max(most, pool.stats().lentBytes());
    }
    // Quiet, this stays within the bound and a block. A reclaim stops waiting when the cleaner gives nothing
    // back for 200 ms (50 ms once some came), and on a loaded machine the JVM's one cleaner thread can be that
    // late: what is still lent then counts as in use and the next reclaim waits for twice it, 2 x (1 MiB + 2
    // blocks) = 2.25 MiB (seen under load, and 1.5 MiB). Without reclaims 25 MiB would be lent.
    long oneFruitlessReclaim = 2 * ((1 << 20) + 2 * (64 << 10));
    assertTrue(most <= oneFruitlessReclaim + (64 << 10), "lent " + most + " bytes past the 1 MiB bound");
    assertTrue(pool.stats().reclaims() >= 1, pool.stats().toString());
  }

  @Test
  void tensorsReallyInUseCostAReclaimPerDoublingNotPerTensor() {
    HostMemoryPool pool = new HostMemoryPool(1 << 20);
    TensorType block = TensorType.of(DType.F32, 16 << 10);
    List<HostTensor> held = new java.util.ArrayList<>();
    for (int i = 0; i < 256; i++) { // 16 MiB held: 16 times the bound
      held.add(HostTensor.uninitialized(block, pool));
    }
    assertEquals(256L * (64 << 10), pool.stats().lentBytes());
    assertTrue(pool.stats().reclaims() <= 6, "reclaims: " + pool.stats().reclaims());
    held.forEach(HostTensor::close);
    assertEquals(0, pool.stats().lentBytes());
  }
}
