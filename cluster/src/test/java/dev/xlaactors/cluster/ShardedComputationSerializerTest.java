package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.cluster.ShardedComputations.Accepted;
import dev.xlaactors.cluster.ShardedComputations.Failed;
import dev.xlaactors.cluster.ShardedComputations.Outputs;
import dev.xlaactors.cluster.ShardedComputations.Reply;
import dev.xlaactors.cluster.ShardedComputations.Run;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
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
 * The binary form of sharded computation messages: bound in reference.conf, every message round-trips,
 * and damaged bytes (any truncation, a wrong dtype code, an unknown error code) are refused naming what
 * is wrong.
 */
class ShardedComputationSerializerTest {
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static final Serialization serialization = SerializationExtension.get(Adapter.toClassic(testKit.system()));

  @AfterAll
  static void stop() {
    testKit.shutdownTestKit();
  }

  private static ShardedComputationSerializer serializerFor(Object message) {
    Serializer s = serialization.findSerializerFor(message);
    return assertInstanceOf(ShardedComputationSerializer.class, s, "bound in the cluster module's reference.conf");
  }

  private static Object roundTrip(Object message) {
    ShardedComputationSerializer s = serializerFor(message);
    return s.fromBinary(s.toBinary(message), s.manifest(message));
  }

  private static Run run(TestProbe<Reply> probe) {
    return new Run(42, List.of(HostTensor.vector(1.5f, -2f, 0.25f, 3f), HostTensor.ofInts(new int[] {7, 8}, 2, 1)),
        probe.getRef());
  }

  @Test
  void everyMessageRoundTrips() {
    TestProbe<Reply> probe = testKit.createTestProbe();
    Run back = assertInstanceOf(Run.class, roundTrip(run(probe)));
    assertEquals(42, back.requestId());
    assertEquals(probe.getRef(), back.replyTo());
    assertArrayEquals(new float[] {1.5f, -2f, 0.25f, 3f}, back.inputs().get(0).toFloatArray(), 0f);
    assertEquals(DType.S32, back.inputs().get(1).dtype());
    assertArrayEquals(new long[] {2, 1}, back.inputs().get(1).shape().dims());
    assertArrayEquals(new int[] {7, 8}, back.inputs().get(1).toIntArray());

    assertEquals(new Accepted(3, "pekko://xla-actors@127.0.0.1:25520"),
        roundTrip(new Accepted(3, "pekko://xla-actors@127.0.0.1:25520")));
    Outputs outputs = assertInstanceOf(Outputs.class, roundTrip(new Outputs(4, List.of(HostTensor.scalar(2.5f)))));
    assertEquals(4, outputs.requestId());
    assertArrayEquals(new float[] {2.5f}, outputs.outputs().get(0).toFloatArray(), 0f);
    assertEquals(new Failed(5, ErrorCode.NOT_FOUND, "no computation 'é'"),
        roundTrip(new Failed(5, ErrorCode.NOT_FOUND, "no computation 'é'")));
  }

  @Test
  void everyTruncationOfARunIsRefused() {
    Run run = run(testKit.createTestProbe());
    ShardedComputationSerializer s = serializerFor(run);
    byte[] bytes = s.toBinary(run);
    for (int length = 0; length < bytes.length; length++) {
      byte[] cut = Arrays.copyOf(bytes, length);
      int at = length;
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> s.fromBinary(cut, "R"), () -> "cut at " + at);
      assertTrue(e.getMessage().startsWith("refused sharded computation message (manifest 'R'): "), e.getMessage());
    }
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
        () -> s.fromBinary(Arrays.copyOf(bytes, bytes.length - 3), "R"));
    assertEquals("refused sharded computation message (manifest 'R'): tensor 1 of 2 (s32[2,1]) is truncated: "
        + "8 bytes of data expected, 5 left", e.getMessage());
  }

  @Test
  void aWrongDtypeCodeOrErrorCodeIsRefused() {
    Outputs outputs = new Outputs(4, List.of(HostTensor.vector(1f, 2f)));
    ShardedComputationSerializer s = serializerFor(outputs);
    byte[] bytes = s.toBinary(outputs);
    int dtypeAt = 1 + 8 + 4; // version, request id, tensor count
    assertEquals(DType.F32.pjrtType(), bytes[dtypeAt]);
    bytes[dtypeAt] = 99;
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> s.fromBinary(bytes, "O"));
    assertTrue(e.getMessage().startsWith("refused sharded computation message (manifest 'O'): tensor 0 of 1 has dtype"
        + " code 99, which is no dtype; known codes: 1=pred"), e.getMessage());

    // A valid code of another dtype: the byte count no longer fits the type.
    bytes[dtypeAt] = (byte) DType.F64.pjrtType();
    assertEquals("refused sharded computation message (manifest 'O'): tensor 0 of 1 (f64[2]) carries 8 bytes, expected 16",
        assertThrows(InvalidArgumentException.class, () -> s.fromBinary(bytes, "O")).getMessage());

    byte[] failed = s.toBinary(new Failed(5, ErrorCode.ABORTED, "x"));
    failed[1 + 8 + 3] = 77;
    assertEquals("refused sharded computation message (manifest 'F'): error code 77 is not one of 0..16",
        assertThrows(InvalidArgumentException.class, () -> s.fromBinary(failed, "F")).getMessage());
  }
}
