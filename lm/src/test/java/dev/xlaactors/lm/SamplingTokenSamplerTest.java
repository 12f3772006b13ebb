package dev.xlaactors.lm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import dev.xlaactors.lm.sampling.SamplingParams;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;

/**
 * Requests' samplers on several threads at once, as two generation servers (two models) run them: each draws
 * exactly what it draws alone. Found by serve-fuzz: one Sampler's scratch buffers were shared by every
 * request, and two servers sampling at once drew wrong tokens or failed with index -1.
 */
class SamplingTokenSamplerTest {
  private static final int STEPS = 400;

  /** The tokens of one sequence of {@code STEPS} draws over rows of {@code vocabulary} logits, seeded. */
  private static int[] draw(int vocabulary, long seed) {
    SamplingParams params = SamplingParams.defaults().withTemperature(0.8).withTopK(40).withTopP(0.9).withRepetitionPenalty(1.2)
        .withSeed(seed).withMaxTokens(STEPS);
    SamplingTokenSampler sampler = new SamplingTokenSampler(params, new int[] {1, 2, 3});
    SplittableRandom logits = new SplittableRandom(seed);
    int[] tokens = new int[STEPS];
    float[] row = new float[vocabulary];
    for (int i = 0; i < STEPS; i++) {
      for (int t = 0; t < vocabulary; t++) {
        row[t] = (float) (logits.nextGaussian() * 3);
      }
      tokens[i] = sampler.sample(row, 0, vocabulary);
    }
    return tokens;
  }

  @Test
  void samplersOnSeveralThreadsDrawAsTheyDoAlone() throws Exception {
    int[] vocabularies = {512, 50_257, 512, 32_000};
    int[][] alone = new int[vocabularies.length][];
    for (int i = 0; i < vocabularies.length; i++) {
      alone[i] = draw(vocabularies[i], i);
    }
    ExecutorService pool = Executors.newFixedThreadPool(vocabularies.length);
    try {
      for (int round = 0; round < 3; round++) {
        @SuppressWarnings("unchecked")
        Future<int[]>[] together = new Future[vocabularies.length];
        for (int i = 0; i < vocabularies.length; i++) {
          int v = vocabularies[i];
          long seed = i;
          together[i] = pool.submit((Callable<int[]>) () -> draw(v, seed));
        }
        for (int i = 0; i < vocabularies.length; i++) {
          assertArrayEquals(alone[i], together[i].get(), "sequence " + i + " (vocabulary " + vocabularies[i] + "), round " + round);
        }
      }
    } finally {
      pool.shutdownNow();
    }
  }
}
