package dev.xlaactors.graph;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.XlaClient;
import org.junit.jupiter.api.Test;

/** Compiling the same builder program twice reuses the executable; prints what a hit costs vs a compile. */
class CompileCacheTest {
  private static Graph program(int variant) {
    GraphBuilder b = new GraphBuilder("cached");
    Value x = b.parameter(DType.F32, 16, 32);
    Value w = b.parameter(DType.F32, 32, 8);
    Value h = b.tanh(b.add(b.matmul(x, w), b.constant((float) variant)));
    return b.build(Composites.softmax(b, h, -1));
  }

  @Test
  void secondCompileOfTheSameTextIsACacheHit() {
    try (XlaClient client = XlaClient.create()) {
      Graph g = program(0);
      long t0 = System.nanoTime();
      try (Executable first = g.compile(client)) {
        long t1 = System.nanoTime();
        // The builder emits identical text for an identical graph, so a rebuilt graph hits the cache too.
        try (Executable second = program(0).compile(client)) {
          long t2 = System.nanoTime();
          var stats = client.compileCacheStats();
          assertEquals(1, stats.misses());
          assertEquals(1, stats.hits());
          assertEquals(1, stats.size());
          assertEquals(first.outputTypes(), second.outputTypes());
          int hits = 200;
          long t3 = System.nanoTime();
          for (int i = 0; i < hits; i++) {
            g.compile(client).close();
          }
          long t4 = System.nanoTime();
          int misses = 5;
          for (int i = 1; i <= misses; i++) {
            program(i).compile(client).close();
          }
          long t5 = System.nanoTime();
          assertEquals(1 + misses, client.compileCacheStats().misses());
          System.out.printf("compile cache: first compile %.2f ms, first hit %.3f ms, mean hit %.4f ms over %d,"
                  + " mean miss %.2f ms over %d (program text %d chars)%n",
              (t1 - t0) / 1e6, (t2 - t1) / 1e6, (t4 - t3) / 1e6 / hits, hits, (t5 - t4) / 1e6 / misses, misses,
              g.stablehlo().length());
        }
      }
    }
  }
}
