package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.XlaException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.bytedeco.javacpp.Pointer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Device-to-device copies, copies between clients, and asynchronous transfers. */
class TransfersTest {
  /** These tests are about clients of several devices, whatever the configured count. */
  private static final RuntimeSettings SEVERAL_DEVICES = RuntimeSettings.load().withCpuDeviceCount(4);

  private static XlaClient client;

  @BeforeAll
  static void open() {
    client = XlaClient.create(SEVERAL_DEVICES);
  }

  @AfterAll
  static void close() {
    client.close();
  }

  private static float[] random(int n, long seed) {
    Random r = new Random(seed);
    float[] v = new float[n];
    for (int i = 0; i < n; i++) {
      v[i] = r.nextFloat() * 2 - 1;
    }
    return v;
  }

  @Test
  void aBufferCopiesToEveryOtherDeviceBitExactly() {
    float[] values = random(1 << 18, 1); // 1 MiB
    Device from = client.devices().get(0);
    try (DeviceBuffer source = client.upload(HostTensor.ofFloats(values), from)) {
      for (Device to : client.devices().subList(1, client.devices().size())) {
        try (DeviceBuffer copy = source.copyToDevice(to)) {
          assertEquals(to, copy.device());
          assertEquals(source.type(), copy.type());
          assertArrayEquals(values, copy.toHost().toFloatArray());
        }
      }
      assertArrayEquals(values, source.toHost().toFloatArray(), "the source is unchanged");
    }
  }

  @Test
  void aLargeUploadUsesTheTensorsMemoryWhichStaysItsUntilTheBufferCloses() {
    float[] values = random(1 << 18, 3); // 1 MiB: uploaded in place
    HostMemoryPool pool = HostMemoryPool.shared();
    HostTensor tensor = HostTensor.ofFloats(values).copy(); // copy(): in the pool's memory
    String twice = """
        func.func @main(%x: tensor<262144xf32>) -> tensor<262144xf32> {
          %y = stablehlo.add %x, %x : tensor<262144xf32>
          return %y : tensor<262144xf32>
        }
        """;
    try (DeviceBuffer buffer = client.upload(tensor); Executable exe = client.compile(twice)) {
      // Closed at once, the tensor's memory must not go back to the pool while the buffer uses it: new
      // tensors of the same size get other memory, and writing them leaves the buffer's values alone.
      long uploaded = new Pointer(tensor.data()).address();
      tensor.close();
      float[] sevens = new float[values.length];
      Arrays.fill(sevens, 7f);
      List<HostTensor> others = new ArrayList<>();
      for (int i = 0; i < 8; i++) {
        others.add(HostTensor.ofFloats(sevens).copy()); // from the pool too
        assertNotEquals(uploaded, new Pointer(others.get(i).data()).address(), "the uploaded tensor's block");
      }
      try (HostTensor other = others.get(0)) {
        assertArrayEquals(values, buffer.toHost().toFloatArray());
        float[] doubled = values.clone();
        for (int i = 0; i < doubled.length; i++) {
          doubled[i] *= 2;
        }
        assertArrayEquals(doubled, exe.execute(buffer).get(0).toHost().toFloatArray());
        assertArrayEquals(sevens, other.toFloatArray());
      }
      others.forEach(HostTensor::close);
    }
    // Closed, the buffer gives the memory back (when the plugin says it is done with it).
    long deadline = System.nanoTime() + 5_000_000_000L;
    long reused = pool.stats().reusedBlocks();
    while (System.nanoTime() < deadline) {
      try (HostTensor again = HostTensor.zeros(TensorType.of(DType.F32, values.length))) {
        if (pool.stats().reusedBlocks() > reused) {
          return;
        }
        reused = pool.stats().reusedBlocks();
      }
    }
    throw new AssertionError("the uploaded tensor's block never went back to the pool: " + pool.stats());
  }

  @Test
  void aProgramThatDonatesItsArgumentNeverWritesIntoAnUploadedTensor() {
    // tf.aliasing_output: the argument's buffer may become the result's (JAX's donate_argnums).
    String donating = """
        func.func @main(%x: tensor<262144xf32> {tf.aliasing_output = 0 : i32}) -> tensor<262144xf32> {
          %y = stablehlo.add %x, %x : tensor<262144xf32>
          return %y : tensor<262144xf32>
        }
        """;
    float[] values = random(1 << 18, 5);
    HostTensor tensor = HostTensor.ofFloats(values).copy(); // pooled memory: uploaded in place
    try (Executable exe = client.compile(donating); DeviceBuffer buffer = client.upload(tensor)) {
      float[] doubled = values.clone();
      for (int i = 0; i < doubled.length; i++) {
        doubled[i] *= 2;
      }
      assertArrayEquals(doubled, exe.execute(dev.xlaactors.runtime.model.Argument.donated(buffer)).get(0).toHost().toFloatArray());
      assertArrayEquals(values, tensor.toFloatArray(), "the uploaded tensor is unchanged");
      // Donated explicitly: the buffer is gone, and says where it went.
      XlaException donated = assertThrows(XlaException.class, buffer::toHost);
      assertTrue(donated.getMessage().contains("donated"), donated.getMessage());
    }
  }

  @Test
  void aLargeTensorOfItsOwnUploadedInPlaceOutlivesItsTensor() {
    float[] values = random(1 << 18, 4);
    DeviceBuffer buffer = client.upload(HostTensor.ofFloats(values)); // memory of its own, freed by the GC
    try (buffer) {
      for (int i = 0; i < 3; i++) {
        System.gc(); // the tensor is unreachable now; its memory must live while the buffer uses it
        byte[][] garbage = new byte[64][];
        for (int j = 0; j < garbage.length; j++) {
          garbage[j] = new byte[1 << 18];
        }
      }
      assertArrayEquals(values, buffer.toHost().toFloatArray());
    }
  }

  @Test
  void aBufferMovesToAnotherClientThroughTheHost() {
    float[] values = random(1000, 2);
    try (XlaClient other = XlaClient.create(SEVERAL_DEVICES);
        DeviceBuffer source = client.upload(HostTensor.ofFloats(values));
        DeviceBuffer moved = source.copyToDevice(other.devices().get(2))) {
      assertNotSame(client, moved.client());
      assertEquals(other.devices().get(2), moved.device());
      assertArrayEquals(values, moved.toHost().toFloatArray());
      try (Executable add = other.compile(TestPrograms.ADD_F32_4)) {
        assertEquals(other, add.client());
      }
    }
  }

  @Test
  void asynchronousUploadsAndDownloadsCompleteWithTheData() throws Exception {
    List<CompletableFuture<DeviceBuffer>> uploads = new ArrayList<>();
    List<float[]> values = new ArrayList<>();
    for (int i = 0; i < 16; i++) {
      float[] v = random(4096 + i, 10 + i);
      values.add(v);
      uploads.add(client.uploadAsync(HostTensor.ofFloats(v), client.devices().get(i % client.devices().size())));
    }
    List<CompletableFuture<HostTensor>> downloads = new ArrayList<>();
    List<DeviceBuffer> buffers = new ArrayList<>();
    for (CompletableFuture<DeviceBuffer> upload : uploads) {
      DeviceBuffer b = upload.get(30, TimeUnit.SECONDS);
      buffers.add(b);
      downloads.add(b.toHostAsync());
    }
    for (int i = 0; i < downloads.size(); i++) {
      assertArrayEquals(values.get(i), downloads.get(i).get(30, TimeUnit.SECONDS).toFloatArray());
      assertEquals(client.devices().get(i % client.devices().size()), buffers.get(i).device());
    }
    buffers.forEach(DeviceBuffer::close);
  }

  @Test
  void anAsynchronousDownloadOutlivesCloseOfItsBuffer() throws Exception {
    float[] v = random(1 << 16, 3);
    DeviceBuffer b = client.upload(HostTensor.ofFloats(v));
    CompletableFuture<HostTensor> download = b.toHostAsync();
    b.close(); // the download holds its own reference until it is done
    assertArrayEquals(v, download.get(30, TimeUnit.SECONDS).toFloatArray());
    assertThrows(IllegalStateException.class, b::toHostAsync);
  }

  @Test
  void readyCompletesForComputedBuffers() throws Exception {
    try (Executable add = client.compile(TestPrograms.ADD_F32_4);
        DeviceBuffer a = client.upload(HostTensor.ofFloats(new float[] {1, 2, 3, 4}))) {
      List<DeviceBuffer> out = add.execute(a, a);
      out.get(0).ready().get(30, TimeUnit.SECONDS);
      assertTrue(out.get(0).ready().isDone());
      out.forEach(DeviceBuffer::close);
    }
  }
}
