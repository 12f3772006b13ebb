package dev.xlaactors.graph;

import static dev.xlaactors.runtime.DType.F32;
import static dev.xlaactors.runtime.DType.S32;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.runtime.Shape;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** Bad graphs fail at the call that builds the bad node, with a message naming the op and the operand types. */
class GraphErrorsTest {
  private static String fails(Executable call) {
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, call);
    return e.getMessage();
  }

  @Test
  void mismatchedDTypesNameTheOpAndTypes() {
    GraphBuilder b = new GraphBuilder("g");
    Value x = b.parameter(F32, 2, 3);
    Value i = b.parameter(S32, 2, 3);
    assertEquals("add: operand types must match, got f32[2,3] and s32[2,3]", fails(() -> b.add(x, i)));
    assertTrue(fails(() -> b.exp(i)).startsWith("exp: needs a floating dtype, got s32[2,3]"));
    assertTrue(fails(() -> b.select(x, x, x)).startsWith("select: predicate must be pred, got f32[2,3]"));
  }

  @Test
  void shapesThatDoNotBroadcast() {
    GraphBuilder b = new GraphBuilder("g");
    Value x = b.parameter(F32, 2, 3);
    Value y = b.parameter(F32, 4);
    String m = fails(() -> b.add(x, y));
    assertTrue(m.startsWith("add: operand shapes do not broadcast, got f32[2,3] and f32[4]"), m);
    assertTrue(fails(() -> b.broadcastTo(x, Shape.of(3))).startsWith("broadcast: cannot broadcast f32[2,3]"));
  }

  @Test
  void mismatchedRanks() {
    GraphBuilder b = new GraphBuilder("g");
    Value x = b.parameter(F32, 2, 3);
    Value y = b.parameter(F32, 3);
    assertTrue(fails(() -> b.concatenate(0, x, y)).startsWith("concatenate: operands must share dtype and rank, got f32[2,3] and f32[3]"));
    assertTrue(fails(() -> b.transpose(x, 0)).startsWith("transpose: permutation [0] has length 1 but f32[2,3] has rank 2"));
    assertTrue(fails(() -> b.matmul(b.parameter(F32, 2, 3, 4), b.parameter(F32, 1, 2, 4, 5))).startsWith("matmul: needs"));
    assertTrue(fails(() -> b.matmul(x, b.parameter(F32, 4, 5))).startsWith("matmul: contracting dimensions differ"));
    assertTrue(fails(() -> b.dynamicSlice(x, List.of(b.constant(0)), 1, 1)).startsWith("dynamic_slice: needs 2 start indices for f32[2,3], got 1"));
    assertTrue(fails(() -> b.reshape(x, 4, 2)).startsWith("reshape: cannot reshape f32[2,3] (6 elements) to [4, 2]"));
  }

  @Test
  void outOfRangeAxes() {
    GraphBuilder b = new GraphBuilder("g");
    Value x = b.parameter(F32, 2, 3);
    assertEquals("reduce_sum: axis 2 is out of range for f32[2,3] (rank 2)", fails(() -> b.reduceSum(x, 2)));
    assertEquals("reduce_max: axis -3 is out of range for f32[2,3] (rank 2)", fails(() -> b.reduceMax(x, -3)));
    assertTrue(fails(() -> b.reduceSum(x, 1, -1)).startsWith("reduce_sum: axis -1 is given twice"));
    assertTrue(fails(() -> b.argmax(x, 5)).startsWith("argmax: axis 5 is out of range"));
    assertTrue(fails(() -> Composites.softmax(b, x, 2)).contains("axis 2 is out of range for f32[2,3]"));
    assertTrue(fails(() -> b.sliceAxis(x, 0, 1, 3)).startsWith("slice: dimension 0 of f32[2,3]: need 0 <= start <= limit <= 2"));
    assertTrue(fails(() -> b.iota(dev.xlaactors.runtime.TensorType.of(S32, 4), 1)).startsWith("iota: axis 1 is out of range"));
  }

  @Test
  void unknownOrInvalidOpArguments() {
    GraphBuilder b = new GraphBuilder("g");
    Value x = b.parameter(F32, 2);
    Value foreign = new GraphBuilder("other").parameter(F32, 2);
    assertTrue(fails(() -> b.add(x, foreign)).startsWith("add: rhs %arg0: f32[2] belongs to another graph"));
    assertEquals("add: lhs is null", fails(() -> b.add(null, x)));
    assertEquals("compare: comparison direction is null", fails(() -> b.compare(x, null, x)));
    assertEquals("convert: target dtype is null for f32[2]", fails(() -> b.convert(x, null)));
    assertTrue(fails(() -> b.pad(x, b.constant(0), new long[] {1}, new long[] {1}, new long[] {0}))
        .startsWith("pad: padding value must be a scalar of the operand's dtype"));
    assertTrue(fails(() -> b.pad(x, b.constant(0f), new long[] {1}, new long[] {1}, new long[] {-1}))
        .startsWith("pad: interior padding must be >= 0"));
    assertTrue(fails(() -> new GraphBuilder("not a name")).startsWith("graph name must be an identifier"));
    assertEquals("build: a program needs at least one output", fails(() -> b.build()));
  }

  @Test
  void loopBodyThatChangesCarriedTypes() {
    GraphBuilder b = new GraphBuilder("g");
    Value x = b.parameter(F32, 2);
    String m = fails(() -> b.whileLoop(List.of(b.constant(0), x),
        (c, v) -> c.less(v.get(0), c.constant(3)),
        (c, v) -> List.of(c.add(v.get(0), c.constant(1)), c.concatenate(0, v.get(1), v.get(1)))));
    assertEquals("while: body result 1 has type f32[4] but the carried value has type f32[2]; a loop must keep "
        + "the types of its carried values", m);
    assertEquals("while: condition must return a pred scalar, got pred[2]",
        fails(() -> b.whileLoop(List.of(x), (c, v) -> c.less(v.get(0), c.constant(1f)), (c, v) -> v)));
    assertTrue(fails(() -> b.whileLoop(List.of(x), (c, v) -> c.constant(true), (c, v) -> List.of()))
        .startsWith("while: body must return 1 value(s) [f32[2]], got 0"));
  }

  @Test
  void branchesMustAgreeAndRegionValuesStayInside() {
    GraphBuilder b = new GraphBuilder("g");
    Value p = b.parameter(dev.xlaactors.runtime.DType.PRED);
    Value x = b.parameter(F32, 2);
    assertEquals("if: branches must return the same types, got [f32[2]] and [f32[]]",
        fails(() -> b.ifThenElse(p, t -> List.of(x), f -> List.of(f.constant(1f)))));
    Value[] leaked = new Value[1];
    b.ifThenElse(p, t -> {
      leaked[0] = t.negate(x);
      return List.of(leaked[0]);
    }, f -> List.of(x));
    assertTrue(fails(() -> b.add(leaked[0], x)).contains("belongs to another graph, or to a loop body or branch"));
    GraphBuilder[] region = new GraphBuilder[1];
    b.ifThenElse(p, t -> {
      region[0] = t;
      assertTrue(fails(() -> t.parameter(F32)).startsWith("parameter: parameters belong to the top-level builder"));
      return List.of(x);
    }, f -> List.of(x));
    assertTrue(fails(() -> region[0].negate(x)).contains("this region's builder is finished"));
  }
}
