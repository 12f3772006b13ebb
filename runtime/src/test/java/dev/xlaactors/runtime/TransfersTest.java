package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Device-to-device copies, copies between clients, and asynchronous transfers. */
class TransfersTest {
  private static XlaClient client;

  @BeforeAll
  static void open() {
    client = XlaClient.create();
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
  void aBufferMovesToAnotherClientThroughTheHost() {
    float[] values = random(1000, 2);
    try (XlaClient other = XlaClient.create();
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
