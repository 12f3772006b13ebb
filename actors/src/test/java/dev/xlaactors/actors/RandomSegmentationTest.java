package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.SegmentationOptions;
import dev.xlaactors.graph.SegmentedGraph;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Random graphs with callbacks at random places (top level, inside loops, conditionals, nested), run
 * fused and segmented: equal outputs, the same callbacks called in the same order on the same inputs.
 * Each graph's seed is printed; replay one with {@code -Dsegmented.seed=<seed> -Dsegmented.count=1}.
 */
class RandomSegmentationTest {
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static final TensorType F4 = TensorType.of(DType.F32, 4);
  private static final List<String> journal = Collections.synchronizedList(new ArrayList<>());
  private static XlaClient client;
  private static CallbackRuntime callbacks;

  static final HostCallback AFFINE = new HostCallback("rnd-affine", List.of(F4), null, (in, s) -> {
    float[] v = in.get(0).toFloatArray();
    journal.add("affine " + Arrays.toString(v));
    for (int i = 0; i < v.length; i++) {
      v[i] = v[i] * 0.9f + 0.1f;
    }
    return List.of(HostTensor.ofFloats(v));
  });
  static final HostCallback PAIR = new HostCallback("rnd-pair", List.of(F4, TensorType.of(DType.S32)), null, (in, s) -> {
    float[] a = in.get(0).toFloatArray();
    float[] b = in.get(1).toFloatArray();
    journal.add("pair " + Arrays.toString(a) + " " + Arrays.toString(b));
    float[] out = new float[4];
    int positives = 0;
    for (int i = 0; i < 4; i++) {
      out[i] = Math.max(a[i], b[i]);
      positives += a[i] > 0 ? 1 : 0;
    }
    return List.of(HostTensor.ofFloats(out), HostTensor.scalar(positives));
  });

  @BeforeAll
  static void start() {
    client = XlaClient.create();
    callbacks = CallbackRuntime.create(testKit.system(), client);
    callbacks.registerAll(List.of(AFFINE, PAIR)).toCompletableFuture().join();
  }

  @AfterAll
  static void stop() {
    callbacks.close();
    client.close();
    testKit.shutdownTestKit();
  }

  /** A random graph of f32[4] -> (f32[4], f32[]), deterministic in {@code seed}. */
  static Graph randomGraph(long seed) {
    Random r = new Random(seed);
    GraphBuilder b = new GraphBuilder("random_" + Long.toUnsignedString(seed));
    Value x = b.parameter(F4);
    Value y = chain(b, x, x, r, 0);
    return b.build(y, b.reduceSum(y));
  }

  private static Value chain(GraphBuilder b, Value x, Value outer, Random r, int depth) {
    int n = 1 + r.nextInt(4);
    for (int i = 0; i < n; i++) {
      int kind = r.nextInt(depth < 2 ? 9 : 5);
      switch (kind) {
        case 0 -> x = b.add(x, b.constant(r.nextFloat() - 0.5f));
        case 1 -> x = b.tanh(b.multiply(x, b.constant(0.5f + r.nextFloat())));
        case 2 -> x = b.add(x, b.multiply(outer, b.constant(0.25f)));     // a value of an enclosing scope
        case 3, 4 -> x = b.hostCall(AFFINE, x).get(0);
        case 5 -> {
          List<Value> p = b.hostCall(PAIR, x, b.negate(outer));
          x = b.add(x, b.convert(p.get(1), DType.F32));
          x = b.multiply(x, b.constant(0.5f));
          x = b.add(x, p.get(0));
        }
        case 6 -> {
          int k = 1 + r.nextInt(3);
          Value captured = x;
          boolean callbackInCondition = r.nextInt(4) == 0;
          List<Value> loop = b.whileLoop(List.of(b.constant(0), x),
              (c, v) -> callbackInCondition
                  ? c.and(c.less(v.get(0), c.constant(k)),
                      c.less(c.reduceSum(c.hostCall(AFFINE, v.get(1)).get(0)), c.constant(1e6f)))
                  : c.less(v.get(0), c.constant(k)),
              (c, v) -> List.of(c.add(v.get(0), c.constant(1)), chain(c, v.get(1), captured, r, depth + 1)));
          x = loop.get(1);
        }
        case 7 -> {
          Value captured = x;
          Value p = b.greater(b.reduceSum(x), b.constant(r.nextFloat() - 0.5f));
          x = b.ifThenElse(p, t -> List.of(chain(t, captured, outer, r, depth + 1)),
              f -> List.of(chain(f, f.negate(captured), outer, r, depth + 1))).get(0);
        }
        default -> x = b.hostCall(AFFINE, b.tanh(x)).get(0);
      }
    }
    return x;
  }

  @Test
  void fusedAndSegmentedAgreeOnRandomGraphs() {
    long base = Long.getLong("segmented.seed", System.nanoTime());
    int count = Integer.getInteger("segmented.count", 30);
    System.out.println("RandomSegmentationTest: seeds " + base + " .. " + (base + count - 1)
        + " (replay: -Dsegmented.seed=<seed> -Dsegmented.count=1)");
    int withLoops = 0;
    int withCallbacks = 0;
    for (long seed = base; seed < base + count; seed++) {
      Graph g = randomGraph(seed);
      SegmentedGraph s = g.segment(SegmentationOptions.defaults());
      withLoops += s.hostDrivenControlFlow() > 0 ? 1 : 0;
      withCallbacks += s.hostCallSites() > 0 ? 1 : 0;
      HostTensor in = HostTensor.ofFloats(new float[] {0.5f, -1.25f, 2f, -0.125f});
      try {
        journal.clear();
        List<HostTensor> fused = SegmentedRunTest.run(callbacks, g, List.of(in), RunMode.FUSED);
        List<String> fusedCalls = List.copyOf(journal);
        journal.clear();
        List<HostTensor> segmented = SegmentedRunTest.run(callbacks, g, List.of(in), RunMode.SEGMENTED);
        SegmentedRunTest.assertSame(fused, segmented, 1e-5);
        assertEquals(fusedCalls.size(), journal.size(), "number of callbacks called");
        // Host-call sites: every remaining call site counted, none invented.
        assertTrue(s.stages().size() >= 1 || s.hostCallSites() > 0);
      } catch (AssertionError | RuntimeException e) {
        throw new AssertionError("seed " + seed + " (replay: -Dsegmented.seed=" + seed + " -Dsegmented.count=1)\n"
            + s.describe(), e);
      }
      assertEquals(0, HostCall.pendingCount());
    }
    System.out.println("RandomSegmentationTest: " + count + " graphs, " + withCallbacks + " with callbacks, " + withLoops
        + " with Java-driven loops or conditionals");
  }
}
