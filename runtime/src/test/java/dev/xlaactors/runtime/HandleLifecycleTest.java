package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** Handles close idempotently, refuse use after close, and keep their parents alive. */
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
    exe.close(); // last reference: the native client is destroyed now
  }
}
