package dev.xlaactors.graph;

import static dev.xlaactors.runtime.DType.F32;
import static dev.xlaactors.runtime.DType.S32;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.graph.SegmentedProgram.HostCallInvoker;
import dev.xlaactors.graph.SegmentedProgram.Placement;
import dev.xlaactors.graph.SegmentedProgram.Result;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Segmentation on the real plugin, with callbacks called directly on the orchestrating thread: stage
 * counts, what each stage takes and returns, what crosses to the host, Java-driven loops, inlining, and
 * stages on a second client. (Fused against segmented through the actors: {@code SegmentedRunTest}.)
 */
class SegmenterTest {
  private static XlaClient client;

  @BeforeAll
  static void open() {
    client = XlaClient.create();
  }

  @AfterAll
  static void close() {
    client.close();
  }

  private static final TensorType F4 = TensorType.of(F32, 4);

  private static HostCallback twice(String name) {
    return new HostCallback(name, List.of(F4), null, (in, s) -> {
      float[] v = in.get(0).toFloatArray();
      for (int i = 0; i < v.length; i++) {
        v[i] *= 2;
      }
      return List.of(HostTensor.ofFloats(v));
    });
  }

  private static Result run(SegmentedGraph g, HostTensor... inputs) {
    try (SegmentedProgram p = new SegmentedProgram(g, Placement.on(client))) {
      Result r = p.run(List.of(inputs), HostCallInvoker.direct());
      assertEquals(0, p.openBuffers(), "buffers left open after the run");
      return r;
    }
  }

  @Test
  void aCallbackInTheMiddleMakesTwoStagesThatPassOnlyWhatIsUsed() {
    GraphBuilder b = new GraphBuilder("middle");
    Value x = b.parameter(F4);
    Value unusedLater = b.exp(x);
    Value a = b.add(x, b.constant(1f));
    Value y = b.hostCall(twice("twice"), a).get(0);
    Value out = b.add(y, x);
    SegmentedGraph g = b.build(b.multiply(out, a)).segment(SegmentationOptions.defaults());
    assertEquals(2, g.stages().size(), g.describe());
    // stage 0: x -> a (exp(x) is used by nothing, so it is not returned); stage 1: (y, x, a) -> out
    assertEquals(List.of(F4), g.stages().get(0).inputTypes());
    assertEquals(List.of(F4), g.stages().get(0).outputTypes());
    assertEquals(3, g.stages().get(1).inputTypes().size());
    assertEquals(1, g.hostCallSites());
    assertTrue(unusedLater.type().equals(F4));
    Result r = run(g, HostTensor.ofFloats(new float[] {1, 2, 3, 4}));
    // ((x+1)*2 + x) * (x+1)
    assertArrayEquals(new float[] {10, 24, 44, 70}, r.outputs().get(0).toFloatArray());
    assertEquals(2, r.stats().stageExecutions().size());
    assertEquals(1, r.stats().hostCalls());
    // down: a (16 B) for the callback, out (16 B); up: x (16 B), y (16 B)
    assertEquals(32, r.stats().bytesToHost());
    assertEquals(32, r.stats().bytesToDevice());
  }

  /** The worked example of docs/segmentation.md: a loop with a callback inside. */
  static Graph loopWithCallback() {
    GraphBuilder b = new GraphBuilder("loop_with_callback");
    Value x = b.parameter(F4);
    Value n = b.parameter(S32);
    HostCallback noisy = twice("observe");
    List<Value> result = b.whileLoop(List.of(b.constant(0), x),
        (c, v) -> c.less(v.get(0), n),
        (c, v) -> {
          Value scaled = c.multiply(v.get(1), c.constant(0.5f));
          Value back = c.hostCall(noisy, scaled).get(0);       // Java, every iteration
          return List.of(c.add(v.get(0), c.constant(1)), c.add(back, c.constant(1f)));
        });
    return b.build(b.reduceSum(result.get(1)), result.get(0));
  }

  @Test
  void aLoopWithACallbackIsDrivenFromJavaAndOnlyThePredicateComesDown() {
    SegmentedGraph g = loopWithCallback().segment(SegmentationOptions.defaults());
    System.out.println(g.describe());
    // stage 0: constants; condition: 1 stage; body: before and after the callback; after the loop: the sum
    assertEquals(5, g.stages().size(), g.describe());
    assertEquals(1, g.hostDrivenControlFlow());
    Result r = run(g, HostTensor.ofFloats(new float[] {1, 2, 3, 4}), HostTensor.ofInts(new int[] {3}));
    // each iteration: v -> v + 1 (v * 0.5 * 2 + 1)
    assertEquals(4 * 3 + 10, r.outputs().get(0).toFloatArray()[0], 1e-6);
    assertEquals(3, r.outputs().get(1).toIntArray()[0]);
    assertEquals(3, r.stats().hostCalls());
    assertEquals(4, r.stats().predicateReads());
    // stage 0 once, the condition 4 times, the body's two stages 3 times, the sum once
    assertEquals(List.of(0, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 4),
        r.stats().stageExecutions().stream().map(SegmentedProgram.Executed::stage).toList());
    // the carried values never come down: predicates (4 x 1 B), callback inputs (3 x 16 B), outputs (4 + 4 B)
    assertEquals(4 + 3 * 16 + 8, r.stats().bytesToHost());
  }

  @Test
  void loopsAndConditionalsWithoutCallbacksStayInOneStage() {
    GraphBuilder b = new GraphBuilder("pure_control");
    Value x = b.parameter(F4);
    List<Value> loop = b.whileLoop(List.of(b.constant(0), x), (c, v) -> c.less(v.get(0), c.constant(5)),
        (c, v) -> List.of(c.add(v.get(0), c.constant(1)), c.add(v.get(1), c.constant(1f))));
    Value s = b.reduceSum(loop.get(1));
    Value picked = b.ifThenElse(b.greater(s, b.constant(0f)), t -> List.of(t.negate(s)), f -> List.of(s)).get(0);
    SegmentedGraph g = b.build(picked).segment(SegmentationOptions.defaults());
    assertEquals(1, g.stages().size());
    assertEquals(0, g.hostDrivenControlFlow());
    assertEquals(-(10 + 20), run(g, HostTensor.ofFloats(new float[] {1, 2, 3, 4})).outputs().get(0).toFloatArray()[0]);
  }

  @Test
  void aConditionalWithACallbackRunsOnlyTheChosenBranch() {
    List<String> calls = new ArrayList<>();
    HostCallback log = new HostCallback("log", List.of(F4), null, (in, s) -> {
      calls.add("log");
      return List.of(in.get(0));
    });
    GraphBuilder b = new GraphBuilder("cond");
    Value x = b.parameter(F4);
    Value p = b.greater(b.reduceSum(x), b.constant(0f));
    Value y = b.ifThenElse(p, t -> List.of(t.hostCall(log, t.add(x, t.constant(1f))).get(0)),
        f -> List.of(f.negate(x))).get(0);
    SegmentedGraph g = b.build(y).segment(SegmentationOptions.defaults());
    assertEquals(1, g.hostDrivenControlFlow());
    Result pos = run(g, HostTensor.ofFloats(new float[] {1, 1, 1, 1}));
    assertArrayEquals(new float[] {2, 2, 2, 2}, pos.outputs().get(0).toFloatArray());
    Result neg = run(g, HostTensor.ofFloats(new float[] {-1, -1, -1, -1}));
    assertArrayEquals(new float[] {1, 1, 1, 1}, neg.outputs().get(0).toFloatArray());
    assertEquals(List.of("log"), calls);
    assertEquals(1, neg.stats().predicateReads());
  }

  @Test
  void inliningCompilesAPureCallbackAway() {
    HostCallback cb = twice("twice_inlinable");
    GraphBuilder b = new GraphBuilder("inline");
    Value x = b.parameter(F4);
    Value y = b.pureHostCall(cb, (r, in) -> List.of(r.multiply(in.get(0), r.constant(2f))), b.exp(x)).get(0);
    Graph graph = b.build(b.add(y, x));
    SegmentedGraph cut = graph.segment(SegmentationOptions.defaults());
    SegmentedGraph inlined = graph.segment(SegmentationOptions.inliningCallbacks());
    assertEquals(2, cut.stages().size());
    assertEquals(1, inlined.stages().size());
    assertEquals(0, inlined.hostCallSites());
    HostTensor in = HostTensor.ofFloats(new float[] {0, 1, 2, 3});
    Result a = run(cut, in);
    Result c = run(inlined, in);
    assertArrayEquals(a.outputs().get(0).toFloatArray(), c.outputs().get(0).toFloatArray(), 1e-5f);
    assertEquals(0, c.stats().hostCalls());
  }

  @Test
  void stagesOnASecondClientGetTheirDataThroughTheHost() {
    try (XlaClient other = XlaClient.create()) {
      SegmentedGraph g = loopWithCallback().segment(SegmentationOptions.defaults());
      // odd stages on the other client, even ones here
      Placement alternate = s -> new SegmentedProgram.Target(s.index() % 2 == 0 ? client : other,
          (s.index() % 2 == 0 ? client : other).devices().get(0));
      HostTensor x = HostTensor.ofFloats(new float[] {1, 2, 3, 4});
      HostTensor n = HostTensor.ofInts(new int[] {3});
      Result one = run(g, x, n);
      Result two;
      try (SegmentedProgram p = new SegmentedProgram(g, alternate)) {
        two = p.run(List.of(x, n), HostCallInvoker.direct());
      }
      assertArrayEquals(one.outputs().get(0).toFloatArray(), two.outputs().get(0).toFloatArray());
      assertEquals(one.outputs().get(1).toIntArray()[0], two.outputs().get(1).toIntArray()[0]);
      assertEquals(0, one.stats().crossClientMoves());
      assertTrue(two.stats().crossClientMoves() > 0, two.stats().toString());
      for (SegmentedProgram.Executed e : two.stats().stageExecutions()) {
        assertTrue(e.target().client() == (e.stage() % 2 == 0 ? client : other), e.toString());
      }
    }
  }

  @Test
  void aDevicePerStageRunsEachStageWhereItWasPlaced() {
    int devices = client.devices().size();
    org.junit.jupiter.api.Assumptions.assumeTrue(devices >= 2, "the CPU client reports one device: " + client.devices());
    SegmentedGraph g = loopWithCallback().segment(SegmentationOptions.defaults());
    HostTensor x = HostTensor.ofFloats(new float[] {1, 2, 3, 4});
    HostTensor n = HostTensor.ofInts(new int[] {3});
    Result one = run(g, x, n);
    Placement spread = s -> SegmentedProgram.Target.of(client, (s.index() + 1) % devices);
    try (SegmentedProgram p = new SegmentedProgram(g, spread)) {
      Result r = p.run(List.of(x, n), HostCallInvoker.direct());
      assertEquals(0, p.openBuffers());
      assertArrayEquals(one.outputs().get(0).toFloatArray(), r.outputs().get(0).toFloatArray());
      assertEquals(one.outputs().get(1).toIntArray()[0], r.outputs().get(1).toIntArray()[0]);
      assertEquals(12, r.stats().stageExecutions().size());
      for (SegmentedProgram.Executed e : r.stats().stageExecutions()) {
        // the device comes from the stage's output buffers (DeviceBuffer.device())
        assertEquals((e.stage() + 1) % devices, e.target().device().index(), e.toString());
        assertTrue(e.target().client() == client);
      }
      assertTrue(r.stats().deviceMoves() > 0, r.stats().toString());
      assertEquals(0, r.stats().crossClientMoves());
    }
    assertTrue(assertThrows(InvalidArgumentException.class, () -> SegmentedProgram.Target.of(client, devices))
        .getMessage().contains("out of range"));
  }

  @Test
  void badInputsAndBadCallbackResultsAreClearErrors() {
    SegmentedGraph g = loopWithCallback().segment(SegmentationOptions.defaults());
    try (SegmentedProgram p = new SegmentedProgram(g, Placement.on(client))) {
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
          () -> p.run(List.of(HostTensor.ofFloats(new float[] {1, 2})), HostCallInvoker.direct()));
      assertTrue(e.getMessage().contains("expects 2 input(s)"), e.getMessage());
      CallbackException bad = assertThrows(CallbackException.class,
          () -> p.run(List.of(HostTensor.ofFloats(new float[] {1, 2, 3, 4}), HostTensor.ofInts(new int[] {2})),
              (cb, in) -> List.of(HostTensor.ofFloats(new float[] {1}))));
      assertEquals("callback 'observe' returned f32[] as output 0, expected f32[4]", bad.getMessage());
      assertEquals(0, p.openBuffers(), "a run that failed half-way through freed its buffers");
    }
    Graph fromText = new Graph("t", List.of(), List.of(F4), "module {}", List.of());
    assertTrue(assertThrows(InvalidArgumentException.class, () -> fromText.segment(SegmentationOptions.defaults()))
        .getMessage().contains("cannot be segmented"));
  }
}
