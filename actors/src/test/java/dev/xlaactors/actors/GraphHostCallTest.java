package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Host-call nodes of the graph builder, run through the CallbackRuntime. */
class GraphHostCallTest {
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static XlaClient client;
  private static CallbackRuntime callbacks;

  @BeforeAll
  static void start() {
    client = XlaClient.create();
    callbacks = CallbackRuntime.create(testKit.system(), client);
  }

  @AfterAll
  static void stop() {
    callbacks.close();
    client.close();
    testKit.shutdownTestKit();
  }

  @Test
  void javaCallbackInTheMiddleOfABuiltGraph() {
    TensorType f32x3 = TensorType.of(DType.F32, 3);
    HostCallback clip =
        new HostCallback("clip-to-static", List.of(f32x3), 2.5f, (in, limit) -> {
          float[] x = in.get(0).toFloatArray();
          for (int i = 0; i < x.length; i++) {
            x[i] = Math.min(x[i], (Float) limit);
          }
          return List.of(HostTensor.ofFloats(x));
        });
    GraphBuilder b = new GraphBuilder("clip_in_java");
    Value x = b.parameter(f32x3);
    Value doubled = b.multiply(x, b.constant(2f));
    Value clipped = b.hostCall(clip, doubled).get(0);
    Graph graph = b.build(b.add(clipped, b.constant(1f)));
    assertEquals(List.of(clip), graph.hostCallbacks());

    callbacks.registerAll(graph.hostCallbacks()).toCompletableFuture().join();
    try (Model exe = Model.compile(client, graph.stablehlo())) {
      List<HostTensor> out = callbacks.run(exe, Argument.of(List.of(HostTensor.ofFloats(new float[] {0.5f, 1f, 3f}))));
      assertArrayEquals(new float[] {2f, 3f, 3.5f}, out.get(0).toFloatArray(), 0f);
    }
  }

  @Test
  void aTypedStaticArgumentAndOneElementVectors() {
    TensorType f32x1 = TensorType.of(DType.F32, 1);
    // HostCallback.of: the static argument arrives as a Float, no cast.
    HostCallback scale = HostCallback.of("scale-by-static", List.of(f32x1), 3f,
        (in, factor) -> List.of(HostTensor.vector(in.get(0).toFloatArray()[0] * factor)));
    GraphBuilder b = new GraphBuilder("scale_in_java");
    Value x = b.parameter(f32x1);
    Graph graph = b.build(b.hostCall(scale, x).get(0));
    callbacks.registerAll(graph.hostCallbacks()).toCompletableFuture().join();
    assertEquals(TensorType.of(DType.F32), HostTensor.ofFloats(new float[] {2f}).type(), "one value without dims: a scalar");
    assertEquals(f32x1, HostTensor.vector(2f).type(), "vector(): always rank 1");
    try (Model exe = Model.compile(client, graph.stablehlo())) {
      List<HostTensor> out = callbacks.run(exe, Argument.of(List.of(HostTensor.vector(2f))));
      assertArrayEquals(new float[] {6f}, out.get(0).toFloatArray(), 0f);
    }
  }

  @Test
  void tupleResultsNoInputsAndPureCalls() {
    AtomicInteger calls = new AtomicInteger();
    HostCallback source =
        new HostCallback(
            "source-pair", List.of(TensorType.of(DType.S32, 2), TensorType.of(DType.F64)), null, (in, s) -> {
              calls.incrementAndGet();
              return List.of(HostTensor.ofInts(new int[] {4, 5}), HostTensor.ofDoubles(new double[] {0.25}));
            });
    GraphBuilder b = new GraphBuilder("pair");
    Value p = b.parameter(TensorType.of(DType.S32, 2));
    List<Value> pair = b.hostCall(source);
    Value unused = b.pureHostCall(source).get(0); // pure and unused: XLA may drop it
    assertEquals(TensorType.of(DType.S32, 2), unused.type());
    Graph graph = b.build(b.add(p, pair.get(0)), pair.get(1));
    callbacks.registerAll(graph.hostCallbacks()).toCompletableFuture().join();
    try (Model exe = Model.compile(client, graph.stablehlo())) {
      List<HostTensor> out = callbacks.run(exe, Argument.of(List.of(HostTensor.ofInts(new int[] {10, 20}))));
      assertArrayEquals(new int[] {14, 25}, out.get(0).toIntArray());
      assertArrayEquals(new double[] {0.25}, out.get(1).toDoubleArray(), 0);
    }
    assertTrue(calls.get() >= 1);
  }

  @Test
  void twoDifferentCallbacksUnderOneNameAreRefusedAtBuildTime() {
    TensorType f32 = TensorType.of(DType.F32);
    GraphBuilder b = new GraphBuilder("clash");
    Value x = b.parameter(f32);
    b.hostCall(new HostCallback("same", List.of(f32), null, (in, s) -> in), x);
    InvalidArgumentException e =
        assertThrows(
            InvalidArgumentException.class,
            () -> b.hostCall(new HostCallback("same", List.of(f32), null, (in, s) -> in), x));
    assertTrue(e.getMessage().contains("another callback named 'same'"), e.getMessage());
  }
}
