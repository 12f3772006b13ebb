package dev.xlaactors.graph;

import static dev.xlaactors.runtime.DType.F32;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.graph.SegmentedProgram.Placement;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.Shape;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Bad indices and sizes fail with an {@link InvalidArgumentException} naming the thing and the range
 * (issue 24's minors), not a raw ArrayIndexOutOfBoundsException or ArithmeticException, nor a negative size.
 */
class BadIndexAndSizeTest {
  @Test
  void aHugeShapeOrTensorTypeIsRefusedNamingIt() {
    InvalidArgumentException shape = assertThrows(InvalidArgumentException.class, () -> Shape.of(1L << 40, 1L << 40));
    assertTrue(shape.getMessage().contains("shape [1099511627776, 1099511627776] holds more than 9223372036854775807 elements"),
        shape.getMessage());
    InvalidArgumentException bytes = assertThrows(InvalidArgumentException.class, () -> TensorType.of(F32, 1L << 62));
    assertTrue(bytes.getMessage().contains("f32[4611686018427387904] would take more than 9223372036854775807 bytes"), bytes.getMessage());
    assertEquals(8L << 40, TensorType.of(DType.F64, 1L << 40).byteSize());
  }

  @Test
  void aBadStageIndexNamesTheRange() {
    TensorType f4 = TensorType.of(F32, 4);
    GraphBuilder b = new GraphBuilder("stages");
    Value x = b.parameter(f4);
    Value y = b.hostCall(new HostCallback("echo", List.of(f4), null, (in, s) -> in), b.add(x, b.constant(1f))).get(0);
    SegmentedGraph g = b.build(b.multiply(y, x)).segment(SegmentationOptions.defaults());
    try (XlaClient client = XlaClient.create(); SegmentedProgram p = new SegmentedProgram(g, Placement.on(client))) {
      int stages = g.stages().size();
      p.target(stages - 1);
      for (int bad : new int[] {-1, stages, 99}) {
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> p.target(bad));
        assertTrue(e.getMessage().contains("stage " + bad + " of segmented program 'stages' does not exist; its stages are 0 to "
            + (stages - 1)), e.getMessage());
      }
    }
  }
}
