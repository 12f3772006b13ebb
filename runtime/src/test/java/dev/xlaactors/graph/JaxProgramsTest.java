package dev.xlaactors.graph;

import static dev.xlaactors.runtime.DType.F32;
import static dev.xlaactors.runtime.DType.S32;

import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.util.List;
import java.util.function.Function;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Whole programs written with the builder, run on the plugin and compared with JAX's results for the same
 * inputs (fixtures written by tools/jax_fixtures.py, which holds the JAX version of each program).
 */
class JaxProgramsTest {
  static XlaClient client;

  @BeforeAll
  static void open() {
    client = XlaClient.create();
  }

  @AfterAll
  static void close() {
    client.close();
  }

  /** Declares one parameter per fixture input, builds the program with {@code body}, runs and compares. */
  private static void check(String name, double rtol, double atol, Function<Ctx, List<Value>> body) {
    JaxFixture fixture = JaxFixture.load(name);
    GraphBuilder b = new GraphBuilder(name);
    List<Value> params = fixture.inputs().stream().map(t -> b.parameter(t.type())).toList();
    Graph graph = b.build(body.apply(new Ctx(b, params)));
    try (Executable exe = graph.compile(client)) {
      fixture.check(exe.run(fixture.inputs().toArray(HostTensor[]::new)), rtol, atol, name);
    }
  }

  /** The builder and the parameters, for the program bodies below. */
  record Ctx(GraphBuilder b, List<Value> p) {
    Value p(int i) {
      return p.get(i);
    }
  }

  static Value dense(GraphBuilder b, Value x, Value w, Value bias) {
    return b.add(b.matmul(x, w), bias);
  }

  @Test
  void mlp() {
    check("mlp", 1e-5, 1e-6, c -> {
      GraphBuilder b = c.b();
      Value h = Composites.relu(b, dense(b, c.p(0), c.p(1), c.p(2)));
      return List.of(Composites.softmax(b, dense(b, h, c.p(3), c.p(4)), -1));
    });
  }

  @Test
  void attentionBlock() {
    check("attention", 1e-4, 1e-5, c -> {
      GraphBuilder b = c.b();
      Value x = c.p(0);
      long bsz = x.shape().dim(0), seq = x.shape().dim(1), d = x.shape().dim(2), heads = 2;
      Value h = Composites.layerNorm(b, x, c.p(1), c.p(2), 1e-5);
      Function<Value, Value> split = t -> b.transpose(b.reshape(t, bsz, seq, heads, d / heads), 0, 2, 1, 3);
      Value q = split.apply(b.matmul(h, c.p(3)));
      Value k = split.apply(b.matmul(h, c.p(4)));
      Value v = split.apply(b.matmul(h, c.p(5)));
      Value scores = b.divide(b.matmul(q, b.transpose(k, 0, 1, 3, 2)), b.constant((float) Math.sqrt(d / heads)));
      Value attn = b.matmul(Composites.softmax(b, scores, -1), v);
      Value merged = b.reshape(b.transpose(attn, 0, 2, 1, 3), bsz, seq, d);
      Value x1 = b.add(x, b.matmul(merged, c.p(6)));
      Value mlpOut = b.matmul(Composites.gelu(b, b.matmul(Composites.layerNorm(b, x1, c.p(7), c.p(8), 1e-5), c.p(9))), c.p(10));
      return List.of(b.add(x1, mlpOut));
    });
  }

  @Test
  void layerNorm() {
    check("layer_norm", 1e-5, 1e-5, c -> List.of(Composites.layerNorm(c.b(), c.p(0), c.p(1), c.p(2), 1e-5)));
  }

  @Test
  void gelu() {
    check("gelu", 1e-5, 1e-6, c -> List.of(Composites.gelu(c.b(), c.p(0))));
  }

  @Test
  void logsumexp() {
    check("logsumexp", 1e-6, 1e-6, c -> {
      GraphBuilder b = c.b();
      Value m = b.reduceMax(c.p(0), -1);
      Value shifted = b.subtract(c.p(0), Composites.keepDims(b, m, c.p(0), -1));
      return List.of(b.add(b.log(b.reduceSum(b.exp(shifted), -1)), m));
    });
  }

  @Test
  void loopSumSquares() {
    check("loop_sum_squares", 1e-6, 1e-6, c -> {
      GraphBuilder b = c.b();
      Value x = c.p(0);
      long rows = x.shape().dim(0), cols = x.shape().dim(1);
      List<Value> out = b.whileLoop(List.of(b.constant(0), b.full(TensorType.of(F32, cols), 0)),
          (r, v) -> r.less(v.get(0), r.constant((int) rows)),
          (r, v) -> {
            Value row = r.reshape(r.dynamicSlice(x, List.of(v.get(0), r.constant(0)), 1, cols), cols);
            return List.of(r.add(v.get(0), r.constant(1)), r.add(v.get(1), r.multiply(row, row)));
          });
      return List.of(out.get(1));
    });
  }

  @Test
  void condScale() {
    check("cond_scale", 0, 0, c -> c.b().ifThenElse(c.p(0),
        t -> List.of(t.multiply(c.p(1), t.constant(2f))),
        f -> List.of(f.negate(c.p(1)))));
  }

  @Test
  void argmaxOneHot() {
    check("argmax_one_hot", 0, 0, c -> {
      GraphBuilder b = c.b();
      Value idx = b.argmax(c.p(0), -1);
      Value iota = b.iota(new TensorType(S32, c.p(0).shape()), 1);
      Value hot = b.convert(b.equal(iota, b.reshape(idx, -1, 1)), F32);
      return List.of(idx, hot);
    });
  }

  @Test
  void movingAverage() {
    check("moving_average", 1e-6, 1e-6, c -> {
      GraphBuilder b = c.b();
      Value p = b.pad(c.p(0), b.constant(0f), new long[] {0, 1}, new long[] {0, 1}, new long[] {0, 0});
      long n = c.p(0).shape().dim(1);
      Value sum = b.add(b.add(b.sliceAxis(p, 1, 0, n), b.sliceAxis(p, 1, 1, n + 1)), b.sliceAxis(p, 1, 2, n + 2));
      return List.of(b.divide(sum, b.constant(3f)));
    });
  }

  @Test
  void integerOps() {
    check("int_ops", 0, 0, c -> {
      GraphBuilder b = c.b();
      Value clipped = b.min(b.max(c.p(0), b.constant(-10)), b.constant(10));
      return List.of(b.divide(c.p(0), c.p(1)), b.remainder(c.p(0), c.p(1)), clipped, b.reduceSum(c.p(0), 0));
    });
  }

  @Test
  void standardize() {
    check("standardize", 1e-5, 1e-5, c -> {
      GraphBuilder b = c.b();
      Value x = c.p(0);
      Value centered = b.subtract(x, Composites.mean(b, x, 0));
      return List.of(b.divide(centered, b.sqrt(b.add(Composites.variance(b, x, 0), b.constant(1e-6f)))));
    });
  }

  @Test
  void batchedScores() {
    check("batched_scores", 1e-5, 1e-5, c -> {
      GraphBuilder b = c.b();
      Value scores = b.dotGeneral(c.p(0), c.p(1), new ShapeInference.DotDimensions(
          new long[] {0}, new long[] {0}, new long[] {2}, new long[] {2}));
      return List.of(scores, b.reduceSum(b.tanh(c.p(0)), 1, 2));
    });
  }

  @Test
  void concatSliceUpdate() {
    check("concat_slice_update", 0, 0, c -> {
      GraphBuilder b = c.b();
      Value x = c.p(0);
      Value i = c.p(1);
      Value y = b.concatenate(1, x, b.multiply(x, b.constant(2f)));
      Value z = b.dynamicSlice(y, List.of(i, b.constant(1)), 2, 3);
      return List.of(b.dynamicUpdateSlice(y, b.full(TensorType.of(F32, 1, 2), 1), List.of(i, i)), z);
    });
  }
}
