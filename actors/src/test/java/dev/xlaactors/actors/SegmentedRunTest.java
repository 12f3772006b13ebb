package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.SegmentationOptions;
import dev.xlaactors.graph.SegmentedGraph;
import dev.xlaactors.graph.SegmentedProgram;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.BoundProgram;
import dev.xlaactors.runtime.model.SegmentedModel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Every Phase 1 callback semantics case, built as a graph and run fused and segmented through the same
 * {@link CallbackRuntime} (same registry, supervision, timeouts): equal outputs, equal callback order,
 * equal errors; cancel and the run timeout stop a segmented run between stages.
 */
class SegmentedRunTest {
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static final TensorType F = TensorType.of(DType.F32);
  private static final TensorType F4 = TensorType.of(DType.F32, 4);
  private static XlaClient client;
  private static CallbackRuntime callbacks;
  private static final List<String> journal = Collections.synchronizedList(new ArrayList<>());
  private static final AtomicInteger effects = new AtomicInteger();

  static final HostCallback INC = new HostCallback("seg-inc", List.of(F), null, (in, s) -> {
    journal.add("inc " + in.get(0).toFloatArray()[0]);
    return List.of(HostTensor.scalar(in.get(0).toFloatArray()[0] + 1));
  });
  static final HostCallback DOUBLE = new HostCallback("seg-double", List.of(F), null, (in, s) -> {
    journal.add("double " + in.get(0).toFloatArray()[0]);
    return List.of(HostTensor.scalar(in.get(0).toFloatArray()[0] * 2));
  });
  static final HostCallback SPLIT = new HostCallback("seg-split-and-count",
      List.of(TensorType.of(DType.F32, 2), TensorType.of(DType.S32)), null, (in, s) -> {
        float[] x = in.get(0).toFloatArray();
        int[] n = in.get(1).toIntArray();
        return List.of(HostTensor.ofFloats(new float[] {x[0] + x[1], x[2] + x[3]}, 2), HostTensor.scalar(n[0] + x.length));
      });
  static final HostCallback TO_S64 = new HostCallback("seg-to-s64", List.of(TensorType.of(DType.S64, 4)), null,
      (in, s) -> {
        float[] x = in.get(0).toFloatArray();
        long[] out = new long[4];
        for (int i = 0; i < 4; i++) {
          out[i] = Math.round(x[i]);
        }
        return List.of(HostTensor.ofLongs(out, 4));
      });
  static final HostCallback SOURCE = new HostCallback("seg-source", List.of(F4), null,
      (in, s) -> List.of(HostTensor.ofFloats(new float[] {7, 8, 9, 10})));
  static final HostCallback EFFECT = new HostCallback("seg-effect", List.of(F), null, (in, s) -> {
    effects.incrementAndGet();
    return List.of(in.get(0));
  });
  static final HostCallback THROWS = new HostCallback("seg-throws", List.of(F), null, (in, s) -> {
    throw new IllegalStateException("tokenizer exploded");
  });
  static final HostCallback SLEEPS = new HostCallback("seg-sleeps", List.of(F), null, (in, s) -> {
    Thread.sleep(20);
    return List.of(in.get(0));
  });
  static final HostCallback HANGS = new HostCallback("seg-hangs", List.of(F), null, (in, s) -> {
    Thread.sleep(60_000);
    return List.of(in.get(0));
  });

  @BeforeAll
  static void start() {
    client = XlaClient.create();
    ActorsSettings settings = ActorsSettings.fromConfig(
        ConfigFactory.parseString("xla-actors.actors.callbacks.timeouts { seg-hangs = 300ms }")
            .withFallback(ConfigFactory.defaultReference()).resolve());
    callbacks = CallbackRuntime.create(testKit.system(), client, settings);
    callbacks.registerAll(List.of(INC, DOUBLE, SPLIT, TO_S64, SOURCE, EFFECT, THROWS, SLEEPS, HANGS))
        .toCompletableFuture().join();
  }

  @AfterAll
  static void stop() {
    callbacks.close();
    client.close();
    testKit.shutdownTestKit();
  }

  /** Runs {@code g} on {@code inputs} once, compiled by {@code runtime} in {@code mode}. */
  static List<HostTensor> run(CallbackRuntime runtime, Graph g, List<HostTensor> inputs, RunMode mode) {
    try (BoundProgram program = runtime.compile(g, mode)) {
      return runtime.run(program, Argument.of(inputs));
    }
  }

  /** Starts a run of {@code g} compiled in {@code mode}; the program is closed when the run has ended. */
  static RunHandle start(Graph g, List<HostTensor> inputs, RunMode mode) {
    BoundProgram program = callbacks.compile(g, mode);
    RunHandle handle = callbacks.start(program, Argument.of(inputs));
    handle.ended().whenComplete((done, failure) -> program.close());
    return handle;
  }

  /** The segmented program the runtime made of {@code g} (kept until the runtime closes). */
  static SegmentedProgram segmented(Graph g) {
    try (SegmentedModel model = (SegmentedModel) callbacks.compile(g, RunMode.SEGMENTED)) {
      return model.program();
    }
  }

  /** Runs {@code g} fused, then segmented; asserts equal outputs and callback journals; returns them. */
  static List<HostTensor> bothEqual(Graph g, HostTensor... inputs) {
    journal.clear();
    List<HostTensor> fused = run(callbacks, g, List.of(inputs), RunMode.FUSED);
    List<String> fusedJournal = List.copyOf(journal);
    journal.clear();
    List<HostTensor> segmented = run(callbacks, g, List.of(inputs), RunMode.SEGMENTED);
    assertSame(fused, segmented, 0);
    assertEquals(fusedJournal, List.copyOf(journal), "callbacks called in the same order with the same inputs");
    assertEquals(0, HostCall.pendingCount());
    return segmented;
  }

  static void assertSame(List<HostTensor> a, List<HostTensor> b, double tolerance) {
    assertEquals(a.size(), b.size());
    for (int i = 0; i < a.size(); i++) {
      assertEquals(a.get(i).type(), b.get(i).type(), "output " + i);
      if (tolerance == 0 || !a.get(i).dtype().isFloating()) {
        assertEquals(a.get(i).data(), b.get(i).data(), "output " + i + " bytes");
      } else {
        float[] x = a.get(i).toFloatArray();
        float[] y = b.get(i).toFloatArray();
        for (int k = 0; k < x.length; k++) {
          double scale = Math.max(1, Math.abs(x[k]));
          assertTrue(Math.abs(x[k] - y[k]) <= tolerance * scale || (Float.isNaN(x[k]) && Float.isNaN(y[k])),
              "output " + i + "[" + k + "]: fused " + x[k] + ", segmented " + y[k]);
        }
      }
    }
  }

  @Test
  void severalCallbacksRunInProgramOrder() {
    GraphBuilder b = new GraphBuilder("several");
    Value x = b.parameter(F);
    Value a = b.hostCall(INC, x).get(0);
    Value c = b.hostCall(INC, b.hostCall(DOUBLE, a).get(0)).get(0);
    List<HostTensor> out = bothEqual(b.build(c), HostTensor.scalar(3f));
    assertEquals(9f, out.get(0).toFloatArray()[0]);
    assertEquals(List.of("inc 3.0", "double 4.0", "inc 8.0"), journal);
  }

  @Test
  void tupleInputsAndOutputs() {
    GraphBuilder b = new GraphBuilder("tuples");
    Value x = b.parameter(F4);
    Value n = b.parameter(DType.S32);
    List<Value> r = b.hostCall(SPLIT, b.add(x, b.constant(1f)), n);
    List<HostTensor> out = bothEqual(b.build(b.multiply(r.get(0), b.constant(2f)), r.get(1)),
        HostTensor.ofFloats(new float[] {1, 2, 3, 4}), HostTensor.scalar(5));
    assertArrayEquals(new float[] {10, 18}, out.get(0).toFloatArray());
    assertEquals(9, out.get(1).toIntArray()[0]);
  }

  @Test
  void dtypeChanges() {
    GraphBuilder b = new GraphBuilder("dtypes");
    Value x = b.parameter(F4);
    Value l = b.hostCall(TO_S64, b.multiply(x, b.constant(1.5f))).get(0);
    List<HostTensor> out = bothEqual(b.build(b.add(l, b.constant(1L))), HostTensor.ofFloats(new float[] {1, 2, 3, 4}));
    assertArrayEquals(new long[] {3, 4, 6, 7}, out.get(0).toLongArray());
  }

  @Test
  void callbackWithoutInputs() {
    GraphBuilder b = new GraphBuilder("no_inputs");
    Value x = b.parameter(F4);
    Value s = b.hostCall(SOURCE).get(0);
    List<HostTensor> out = bothEqual(b.build(b.add(x, s)), HostTensor.ofFloats(new float[] {1, 1, 1, 1}));
    assertArrayEquals(new float[] {8, 9, 10, 11}, out.get(0).toFloatArray());
  }

  @Test
  void effectfulCallbackWhoseResultIsUnusedStillRuns() {
    GraphBuilder b = new GraphBuilder("effect");
    Value x = b.parameter(F);
    b.hostCall(EFFECT, x);
    Graph g = b.build(b.add(x, b.constant(1f)));
    effects.set(0);
    run(callbacks, g, List.of(HostTensor.scalar(1f)), RunMode.FUSED);
    assertEquals(1, effects.get());
    run(callbacks, g, List.of(HostTensor.scalar(1f)), RunMode.SEGMENTED);
    assertEquals(2, effects.get());
  }

  /** acc = double(inc(acc)) n times: two callbacks per body. */
  static Graph loopWithTwoCallbacks() {
    GraphBuilder b = new GraphBuilder("loop2");
    Value x = b.parameter(F);
    Value n = b.parameter(DType.S32);
    List<Value> r = b.whileLoop(List.of(b.constant(0), x), (c, v) -> c.less(v.get(0), n),
        (c, v) -> List.of(c.add(v.get(0), c.constant(1)),
            c.hostCall(DOUBLE, c.hostCall(INC, v.get(1)).get(0)).get(0)));
    return b.build(r.get(1));
  }

  @Test
  void callbacksInsideAWhileLoop() {
    List<HostTensor> out = bothEqual(loopWithTwoCallbacks(), HostTensor.scalar(1f), HostTensor.scalar(3));
    assertEquals(((1 + 1) * 2 + 1) * 2 + 1 + ((1 + 1) * 2 + 1) * 2 + 1, out.get(0).toFloatArray()[0]);
    SegmentedGraph s = loopWithTwoCallbacks().segment(SegmentationOptions.defaults());
    assertEquals(2, s.hostCallSites());
    assertEquals(1, s.hostDrivenControlFlow());
  }

  @Test
  void callbackInsideALoopCondition() {
    GraphBuilder b = new GraphBuilder("cond_callback");
    Value x = b.parameter(F);
    List<Value> r = b.whileLoop(List.of(x),
        (c, v) -> c.less(c.hostCall(INC, v.get(0)).get(0), c.constant(20f)),
        (c, v) -> List.of(c.multiply(v.get(0), c.constant(3f))));
    assertEquals(27f, bothEqual(b.build(r.get(0)), HostTensor.scalar(1f)).get(0).toFloatArray()[0]);
  }

  @Test
  void callbacksInsideAConditional() {
    GraphBuilder b = new GraphBuilder("if_callback");
    Value x = b.parameter(F);
    Value y = b.ifThenElse(b.greater(x, b.constant(0f)),
        t -> List.of(t.hostCall(DOUBLE, x).get(0)),
        f -> List.of(f.hostCall(INC, f.negate(x)).get(0))).get(0);
    Graph g = b.build(b.add(y, b.constant(0.5f)));
    assertEquals(6.5f, bothEqual(g, HostTensor.scalar(3f)).get(0).toFloatArray()[0]);
    assertEquals(List.of("double 3.0"), journal);
    assertEquals(4.5f, bothEqual(g, HostTensor.scalar(-3f)).get(0).toFloatArray()[0]);
    assertEquals(List.of("inc 3.0"), journal);
  }

  @Test
  void nestedLoopsWithACallbackInTheInnerBody() {
    GraphBuilder b = new GraphBuilder("nested");
    Value x = b.parameter(F);
    List<Value> outer = b.whileLoop(List.of(b.constant(0), x), (c, v) -> c.less(v.get(0), c.constant(3)),
        (c, v) -> {
          List<Value> inner = c.whileLoop(List.of(c.constant(0), v.get(1)), (d, w) -> d.less(w.get(0), v.get(0)),
              (d, w) -> List.of(d.add(w.get(0), d.constant(1)), d.hostCall(INC, w.get(1)).get(0)));
          return List.of(c.add(v.get(0), c.constant(1)), c.multiply(inner.get(1), c.constant(2f)));
        });
    // i=0: x*2 = 2; i=1: (2+1)*2 = 6; i=2: (6+2)*2 = 16
    assertEquals(16f, bothEqual(b.build(outer.get(1)), HostTensor.scalar(1f)).get(0).toFloatArray()[0]);
  }

  @Test
  void accumulatorOfCallbackResults() {
    GraphBuilder b = new GraphBuilder("accumulate");
    Value x = b.parameter(F4);
    List<Value> r = b.whileLoop(List.of(b.constant(0), b.constant(0f), x), (c, v) -> c.less(v.get(0), c.constant(4)),
        (c, v) -> {
          Value s = c.hostCall(INC, c.reduceSum(v.get(2))).get(0);
          return List.of(c.add(v.get(0), c.constant(1)), c.add(v.get(1), s), c.add(v.get(2), c.constant(1f)));
        });
    List<HostTensor> out = bothEqual(b.build(r.get(1), r.get(2)), HostTensor.ofFloats(new float[] {0, 1, 2, 3}));
    assertEquals(7 + 11 + 15 + 19, out.get(0).toFloatArray()[0]);
  }

  @Test
  void aThrowingCallbackIsTheSameErrorInBothModes() {
    GraphBuilder b = new GraphBuilder("throws");
    Value x = b.parameter(F);
    Graph g = b.build(b.hostCall(THROWS, b.add(x, b.constant(1f))).get(0));
    CallbackException fused = assertThrows(CallbackException.class,
        () -> run(callbacks, g, List.of(HostTensor.scalar(1f)), RunMode.FUSED));
    CallbackException segmented = assertThrows(CallbackException.class,
        () -> run(callbacks, g, List.of(HostTensor.scalar(1f)), RunMode.SEGMENTED));
    assertEquals(fused.getMessage(), segmented.getMessage());
    assertEquals("seg-throws", segmented.callbackName());
    assertInstanceOf(IllegalStateException.class, segmented.getCause());
    assertEquals(0, HostCall.pendingCount());
    assertEquals(0, segmented(g).openBuffers());
  }

  @Test
  void aCallbackTimeoutIsTheSameErrorInBothModes() {
    GraphBuilder b = new GraphBuilder("hangs");
    Value x = b.parameter(F);
    Graph g = b.build(b.hostCall(HANGS, x).get(0));
    CallbackException fused = assertThrows(CallbackException.class,
        () -> run(callbacks, g, List.of(HostTensor.scalar(1f)), RunMode.FUSED));
    long start = System.nanoTime();
    CallbackException segmented = assertThrows(CallbackException.class,
        () -> run(callbacks, g, List.of(HostTensor.scalar(1f)), RunMode.SEGMENTED));
    assertTrue(System.nanoTime() - start < Duration.ofSeconds(3).toNanos());
    assertEquals(ErrorCode.DEADLINE_EXCEEDED, segmented.code());
    assertEquals(fused.getMessage(), segmented.getMessage());
    assertTrue(segmented.getMessage().contains("xla-actors.actors.callbacks.timeouts.seg-hangs"), segmented.getMessage());
  }

  /** A long loop of 20 ms callbacks: cancel stops it between stages, soon, leaving no call pending. */
  @Test
  void cancelStopsASegmentedRunBetweenStages() throws Exception {
    GraphBuilder b = new GraphBuilder("long_loop");
    Value x = b.parameter(F);
    List<Value> r = b.whileLoop(List.of(b.constant(0), x), (c, v) -> c.less(v.get(0), c.constant(100_000)),
        (c, v) -> List.of(c.add(v.get(0), c.constant(1)), c.hostCall(SLEEPS, v.get(1)).get(0)));
    Graph g = b.build(r.get(1));
    RunHandle handle = start(g, List.of(HostTensor.scalar(1f)), RunMode.SEGMENTED);
    Thread.sleep(200);
    long start = System.nanoTime();
    handle.cancel("test is done");
    CompletionException e = assertThrows(CompletionException.class, () -> handle.result().toCompletableFuture().join());
    long stoppedMs = (System.nanoTime() - start) / 1_000_000;
    assertTrue(stoppedMs < 1000, "stopped after " + stoppedMs + " ms");
    CallbackException cause = assertInstanceOf(CallbackException.class, e.getCause());
    assertEquals(ErrorCode.CANCELLED, cause.code());
    assertTrue(cause.getMessage().contains("test is done"), cause.getMessage());
    assertEquals(0, HostCall.pendingCount());
    // The caller got the cancellation at once; the orchestrating thread stops at the next stage boundary
    // and frees what the run made.
    long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
    while (segmented(g).openBuffers() != 0 && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(0, segmented(g).openBuffers(), "the cancelled run freed every buffer it made");
  }

  @Test
  void theRunTimeoutStopsASegmentedRun() {
    ActorsSettings settings = ActorsSettings.fromConfig(
        ConfigFactory.parseString("xla-actors.actors.runs.timeout = 400ms")
            .withFallback(ConfigFactory.defaultReference()).resolve());
    try (CallbackRuntime shortRuns = CallbackRuntime.create(testKit.system(), client, settings)) {
      shortRuns.register(SLEEPS).toCompletableFuture().join();
      GraphBuilder b = new GraphBuilder("too_long");
      Value x = b.parameter(F);
      List<Value> r = b.whileLoop(List.of(b.constant(0), x), (c, v) -> c.less(v.get(0), c.constant(100_000)),
          (c, v) -> List.of(c.add(v.get(0), c.constant(1)), c.hostCall(SLEEPS, v.get(1)).get(0)));
      long start = System.nanoTime();
      CallbackException e = assertThrows(CallbackException.class,
          () -> run(shortRuns, b.build(r.get(1)), List.of(HostTensor.scalar(1f)), RunMode.SEGMENTED));
      long ms = (System.nanoTime() - start) / 1_000_000;
      assertEquals(ErrorCode.DEADLINE_EXCEEDED, e.code());
      assertTrue(e.getMessage().contains("xla-actors.actors.runs.timeout"), e.getMessage());
      assertTrue(ms < 1500, "stopped after " + ms + " ms");
    }
  }

  @Test
  void theModeComesFromConfiguration() {
    ActorsSettings settings = ActorsSettings.fromConfig(
        ConfigFactory.parseString("xla-actors.actors.runs.mode = segmented")
            .withFallback(ConfigFactory.defaultReference()).resolve());
    assertEquals(RunMode.SEGMENTED, settings.runMode());
    assertEquals(RunMode.FUSED, ActorsSettings.fromConfig(ConfigFactory.defaultReference()).runMode());
    XlaException bad = assertThrows(XlaException.class, () -> ActorsSettings.fromConfig(
        ConfigFactory.parseString("xla-actors.actors.runs.mode = fast").withFallback(ConfigFactory.defaultReference()).resolve()));
    assertEquals("xla-actors.actors.runs.mode must be fused or segmented, got 'fast'", bad.getMessage());
    // A graph made from text cannot be segmented: the configured mode is what runs it.
    Graph fromText = new Graph("text", List.of(F), List.of(F), """
        func.func @main(%x: tensor<f32>) -> tensor<f32> {
          return %x : tensor<f32>
        }""", List.of());
    try (CallbackRuntime segmentedByDefault = CallbackRuntime.create(testKit.system(), client, settings)) {
      assertThrows(InvalidArgumentException.class, () -> segmentedByDefault.compile(fromText));
      try (BoundProgram fused = callbacks.compile(fromText)) {
        assertEquals(2f, callbacks.run(fused, Argument.of(List.of(HostTensor.scalar(2f)))).get(0).toFloatArray()[0]);
      }
    }
  }

  @Test
  void aDevicePerStageThroughTheActors() {
    int devices = client.devices().size();
    org.junit.jupiter.api.Assumptions.assumeTrue(devices >= 2, "the CPU client reports one device");
    Graph g = loopWithTwoCallbacks();
    try (SegmentedProgram p = new SegmentedProgram(g.segment(SegmentationOptions.defaults()),
        st -> SegmentedProgram.Target.of(client, st.index() % devices));
        SegmentedModel placed = SegmentedModel.of(p)) {
      List<HostTensor> in = List.of(HostTensor.scalar(1f), HostTensor.scalar(3));
      assertSame(run(callbacks, g, in, RunMode.FUSED), callbacks.run(placed, Argument.of(in)), 0);
      assertEquals(0, p.openBuffers());
      // Where the stages ran is the program's placement, whoever answers the host calls.
      SegmentedProgram.Result r = p.run(in, SegmentedProgram.HostCallInvoker.direct());
      for (SegmentedProgram.Executed e : r.stats().stageExecutions()) {
        assertEquals(e.stage() % devices, e.target().device().index(), e.toString());
      }
      assertEquals(0, p.openBuffers());
    }
  }

  @Test
  void stagesOnASecondClientThroughTheActors() {
    try (XlaClient other = XlaClient.create()) {
      Graph g = loopWithTwoCallbacks();
      SegmentedGraph s = g.segment(SegmentationOptions.defaults());
      SegmentedProgram.Placement odd = st -> st.index() % 2 == 1
          ? new SegmentedProgram.Target(other, other.devices().get(0))
          : new SegmentedProgram.Target(client, client.devices().get(0));
      try (SegmentedProgram p = new SegmentedProgram(s, odd); SegmentedModel placed = SegmentedModel.of(p)) {
        List<HostTensor> in = List.of(HostTensor.scalar(1f), HostTensor.scalar(3));
        assertSame(run(callbacks, g, in, RunMode.FUSED), callbacks.run(placed, Argument.of(in)), 0);
        // Where the stages ran is the program's placement, whoever answers the host calls.
        SegmentedProgram.Result r = p.run(in, SegmentedProgram.HostCallInvoker.direct());
        assertTrue(r.stats().stageExecutions().stream().anyMatch(e -> e.target().client() == other));
        for (SegmentedProgram.Executed e : r.stats().stageExecutions()) {
          assertTrue(e.target().client() == (e.stage() % 2 == 1 ? other : client), e.toString());
        }
      }
    }
  }
}
