package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Handles close idempotently, refuse use after close, keep their parents alive, and never leak. */
class HandleLifecycleTest {
  @Test
  void closingTwiceIsHarmlessAndUseAfterCloseIsIllegalState() {
    XlaClient client = XlaClient.create();
    Executable exe = client.compile(TestPrograms.ADD_F32_4);
    DeviceBuffer buffer = client.upload(HostTensor.ofFloats(new float[] {1, 2, 3, 4}));
    buffer.close();
    assertDoesNotThrow(buffer::close);
    assertTrue(buffer.isClosed());
    IllegalStateException e = assertThrows(IllegalStateException.class, buffer::toHost);
    assertTrue(e.getMessage().contains("DeviceBuffer is closed"), e.getMessage());
    assertThrows(IllegalStateException.class, () -> exe.execute(buffer, buffer));

    exe.close();
    exe.close();
    assertThrows(IllegalStateException.class, () -> exe.run(HostTensor.ofFloats(new float[4]), HostTensor.ofFloats(new float[4])));

    client.close();
    client.close();
    assertThrows(IllegalStateException.class, () -> client.compile(TestPrograms.ADD_F32_4));
    assertThrows(IllegalStateException.class, () -> client.upload(HostTensor.ofFloats(new float[4])));
  }

  @Test
  void childrenKeepTheirClientAlive() {
    XlaClient client = XlaClient.create();
    Executable exe = client.compile(TestPrograms.ADD_F32_4);
    DeviceBuffer a = client.upload(HostTensor.ofFloats(new float[] {1, 2, 3, 4}));
    client.close(); // the native client must survive until exe and a are closed
    var out = exe.execute(a, a);
    assertArrayEquals(new float[] {2, 4, 6, 8}, out.get(0).toHost().toFloatArray(), 0f);
    out.forEach(DeviceBuffer::close);
    a.close();
    assertFalse(client.nativeDestroyed(), "the executable still holds the client");
    exe.close(); // last reference: the native client is destroyed now
    assertTrue(client.nativeDestroyed());
  }

  /** Uploads buffers and drops them without closing them. */
  private static void forget(XlaClient client, int count) {
    for (int i = 0; i < count; i++) {
      client.upload(HostTensor.ofFloats(new float[1024]));
    }
  }

  @Test
  void handlesNobodyClosedAreFreedByTheCleanerOnceUnreachable() throws InterruptedException {
    XlaClient client = XlaClient.create();
    forget(client, 50);
    client.close();
    assertFalse(client.nativeDestroyed(), "50 forgotten buffers still hold the client");
    long deadline = System.nanoTime() + 20_000_000_000L;
    while (!client.nativeDestroyed() && System.nanoTime() < deadline) {
      System.gc();
      Thread.sleep(20);
    }
    assertTrue(client.nativeDestroyed(), "the cleaner should have released every forgotten buffer and so the client");
  }

  @Test
  void aCompileThatFinishesAfterCloseLeaksNothing() throws Exception {
    // Long enough to compile that close() lands while XLA is still compiling.
    StringBuilder body = new StringBuilder();
    String last = "%a";
    for (int i = 0; i < 400; i++) {
      body.append("  %v").append(i).append(" = stablehlo.sine ").append(last).append(" : tensor<64xf32>\n");
      last = "%v" + i;
    }
    String program =
        "func.func @main(%a: tensor<64xf32>) -> tensor<64xf32> {\n" + body + "  return " + last + " : tensor<64xf32>\n}\n";
    for (int attempt = 0; attempt < 3; attempt++) {
      XlaClient client = XlaClient.create();
      CompletableFuture<Executable> compiling = CompletableFuture.supplyAsync(() -> client.compile(program));
      Thread.sleep(20);
      client.close();
      Executable exe;
      try {
        exe = compiling.get(60, TimeUnit.SECONDS);
      } catch (ExecutionException e) {
        assertTrue(e.getCause() instanceof IllegalStateException, e.toString()); // close won the race
        assertTrue(client.nativeDestroyed());
        continue;
      }
      assertFalse(client.nativeDestroyed(), "the executable compiled after close() holds the client");
      assertEquals(0, client.compileCacheStats().size(), "a closed client's cache keeps nothing");
      assertEquals(List.of(TensorType.of(DType.F32, 64)), exe.outputTypes());
      exe.close();
      assertTrue(client.nativeDestroyed(), "closing the late executable released the client");
    }
  }
}
