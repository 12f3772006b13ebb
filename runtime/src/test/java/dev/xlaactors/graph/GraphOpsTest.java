package dev.xlaactors.graph;

import static dev.xlaactors.graph.Reference.assertClose;
import static dev.xlaactors.graph.Reference.count;
import static dev.xlaactors.graph.Reference.floats;
import static dev.xlaactors.graph.Reference.random;
import static dev.xlaactors.graph.Reference.ravel;
import static dev.xlaactors.graph.Reference.unravel;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.xlaactors.graph.ShapeInference.DotDimensions;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.Shape;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.util.List;
import java.util.Random;
import java.util.function.BinaryOperator;
import java.util.function.DoubleBinaryOperator;
import java.util.function.DoubleUnaryOperator;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Every builder op on the real XLA CPU plugin, checked against plain-Java reference arithmetic. */
class GraphOpsTest {
  static XlaClient client;

  @BeforeAll
  static void open() {
    client = XlaClient.create();
  }

  @AfterAll
  static void close() {
    client.close();
  }

  static List<HostTensor> run(Graph g, HostTensor... inputs) {
    try (Executable e = g.compile(client)) {
      assertEquals(g.outputTypes(), e.outputTypes(), "output types inferred by the builder vs XLA");
      return e.run(inputs);
    }
  }

  static final long[] DIMS = {2, 3, 1, 4};

  private void binaryFloat(String name, BinaryOperator<Value> op, DoubleBinaryOperator ref, float lo, float hi, double rtol) {
    Random r = random(name);
    long[] bDims = {3, 4}; // [2,3,1,4] with [3,4] broadcasts to [2,3,3,4]
    float[] a = floats(r, count(DIMS), lo, hi);
    float[] b = floats(r, count(bDims), lo, hi);
    GraphBuilder g = new GraphBuilder(name);
    Value x = g.parameter(DType.F32, DIMS);
    Value y = g.parameter(DType.F32, bDims);
    Graph graph = g.build(op.apply(x, y));
    long[] out = {2, 3, 3, 4};
    assertEquals(TensorType.of(DType.F32, out), graph.outputTypes().get(0));
    float[] expected = new float[count(out)];
    for (int i = 0; i < expected.length; i++) {
      long[] idx = unravel(i, out);
      expected[i] = (float) ref.applyAsDouble(
          Reference.broadcastRead(a, DIMS, idx), Reference.broadcastRead(b, bDims, idx));
    }
    float[] actual = run(graph, HostTensor.ofFloats(a, DIMS), HostTensor.ofFloats(b, bDims)).get(0).toFloatArray();
    assertClose(expected, actual, rtol, 1e-6, name);
  }

  @Test
  void elementwiseBinaryFloatOpsBroadcastAgainstJavaReference() {
    binaryFloat("add", (a, b) -> a.scope().add(a, b), (a, b) -> (float) a + (float) b, -10, 10, 1e-6);
    binaryFloat("subtract", (a, b) -> a.scope().subtract(a, b), (a, b) -> (float) a - (float) b, -10, 10, 1e-6);
    binaryFloat("multiply", (a, b) -> a.scope().multiply(a, b), (a, b) -> (float) a * (float) b, -10, 10, 1e-6);
    binaryFloat("divide", (a, b) -> a.scope().divide(a, b), (a, b) -> (float) a / (float) b, 0.5f, 10, 1e-6);
    binaryFloat("remainder", (a, b) -> a.scope().remainder(a, b), (a, b) -> (float) a % (float) b, -10, 10, 1e-5);
    binaryFloat("power", (a, b) -> a.scope().power(a, b), Math::pow, 0.1f, 3, 1e-5);
    binaryFloat("max", (a, b) -> a.scope().max(a, b), Math::max, -10, 10, 0);
    binaryFloat("min", (a, b) -> a.scope().min(a, b), Math::min, -10, 10, 0);
  }

  private void unaryFloat(String name, UnaryOperator<Value> op, DoubleUnaryOperator ref, float lo, float hi, double rtol, double atol) {
    Random r = random(name);
    float[] a = floats(r, count(DIMS), lo, hi);
    GraphBuilder g = new GraphBuilder(name);
    Value x = g.parameter(DType.F32, DIMS);
    Graph graph = g.build(op.apply(x));
    float[] expected = new float[a.length];
    for (int i = 0; i < a.length; i++) {
      expected[i] = (float) ref.applyAsDouble(a[i]);
    }
    assertClose(expected, run(graph, HostTensor.ofFloats(a, DIMS)).get(0).toFloatArray(), rtol, atol, name);
  }

  @Test
  void elementwiseUnaryFloatOpsAgainstJavaReference() {
    unaryFloat("negate", x -> x.scope().negate(x), v -> -v, -5, 5, 0, 0);
    unaryFloat("abs", x -> x.scope().abs(x), Math::abs, -5, 5, 0, 0);
    unaryFloat("sign", x -> x.scope().sign(x), Math::signum, -5, 5, 0, 0);
    unaryFloat("exp", x -> x.scope().exp(x), Math::exp, -5, 5, 2e-6, 1e-6);
    unaryFloat("log", x -> x.scope().log(x), Math::log, 0.01f, 10, 2e-6, 1e-6);
    unaryFloat("log1p", x -> x.scope().log1p(x), Math::log1p, -0.5f, 1e-3f, 2e-6, 1e-9);
    unaryFloat("tanh", x -> x.scope().tanh(x), Math::tanh, -5, 5, 2e-6, 1e-6);
    unaryFloat("logistic", x -> x.scope().logistic(x), v -> 1 / (1 + Math.exp(-v)), -8, 8, 2e-6, 1e-6);
    unaryFloat("sqrt", x -> x.scope().sqrt(x), Math::sqrt, 0, 10, 1e-6, 0);
    unaryFloat("rsqrt", x -> x.scope().rsqrt(x), v -> 1 / Math.sqrt(v), 0.01f, 10, 2e-6, 0);
    unaryFloat("floor", x -> x.scope().floor(x), Math::floor, -5, 5, 0, 0);
    unaryFloat("ceil", x -> x.scope().ceil(x), Math::ceil, -5, 5, 0, 0);
  }

  @Test
  void roundingHalfwayCases() {
    float[] a = {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 2.4f, -2.6f, Float.NaN, Float.POSITIVE_INFINITY};
    GraphBuilder g = new GraphBuilder("rounding");
    Value x = g.parameter(DType.F32, a.length);
    List<HostTensor> out = run(g.build(g.round(x), g.roundNearestEven(x)), HostTensor.ofFloats(a, a.length));
    float[] afz = new float[a.length];
    float[] even = new float[a.length];
    for (int i = 0; i < a.length; i++) {
      afz[i] = Float.isNaN(a[i]) || Float.isInfinite(a[i]) ? a[i] : (float) (Math.signum(a[i]) * Math.floor(Math.abs(a[i]) + 0.5));
      even[i] = (float) Math.rint(a[i]);
    }
    assertClose(afz, out.get(0).toFloatArray(), 0, 0, "round_nearest_afz");
    assertClose(even, out.get(1).toFloatArray(), 0, 0, "round_nearest_even");
  }

  @Test
  void integerDivisionAndRemainderTruncateTowardZero() {
    Random r = random("intdiv");
    int n = 64;
    int[] a = Reference.ints(r, n, -100, 100);
    int[] b = Reference.ints(r, n, -9, 9);
    for (int i = 0; i < n; i++) {
      if (b[i] == 0) {
        b[i] = 7;
      }
    }
    a[0] = -7; b[0] = 2; // -3 and -1 in C semantics, -4 and 1 in Python's
    a[1] = 7; b[1] = -2;
    GraphBuilder g = new GraphBuilder("intdiv");
    Value x = g.parameter(DType.S32, n);
    Value y = g.parameter(DType.S32, n);
    List<HostTensor> out = run(g.build(g.divide(x, y), g.remainder(x, y), g.abs(x), g.sign(x), g.negate(x)),
        HostTensor.ofInts(a, n), HostTensor.ofInts(b, n));
    int[] q = new int[n], m = new int[n], abs = new int[n], sign = new int[n], neg = new int[n];
    for (int i = 0; i < n; i++) {
      q[i] = a[i] / b[i];
      m[i] = a[i] % b[i];
      abs[i] = Math.abs(a[i]);
      sign[i] = Integer.signum(a[i]);
      neg[i] = -a[i];
    }
    assertArrayEquals(q, out.get(0).toIntArray(), "divide");
    assertArrayEquals(m, out.get(1).toIntArray(), "remainder");
    assertArrayEquals(abs, out.get(2).toIntArray(), "abs");
    assertArrayEquals(sign, out.get(3).toIntArray(), "sign");
    assertArrayEquals(neg, out.get(4).toIntArray(), "negate");
  }

  @Test
  void compareAllDirectionsWithNaNAndSelect() {
    float[] a = {1, 2, 3, Float.NaN, Float.NEGATIVE_INFINITY, 0f};
    float[] b = {1, 3, 2, Float.NaN, 0, -0f};
    GraphBuilder g = new GraphBuilder("compare");
    Value x = g.parameter(DType.F32, a.length);
    Value y = g.parameter(DType.F32, b.length);
    Value[] outs = new Value[ComparisonDirection.values().length + 1];
    for (ComparisonDirection d : ComparisonDirection.values()) {
      outs[d.ordinal()] = g.compare(x, d, y);
    }
    outs[outs.length - 1] = g.select(g.less(x, y), x, g.constant(-1f)); // broadcasts the scalar
    List<HostTensor> out = run(g.build(outs), HostTensor.ofFloats(a, a.length), HostTensor.ofFloats(b, b.length));
    for (ComparisonDirection d : ComparisonDirection.values()) {
      boolean[] expected = new boolean[a.length];
      for (int i = 0; i < a.length; i++) {
        expected[i] = switch (d) {
          case EQ -> a[i] == b[i];
          case NE -> a[i] != b[i];
          case LT -> a[i] < b[i];
          case LE -> a[i] <= b[i];
          case GT -> a[i] > b[i];
          case GE -> a[i] >= b[i];
        };
      }
      assertArrayEquals(expected, out.get(d.ordinal()).toBooleanArray(), d.name());
    }
    assertClose(new float[] {-1, 2, -1, -1, Float.NEGATIVE_INFINITY, -1}, out.get(outs.length - 1).toFloatArray(), 0, 0, "select");
  }

  @Test
  void unsignedCompareAndConvert() {
    GraphBuilder g = new GraphBuilder("convert");
    Value x = g.parameter(DType.F32, 5);
    Value u = g.parameter(DType.U8, 2);
    Graph graph = g.build(g.convert(x, DType.S32), g.convert(x, DType.PRED), g.convert(g.convert(x, DType.S32), DType.F64),
        g.less(u, g.constant(DType.U8, 128)));
    List<HostTensor> out = run(graph, HostTensor.ofFloats(new float[] {1.9f, -1.9f, 0f, 3.5f, -0.0f}, 5),
        HostTensor.ofLongs(DType.U8, new long[] {200, 5}, 2));
    assertArrayEquals(new int[] {1, -1, 0, 3, 0}, out.get(0).toIntArray());
    assertArrayEquals(new boolean[] {true, true, false, true, false}, out.get(1).toBooleanArray());
    assertArrayEquals(new double[] {1, -1, 0, 3, 0}, out.get(2).toDoubleArray());
    assertArrayEquals(new boolean[] {false, true}, out.get(3).toBooleanArray(), "200 is not < 128 unsigned");
  }

  @Test
  void constantsRoundTripExactlyForEveryDType() {
    GraphBuilder g = new GraphBuilder("constants");
    float[] special = {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, -0f, Float.MIN_VALUE, 1e38f};
    HostTensor[] tensors = {
      HostTensor.ofFloats(special, 2, 3),
      HostTensor.ofDoubles(new double[] {Math.PI, Double.NaN, -1e300}, 3),
      HostTensor.ofHalfFloats(new float[] {1.5f, -65504f}, 2),
      HostTensor.ofBFloat16s(new float[] {1.5f, 3e38f}, 2),
      HostTensor.ofLongs(DType.U8, new long[] {0, 255}, 2),
      HostTensor.ofLongs(DType.S64, new long[] {Long.MIN_VALUE, Long.MAX_VALUE}, 2),
      HostTensor.ofLongs(DType.U32, new long[] {4294967295L}),
      HostTensor.ofBooleans(new boolean[] {true, false, true}, 3),
      HostTensor.ofFloats(new float[0], 0, 3),
      HostTensor.ofFloats(new float[] {Float.NaN}),
    };
    Value[] outs = new Value[tensors.length];
    for (int i = 0; i < tensors.length; i++) {
      outs[i] = g.constant(tensors[i]);
    }
    List<HostTensor> out = run(g.build(outs));
    for (int i = 0; i < tensors.length; i++) {
      assertEquals(tensors[i].type(), out.get(i).type());
      assertArrayEquals(tensors[i].toByteArray(), out.get(i).toByteArray(), "constant " + i + " " + tensors[i].type());
    }
  }

  @Test
  void broadcastingRulesScalarVectorAndRank4() {
    GraphBuilder g = new GraphBuilder("broadcasting");
    Value x = g.parameter(DType.F32, 2, 1, 3, 1);
    Value v = g.parameter(DType.F32, 4);
    Value s = g.constant(10f);
    Value sum = g.add(g.add(x, v), s); // [2,1,3,4]
    Value explicit = g.broadcastInDim(v, Shape.of(4, 2), 0);
    Graph graph = g.build(sum, explicit, g.broadcastTo(s, Shape.of(0, 2)));
    float[] xs = {1, 2, 3, 4, 5, 6};
    float[] vs = {100, 200, 300, 400};
    List<HostTensor> out = run(graph, HostTensor.ofFloats(xs, 2, 1, 3, 1), HostTensor.ofFloats(vs, 4));
    assertEquals(TensorType.of(DType.F32, 2, 1, 3, 4), out.get(0).type());
    float[] expected = new float[24];
    for (int i = 0; i < 24; i++) {
      long[] idx = unravel(i, new long[] {2, 1, 3, 4});
      expected[i] = xs[(int) (idx[0] * 3 + idx[2])] + vs[(int) idx[3]] + 10;
    }
    assertClose(expected, out.get(0).toFloatArray(), 0, 0, "broadcast add");
    assertClose(new float[] {100, 100, 200, 200, 300, 300, 400, 400}, out.get(1).toFloatArray(), 0, 0, "broadcast_in_dim");
    assertEquals(TensorType.of(DType.F32, 0, 2), out.get(2).type());
  }

  @Test
  void emptyDimensionsAndScalars() {
    GraphBuilder g = new GraphBuilder("empty");
    Value e = g.parameter(DType.F32, 0, 3);
    Value s = g.parameter(DType.F32);
    Graph graph = g.build(g.add(e, s), g.reduceSum(e, 0), g.reduceMax(e, 0), g.reduceSum(e), g.exp(s),
        g.concatenate(0, e, g.reshape(g.broadcastTo(s, Shape.of(3)), 1, 3)));
    List<HostTensor> out = run(graph, HostTensor.ofFloats(new float[0], 0, 3), HostTensor.ofFloats(new float[] {2f}));
    assertEquals(TensorType.of(DType.F32, 0, 3), out.get(0).type());
    assertClose(new float[] {0, 0, 0}, out.get(1).toFloatArray(), 0, 0, "sum over empty axis");
    assertClose(new float[] {Float.NEGATIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.NEGATIVE_INFINITY},
        out.get(2).toFloatArray(), 0, 0, "max over empty axis");
    assertClose(new float[] {0}, out.get(3).toFloatArray(), 0, 0, "sum of empty");
    assertClose(new float[] {(float) Math.exp(2)}, out.get(4).toFloatArray(), 1e-6, 0, "scalar exp");
    assertClose(new float[] {2, 2, 2}, out.get(5).toFloatArray(), 0, 0, "concat with empty");
  }

  @Test
  void reshapeTransposeRank4() {
    Random r = random("transpose");
    long[] dims = {2, 3, 4, 5};
    float[] a = floats(r, 120, -1, 1);
    GraphBuilder g = new GraphBuilder("transpose");
    Value x = g.parameter(DType.F32, dims);
    Value t = g.transpose(x, 3, 1, 0, 2); // [5,3,2,4]
    Graph graph = g.build(t, g.reshape(x, 6, -1));
    List<HostTensor> out = run(graph, HostTensor.ofFloats(a, dims));
    long[] tdims = {5, 3, 2, 4};
    float[] expected = new float[120];
    for (int i = 0; i < 120; i++) {
      long[] o = unravel(i, tdims);
      expected[i] = a[ravel(new long[] {o[2], o[1], o[3], o[0]}, dims)];
    }
    assertEquals(TensorType.of(DType.F32, tdims), out.get(0).type());
    assertClose(expected, out.get(0).toFloatArray(), 0, 0, "transpose");
    assertEquals(TensorType.of(DType.F32, 6, 20), out.get(1).type());
    assertClose(a, out.get(1).toFloatArray(), 0, 0, "reshape");
  }

  @Test
  void sliceStridedAndPad() {
    float[] a = new float[20];
    for (int i = 0; i < 20; i++) {
      a[i] = i;
    }
    GraphBuilder g = new GraphBuilder("slicepad");
    Value x = g.parameter(DType.F32, 4, 5);
    Value sliced = g.slice(x, new long[] {1, 0}, new long[] {4, 5}, new long[] {2, 2}); // rows 1,3 cols 0,2,4
    Value row = g.sliceAxis(x, 0, 2, 3);
    Value v = g.reshape(row, 5);
    Value padded = g.pad(v, g.constant(-1f), new long[] {2}, new long[] {-1}, new long[] {1});
    List<HostTensor> out = run(g.build(sliced, padded), HostTensor.ofFloats(a, 4, 5));
    assertClose(new float[] {5, 7, 9, 15, 17, 19}, out.get(0).toFloatArray(), 0, 0, "slice");
    // [10,11,12,13,14] interior 1 -> 10,-1,11,-1,12,-1,13,-1,14 ; low 2 ; high -1 crops the last
    assertClose(new float[] {-1, -1, 10, -1, 11, -1, 12, -1, 13, -1}, out.get(1).toFloatArray(), 0, 0, "pad");
  }

  @Test
  void dynamicSliceAndUpdateClampStarts() {
    float[] a = new float[12];
    for (int i = 0; i < 12; i++) {
      a[i] = i;
    }
    GraphBuilder g = new GraphBuilder("dynslice");
    Value x = g.parameter(DType.F32, 3, 4);
    Value i = g.parameter(DType.S32);
    Value j = g.parameter(DType.S32);
    Value piece = g.dynamicSlice(x, List.of(i, j), 2, 2);
    Value updated = g.dynamicUpdateSlice(x, g.full(TensorType.of(DType.F32, 1, 3), 99), List.of(i, j));
    Graph graph = g.build(piece, updated);
    List<HostTensor> out = run(graph, HostTensor.ofFloats(a, 3, 4), HostTensor.scalar(1), HostTensor.scalar(1));
    assertClose(new float[] {5, 6, 9, 10}, out.get(0).toFloatArray(), 0, 0, "dynamic_slice");
    assertClose(new float[] {0, 1, 2, 3, 4, 99, 99, 99, 8, 9, 10, 11}, out.get(1).toFloatArray(), 0, 0, "dynamic_update_slice");
    out = run(graph, HostTensor.ofFloats(a, 3, 4), HostTensor.scalar(5), HostTensor.scalar(-3)); // clamped to (1,0)/(2,0)
    assertClose(new float[] {4, 5, 8, 9}, out.get(0).toFloatArray(), 0, 0, "clamped dynamic_slice");
    assertClose(new float[] {0, 1, 2, 3, 4, 5, 6, 7, 99, 99, 99, 11}, out.get(1).toFloatArray(), 0, 0, "clamped update");
  }

  @Test
  void concatenateAndIota() {
    GraphBuilder g = new GraphBuilder("concat");
    Value a = g.iota(TensorType.of(DType.S32, 2, 3), 1);
    Value b = g.iota(TensorType.of(DType.S32, 2, 2), 0);
    Value c = g.concatenate(-1, a, b);
    List<HostTensor> out = run(g.build(c, g.iota(TensorType.of(DType.F32, 4), 0)));
    assertArrayEquals(new int[] {0, 1, 2, 0, 0, 0, 1, 2, 1, 1}, out.get(0).toIntArray());
    assertClose(new float[] {0, 1, 2, 3}, out.get(1).toFloatArray(), 0, 0, "iota f32");
  }

  private static float[] matmulRef(float[] a, float[] b, int batch, int m, int k, int n, boolean sharedRhs) {
    float[] out = new float[batch * m * n];
    for (int p = 0; p < batch; p++) {
      for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
          double s = 0;
          for (int l = 0; l < k; l++) {
            s += a[p * m * k + i * k + l] * b[(sharedRhs ? 0 : p * k * n) + l * n + j];
          }
          out[p * m * n + i * n + j] = (float) s;
        }
      }
    }
    return out;
  }

  @Test
  void matmulBatchedAndDotGeneral() {
    Random r = random("matmul");
    float[] a = floats(r, 2 * 3 * 5, -1, 1);
    float[] b = floats(r, 2 * 5 * 4, -1, 1);
    float[] w = floats(r, 5 * 4, -1, 1);
    GraphBuilder g = new GraphBuilder("matmul");
    Value x = g.parameter(DType.F32, 2, 3, 5);
    Value y = g.parameter(DType.F32, 2, 5, 4);
    Value m = g.parameter(DType.F32, 5, 4);
    Value batched = g.matmul(x, y);
    Value shared = g.matmul(x, m);
    Value plain = g.matmul(g.reshape(x, 6, 5), m);
    // x . y^T style: contract dim 2 of x with dim 1 of y, batch 0/0
    Value general = g.dotGeneral(x, g.transpose(y, 0, 2, 1),
        new DotDimensions(new long[] {0}, new long[] {0}, new long[] {2}, new long[] {2}));
    List<HostTensor> out = run(g.build(batched, shared, plain, general),
        HostTensor.ofFloats(a, 2, 3, 5), HostTensor.ofFloats(b, 2, 5, 4), HostTensor.ofFloats(w, 5, 4));
    float[] eb = matmulRef(a, b, 2, 3, 5, 4, false);
    float[] es = matmulRef(a, w, 2, 3, 5, 4, true);
    assertClose(eb, out.get(0).toFloatArray(), 1e-5, 1e-5, "batched matmul");
    assertClose(es, out.get(1).toFloatArray(), 1e-5, 1e-5, "rank3 @ rank2");
    assertClose(es, out.get(2).toFloatArray(), 1e-5, 1e-5, "rank2 @ rank2");
    assertClose(eb, out.get(3).toFloatArray(), 1e-5, 1e-5, "dot_general");
    assertEquals(TensorType.of(DType.F32, 2, 3, 4), out.get(3).type());
  }

  @Test
  void reductionsOverChosenAxes() {
    Random r = random("reduce");
    long[] dims = {2, 3, 4};
    float[] a = floats(r, 24, -5, 5);
    int[] ia = Reference.ints(r, 24, -50, 50);
    GraphBuilder g = new GraphBuilder("reduce");
    Value x = g.parameter(DType.F32, dims);
    Value xi = g.parameter(DType.S32, dims);
    Graph graph = g.build(g.reduceSum(x, 0, 2), g.reduceMax(x, 1), g.reduceMin(x, -1), g.reduceMax(xi, 0, 1, 2),
        g.reduceMin(xi, 2));
    List<HostTensor> out = run(graph, HostTensor.ofFloats(a, dims), HostTensor.ofInts(ia, dims));
    float[] sum = new float[3];
    float[] max = new float[8];
    float[] min = new float[6];
    java.util.Arrays.fill(max, Float.NEGATIVE_INFINITY);
    java.util.Arrays.fill(min, Float.POSITIVE_INFINITY);
    int imax = Integer.MIN_VALUE;
    int[] imin = new int[6];
    java.util.Arrays.fill(imin, Integer.MAX_VALUE);
    for (int f = 0; f < 24; f++) {
      long[] i = unravel(f, dims);
      sum[(int) i[1]] += a[f];
      max[(int) (i[0] * 4 + i[2])] = Math.max(max[(int) (i[0] * 4 + i[2])], a[f]);
      min[(int) (i[0] * 3 + i[1])] = Math.min(min[(int) (i[0] * 3 + i[1])], a[f]);
      imax = Math.max(imax, ia[f]);
      imin[(int) (i[0] * 3 + i[1])] = Math.min(imin[(int) (i[0] * 3 + i[1])], ia[f]);
    }
    assertClose(sum, out.get(0).toFloatArray(), 1e-5, 1e-5, "sum");
    assertClose(max, out.get(1).toFloatArray(), 0, 0, "max");
    assertClose(min, out.get(2).toFloatArray(), 0, 0, "min");
    assertArrayEquals(new int[] {imax}, out.get(3).toIntArray(), "int max");
    assertArrayEquals(imin, out.get(4).toIntArray(), "int min");
  }

  @Test
  void argmaxFirstOnTiesAndNaNWins() {
    float[] a = {1, 5, 5, 2, /**/ 3, Float.NaN, 9, Float.NaN, /**/ -1, -1, -1, -1};
    GraphBuilder g = new GraphBuilder("argmax");
    Value x = g.parameter(DType.F32, 3, 4);
    List<HostTensor> out = run(g.build(g.argmax(x, 1), g.argmax(x, 0)), HostTensor.ofFloats(a, 3, 4));
    assertArrayEquals(new int[] {1, 1, 0}, out.get(0).toIntArray());
    assertArrayEquals(new int[] {1, 1, 1, 1}, out.get(1).toIntArray());
  }

  @Test
  void whileLoopCarriesSeveralValues() {
    // for i in 0..n: acc = acc * 2 + x[i]; also writes i into row i of a buffer via dynamic_update_slice
    GraphBuilder g = new GraphBuilder("loop");
    Value x = g.parameter(DType.F32, 5);
    List<Value> result = g.whileLoop(
        List.of(g.constant(0), g.constant(0f), g.full(TensorType.of(DType.S32, 5), 0)),
        (c, v) -> c.less(v.get(0), c.constant(5)),
        (c, v) -> {
          Value i = v.get(0);
          Value xi = c.reshape(c.dynamicSlice(x, List.of(i), 1));
          Value acc = c.add(c.multiply(v.get(1), c.constant(2f)), xi);
          Value buf = c.dynamicUpdateSlice(v.get(2), c.reshape(c.multiply(i, i), 1), List.of(i));
          return List.of(c.add(i, c.constant(1)), acc, buf);
        });
    List<HostTensor> out = run(g.build(result), HostTensor.ofFloats(new float[] {1, 2, 3, 4, 5}, 5));
    assertArrayEquals(new int[] {5}, out.get(0).toIntArray());
    assertClose(new float[] {(((1 * 2 + 2) * 2 + 3) * 2 + 4) * 2 + 5}, out.get(1).toFloatArray(), 0, 0, "acc");
    assertArrayEquals(new int[] {0, 1, 4, 9, 16}, out.get(2).toIntArray());
  }

  @Test
  void conditionalPicksABranch() {
    GraphBuilder g = new GraphBuilder("cond");
    Value p = g.parameter(DType.PRED);
    Value x = g.parameter(DType.F32, 3);
    List<Value> r = g.ifThenElse(p,
        t -> List.of(t.multiply(x, t.constant(2f)), t.constant(1)),
        f -> List.of(f.negate(x), f.constant(0)));
    Graph graph = g.build(r);
    HostTensor xs = HostTensor.ofFloats(new float[] {1, 2, 3}, 3);
    List<HostTensor> yes = run(graph, HostTensor.ofBooleans(new boolean[] {true}), xs);
    List<HostTensor> no = run(graph, HostTensor.ofBooleans(new boolean[] {false}), xs);
    assertClose(new float[] {2, 4, 6}, yes.get(0).toFloatArray(), 0, 0, "true branch");
    assertArrayEquals(new int[] {1}, yes.get(1).toIntArray());
    assertClose(new float[] {-1, -2, -3}, no.get(0).toFloatArray(), 0, 0, "false branch");
    assertArrayEquals(new int[] {0}, no.get(1).toIntArray());
  }

  @Test
  void compositesAgainstJavaReference() {
    Random r = random("composites");
    int rows = 3, cols = 8;
    float[] a = floats(r, rows * cols, -4, 4);
    float[] gamma = floats(r, cols, 0.5f, 1.5f);
    float[] beta = floats(r, cols, -1, 1);
    GraphBuilder g = new GraphBuilder("composites");
    Value x = g.parameter(DType.F32, rows, cols);
    Value gm = g.parameter(DType.F32, cols);
    Value bt = g.parameter(DType.F32, cols);
    Graph graph = g.build(Composites.softmax(g, x, -1), Composites.layerNorm(g, x, gm, bt, 1e-5),
        Composites.gelu(g, x), Composites.mean(g, x, 1), Composites.variance(g, x, 1), Composites.relu(g, x),
        Composites.mean(g, x));
    List<HostTensor> out = run(graph, HostTensor.ofFloats(a, rows, cols), HostTensor.ofFloats(gamma, cols),
        HostTensor.ofFloats(beta, cols));
    float[] soft = new float[a.length], ln = new float[a.length], gelu = new float[a.length], relu = new float[a.length];
    float[] mean = new float[rows], var = new float[rows];
    double total = 0;
    for (int i = 0; i < rows; i++) {
      double mx = Double.NEGATIVE_INFINITY, s = 0, m = 0, v = 0;
      for (int j = 0; j < cols; j++) {
        mx = Math.max(mx, a[i * cols + j]);
        m += a[i * cols + j];
      }
      m /= cols;
      for (int j = 0; j < cols; j++) {
        s += Math.exp(a[i * cols + j] - mx);
        v += (a[i * cols + j] - m) * (a[i * cols + j] - m);
      }
      v /= cols;
      mean[i] = (float) m;
      var[i] = (float) v;
      total += m;
      for (int j = 0; j < cols; j++) {
        double xv = a[i * cols + j];
        soft[i * cols + j] = (float) (Math.exp(xv - mx) / s);
        ln[i * cols + j] = (float) ((xv - m) / Math.sqrt(v + 1e-5) * gamma[j] + beta[j]);
        gelu[i * cols + j] = (float) (0.5 * xv * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (xv + 0.044715 * xv * xv * xv))));
        relu[i * cols + j] = (float) Math.max(xv, 0);
      }
    }
    assertClose(soft, out.get(0).toFloatArray(), 1e-5, 1e-7, "softmax");
    assertClose(ln, out.get(1).toFloatArray(), 1e-4, 1e-5, "layer norm");
    assertClose(gelu, out.get(2).toFloatArray(), 1e-5, 1e-6, "gelu");
    assertClose(mean, out.get(3).toFloatArray(), 1e-5, 1e-6, "mean");
    assertClose(var, out.get(4).toFloatArray(), 1e-4, 1e-5, "variance");
    assertClose(relu, out.get(5).toFloatArray(), 0, 0, "relu");
    assertClose(new float[] {(float) (total / rows)}, out.get(6).toFloatArray(), 1e-5, 1e-6, "mean of all");
  }

  @Test
  void halfPrecisionAndDoubleArithmetic() {
    GraphBuilder g = new GraphBuilder("precision");
    Value h = g.parameter(DType.F16, 3);
    Value bf = g.parameter(DType.BF16, 3);
    Value d = g.parameter(DType.F64, 3);
    Graph graph = g.build(g.add(h, h), g.multiply(bf, g.constant(DType.BF16, 2)), g.sqrt(d));
    List<HostTensor> out = run(graph, HostTensor.ofHalfFloats(new float[] {1, 2.5f, -3}, 3),
        HostTensor.ofBFloat16s(new float[] {1, 2.5f, -3}, 3), HostTensor.ofDoubles(new double[] {2, 9, 0}, 3));
    assertClose(new float[] {2, 5, -6}, out.get(0).toFloatArray(), 1e-3, 0, "f16");
    assertClose(new float[] {2, 5, -6}, out.get(1).toFloatArray(), 1e-2, 0, "bf16");
    assertArrayEquals(new double[] {Math.sqrt(2), 3, 0}, out.get(2).toDoubleArray(), 1e-15);
  }
}
