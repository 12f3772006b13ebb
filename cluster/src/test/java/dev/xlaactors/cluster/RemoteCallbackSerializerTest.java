package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.cluster.RemoteCallbackServer.Refused;
import dev.xlaactors.cluster.RemoteCallbackServer.Reply;
import dev.xlaactors.cluster.RemoteCallbackServer.Request;
import dev.xlaactors.cluster.RemoteCallbackServer.Served;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.serialization.Serialization;
import org.apache.pekko.serialization.SerializationExtension;
import org.apache.pekko.serialization.Serializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;

/**
 * The binary form of remote callback messages: bound in reference.conf, every dtype round-trips bit for
 * bit, and damaged bytes (truncated, unknown dtype code, wrong byte count, trailing bytes) are refused with
 * a message that says what is wrong.
 */
class RemoteCallbackSerializerTest {
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static final Serialization serialization = SerializationExtension.get(Adapter.toClassic(testKit.system()));

  @AfterAll
  static void stop() {
    testKit.shutdownTestKit();
  }

  private static RemoteCallbackSerializer serializerFor(Object message) {
    Serializer s = serialization.findSerializerFor(message);
    return assertInstanceOf(RemoteCallbackSerializer.class, s, "bound in the cluster module's reference.conf");
  }

  private static Object roundTrip(Object message) {
    RemoteCallbackSerializer s = serializerFor(message);
    return s.fromBinary(s.toBinary(message), s.manifest(message));
  }

  /** A tensor of every dtype, with distinct bytes, in several shapes (scalar, empty, rank 3). */
  private static List<HostTensor> everyDtype() {
    List<HostTensor> tensors = new ArrayList<>();
    for (DType dtype : DType.values()) {
      byte[] bytes = new byte[dtype.byteSize() * 6];
      for (int i = 0; i < bytes.length; i++) {
        bytes[i] = (byte) (i * 37 + dtype.ordinal());
      }
      if (dtype == DType.PRED) {
        Arrays.fill(bytes, (byte) 1);
      }
      tensors.add(HostTensor.ofBytes(dtype, bytes, 1, 2, 3));
    }
    tensors.add(HostTensor.scalar(2.5f));
    tensors.add(HostTensor.zeros(TensorType.of(DType.F32, 0)));
    return tensors;
  }

  @Test
  void javaSerializationIsOffAndOurSerializerIsBound() {
    assertFalse(testKit.system().settings().config().getBoolean("pekko.actor.allow-java-serialization"));
    assertEquals(RemoteCallbackSerializer.IDENTIFIER, serializerFor(new Served(1, List.of())).identifier());
  }

  @Test
  void aRequestWithEveryDtypeRoundTripsBitForBit() {
    TestProbe<Reply> probe = testKit.createTestProbe();
    Request request = new Request(42, "score.v2", everyDtype(), probe.getRef());
    Request back = assertInstanceOf(Request.class, roundTrip(request));
    assertEquals(42, back.callId());
    assertEquals("score.v2", back.callbackName());
    assertEquals(probe.getRef(), back.replyTo());
    assertEquals(request.inputs().size(), back.inputs().size());
    for (int i = 0; i < request.inputs().size(); i++) {
      assertEquals(request.inputs().get(i).type(), back.inputs().get(i).type(), "type of tensor " + i);
      assertArrayEquals(request.inputs().get(i).toByteArray(), back.inputs().get(i).toByteArray(), "bytes of tensor " + i);
    }
  }

  @Test
  void repliesRoundTrip() {
    Served served = assertInstanceOf(Served.class, roundTrip(new Served(7, List.of(HostTensor.vector(1f, -2f, 3.5f)))));
    assertEquals(7, served.callId());
    assertArrayEquals(new float[] {1f, -2f, 3.5f}, served.outputs().get(0).toFloatArray(), 0f);
    Refused refused = assertInstanceOf(Refused.class, roundTrip(new Refused(8, ErrorCode.ABORTED, "callback 'x' threw é")));
    assertEquals(new Refused(8, ErrorCode.ABORTED, "callback 'x' threw é"), refused);
  }

  @Test
  void everyTruncationIsRefused() {
    Served served = new Served(3, List.of(HostTensor.vector(1f, 2f), HostTensor.vector(5, 6, 7)));
    RemoteCallbackSerializer s = serializerFor(served);
    byte[] bytes = s.toBinary(served);
    for (int length = 0; length < bytes.length; length++) {
      byte[] cut = Arrays.copyOf(bytes, length);
      int at = length;
      InvalidArgumentException e =
          assertThrows(InvalidArgumentException.class, () -> s.fromBinary(cut, s.manifest(served)), () -> "cut at " + at);
      assertTrue(e.getMessage().startsWith("refused remote callback message (manifest 'S'): "), e.getMessage());
    }
    // Cut inside the second tensor's elements: the message names the tensor and the bytes missing.
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
        () -> s.fromBinary(Arrays.copyOf(bytes, bytes.length - 3), s.manifest(served)));
    assertEquals("refused remote callback message (manifest 'S'): tensor 1 of 2 (s32[3]) is truncated: "
        + "12 bytes of data expected, 9 left", e.getMessage());
  }

  @Test
  void aWrongDtypeCodeIsRefused() {
    Served served = new Served(3, List.of(HostTensor.vector(1f, 2f)));
    RemoteCallbackSerializer s = serializerFor(served);
    byte[] bytes = s.toBinary(served);
    int dtypeAt = 1 + 8 + 4; // version, callId, tensor count
    assertEquals(DType.F32.pjrtType(), bytes[dtypeAt]);
    bytes[dtypeAt] = 99;
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> s.fromBinary(bytes, "S"));
    assertTrue(e.getMessage().contains("tensor 0 of 1 has dtype code 99, which is no dtype; known codes: 1=pred, 2=s8"),
        e.getMessage());
  }

  @Test
  void aByteCountThatDoesNotMatchTheTypeOrTrailingBytesAreRefused() {
    Served served = new Served(3, List.of(HostTensor.vector(1f, 2f)));
    RemoteCallbackSerializer s = serializerFor(served);
    byte[] bytes = s.toBinary(served);
    byte[] wrongCount = bytes.clone();
    int countAt = 1 + 8 + 4 + 1 + 1 + 8; // ..., dtype, rank, one dimension
    wrongCount[countAt + 7] = 12;
    assertEquals("refused remote callback message (manifest 'S'): tensor 0 of 1 (f32[2]) carries 12 bytes, expected 8",
        assertThrows(InvalidArgumentException.class, () -> s.fromBinary(wrongCount, "S")).getMessage());
    byte[] trailing = Arrays.copyOf(bytes, bytes.length + 2);
    assertEquals("refused remote callback message (manifest 'S'): 2 trailing bytes after the message",
        assertThrows(InvalidArgumentException.class, () -> s.fromBinary(trailing, "S")).getMessage());
  }
}
