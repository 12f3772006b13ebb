package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.cluster.ShardedComputations.Failed;
import dev.xlaactors.cluster.ShardedComputations.Outputs;
import dev.xlaactors.cluster.ShardedComputations.Reply;
import dev.xlaactors.cluster.ShardedComputations.Run;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.runtime.HostTensor;
import java.util.Arrays;
import java.util.List;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.serialization.SerializationExtension;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;

/**
 * The binary form of sharded computation messages: bound in reference.conf, tensors and errors round-trip,
 * and damaged bytes (truncated, unknown dtype code, trailing bytes) are refused saying what is wrong.
 */
class ShardedComputationSerializerTest {
  private static final ActorTestKit testKit = ActorTestKit.create();

  @AfterAll
  static void stop() {
    testKit.shutdownTestKit();
  }

  private static ShardedComputationSerializer serializerFor(Object message) {
    return assertInstanceOf(ShardedComputationSerializer.class,
        SerializationExtension.get(Adapter.toClassic(testKit.system())).findSerializerFor(message),
        "bound in the cluster module's reference.conf");
  }

  private static Object roundTrip(Object message) {
    ShardedComputationSerializer s = serializerFor(message);
    return s.fromBinary(s.toBinary(message), s.manifest(message));
  }

  @Test
  void runsOutputsAndFailuresRoundTrip() {
    TestProbe<Reply> probe = testKit.createTestProbe();
    Run run = (Run) roundTrip(new Run(List.of(HostTensor.ofFloats(new float[] {1, 2, 3}, 3), HostTensor.scalar(7)), probe.getRef()));
    assertEquals(probe.getRef(), run.replyTo());
    assertArrayEquals(new float[] {1, 2, 3}, run.inputs().get(0).toFloatArray());
    assertEquals(7, run.inputs().get(1).toIntArray()[0]);
    Outputs out = (Outputs) roundTrip(new Outputs(List.of(HostTensor.ofFloats(new float[] {3, 5}, 2))));
    assertArrayEquals(new float[] {3, 5}, out.outputs().get(0).toFloatArray());
    assertEquals(new Failed(ErrorCode.NOT_FOUND, "no computation 'x'"), roundTrip(new Failed(ErrorCode.NOT_FOUND, "no computation 'x'")));
  }

  @Test
  void damagedMessagesAreRefusedSayingWhatIsWrong() {
    Outputs message = new Outputs(List.of(HostTensor.ofFloats(new float[] {1, 2, 3, 4}, 4)));
    ShardedComputationSerializer s = serializerFor(message);
    byte[] bytes = s.toBinary(message);

    InvalidArgumentException truncated = assertThrows(InvalidArgumentException.class,
        () -> s.fromBinary(Arrays.copyOf(bytes, bytes.length - 3), "O"));
    assertTrue(truncated.getMessage().contains("refused sharded computation message (manifest 'O')")
        && truncated.getMessage().contains("truncated"), truncated.getMessage());

    byte[] badDtype = bytes.clone();
    badDtype[1 + 4] = 99; // version, tensor count, then the first tensor's dtype code
    InvalidArgumentException dtype = assertThrows(InvalidArgumentException.class, () -> s.fromBinary(badDtype, "O"));
    assertTrue(dtype.getMessage().contains("dtype code 99, which is no dtype"), dtype.getMessage());

    byte[] trailing = Arrays.copyOf(bytes, bytes.length + 2);
    InvalidArgumentException extra = assertThrows(InvalidArgumentException.class, () -> s.fromBinary(trailing, "O"));
    assertTrue(extra.getMessage().contains("2 trailing bytes"), extra.getMessage());
  }
}
