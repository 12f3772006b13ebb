package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.XlaException;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.Shape;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.Test;

/**
 * The largest callback input is one number, HostCall.MAX_INPUT_BYTES (= HostTensor.MAX_BYTES): an input
 * between it and the bridge's old limit (2 GiB - 8) failed with INTERNAL and a false "over 2 GiB" message
 * and no callback name; a segmented run failed with another code. Now both modes fail the same way,
 * naming the callback, the input, its size and the limit.
 */
class LargestCallbackInputTest {
  @Test
  void anInputJustOverTheLimitFailsTheSameWayFusedAndSegmented() {
    assertEquals(HostTensor.MAX_BYTES, HostCall.MAX_INPUT_BYTES);
    long elements = (Integer.MAX_VALUE - 15) / 4; // 2 GiB - 16 bytes: over 2 GiB - 65, under 2 GiB - 8
    TensorType big = TensorType.of(DType.F32, elements);
    assertTrue(big.byteSize() > HostTensor.MAX_BYTES && big.byteSize() <= Integer.MAX_VALUE - 8L, big + " " + big.byteSize());
    AtomicInteger calls = new AtomicInteger();
    HostCallback sum = new HostCallback("sum-big", List.of(TensorType.of(DType.F32)), null, (in, s) -> {
      calls.incrementAndGet();
      return List.of(HostTensor.scalar(0f));
    });
    GraphBuilder b = new GraphBuilder("big_input");
    Value x = b.parameter(TensorType.of(DType.F32));
    Value y = b.hostCall(sum, b.broadcastTo(x, Shape.of(elements))).get(0);
    Graph graph = b.build(y);
    String expected = "host callback 'sum-big': input 0 is " + big + " (" + big.byteSize() + " bytes); a callback input holds at most "
        + HostCall.MAX_INPUT_BYTES + " bytes: pass it in smaller pieces";
    ActorTestKit kit = ActorTestKit.create();
    try (XlaClient client = XlaClient.create(); CallbackRuntime callbacks = CallbackRuntime.create(kit.system(), client)) {
      callbacks.register(sum).toCompletableFuture().join();
      String[] messages = new String[2];
      int m = 0;
      for (RunMode mode : List.of(RunMode.FUSED, RunMode.SEGMENTED)) {
        XlaException e = assertThrows(XlaException.class, () -> SegmentedRunTest.run(callbacks, graph, List.of(HostTensor.scalar(1f)), mode));
        assertTrue(e.getMessage().contains(expected), mode + ": " + e.getMessage());
        messages[m++] = e.code() + " " + e.getClass().getSimpleName() + " " + e.getMessage();
      }
      assertEquals(messages[0], messages[1], "the same failure reads the same in both modes");
      assertEquals(0, calls.get(), "the callback never saw the input");
    } finally {
      kit.shutdownTestKit();
    }
  }
}
