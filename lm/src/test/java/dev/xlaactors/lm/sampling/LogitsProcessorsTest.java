package dev.xlaactors.lm.sampling;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The logits processors in the sampler: each built-in's exact change to a row (OpenAI's and vLLM's
 * definitions), the order (after the repetition penalty, before temperature), per-sequence copies of a
 * stateful processor, the reported log-probabilities staying the model's, and a processor that masks
 * everything refused naming it.
 */
class LogitsProcessorsTest {
  private static final float[] ROW = {1f, 2f, 3f, 0.5f, -1f};

  /** What the processors leave of {@code ROW} for a sequence that generated {@code generated} after prompt {@code prompt}. */
  private static float[] processed(SamplingParams params, int[] prompt, int... generated) {
    SequenceState state = SequenceState.create(params, prompt);
    for (int t : generated) {
      state.append(t);
    }
    float[] row = ROW.clone();
    for (LogitsProcessor p : state.processors()) {
      p.process(state, row, row.length);
    }
    return row;
  }

  @Test
  void logitBiasAddsToTheNamedTokens() {
    SamplingParams p = SamplingParams.greedy().withProcessor(new LogitBias(Map.of(0, 10f, 2, -100f)));
    assertArrayEquals(new float[] {11f, 2f, -97f, 0.5f, -1f}, processed(p, new int[0]));
    Sample s = new Sampler().sample(ROW.clone(), p, SequenceState.create(p));
    assertEquals(0, s.token(), "token 0 biased to the top");
    double logNormalizer = Math.log(Math.exp(1) + Math.exp(2) + Math.exp(3) + Math.exp(0.5) + Math.exp(-1));
    assertEquals(1 - logNormalizer, s.logprob(), 1e-5, "the reported log-probability is the model's, not the biased one");
    assertThrows(InvalidArgumentException.class, () -> new LogitBias(Map.of(1, 101f)));
    InvalidArgumentException outside = assertThrows(InvalidArgumentException.class,
        () -> new Sampler().sample(ROW.clone(), SamplingParams.greedy().withProcessor(new LogitBias(Map.of(9, 1f))),
            SequenceState.create(SamplingParams.greedy().withProcessor(new LogitBias(Map.of(9, 1f))))));
    assertTrue(outside.getMessage().contains("token 9, outside the vocabulary of 5"), outside.getMessage());
  }

  @Test
  void presenceAndFrequencyPenaltiesCountGeneratedTokensOnly() {
    SamplingParams p = SamplingParams.greedy().withProcessor(new OccurrencePenalty(0.5, 0.25));
    // Token 2 in the prompt does not count; generated: 1 twice, 3 once.
    assertArrayEquals(new float[] {1f, 2f - 0.5f - 0.5f, 3f, 0.5f - 0.5f - 0.25f, -1f}, processed(p, new int[] {2}, 1, 3, 1));
    assertThrows(InvalidArgumentException.class, () -> new OccurrencePenalty(2.5, 0));
  }

  @Test
  void minTokensHoldsTheStopTokensBack() {
    SamplingParams p = SamplingParams.greedy().withStopTokenIds(Set.of(2)).withProcessor(new MinTokens(2, Set.of(2)));
    assertEquals(Float.NEGATIVE_INFINITY, processed(p, new int[] {4}, 0)[2], "1 generated of 2: the stop token is held back");
    assertEquals(3f, processed(p, new int[] {4}, 0, 1)[2], "2 generated: it may come");
    SequenceState state = SequenceState.create(p, new int[] {4});
    Sampler sampler = new Sampler();
    assertEquals(1, sampler.sample(ROW.clone(), p, state).token(), "greedy takes the best but the stop token");
    assertEquals(1, sampler.sample(ROW.clone(), p, state).token());
    assertEquals(2, sampler.sample(ROW.clone(), p, state).token(), "then the stop token, the best");
  }

  /**
   * A chat builds min_tokens from the request with generation_config's stops (id 2 here), then adds its template's end
   * of turn (id 1): every stop token the sequence ends at is held back, not only the ones known when it was built.
   */
  @Test
  void minTokensHoldsEveryStopTokenOfTheSequenceIncludingOnesAddedAfterIt() {
    SamplingParams p = SamplingParams.greedy().withStopTokenIds(Set.of(2)).withProcessor(new MinTokens(2, Set.of(2)))
        .withStopTokenIds(Set.of(1, 2));
    float[] held = processed(p, new int[] {4}, 0);
    assertEquals(Float.NEGATIVE_INFINITY, held[1], "the end of turn added after the processor is held back");
    assertEquals(Float.NEGATIVE_INFINITY, held[2]);
    assertEquals(1f, held[0]);
    SamplingParams plain = SamplingParams.greedy().withProcessor(new MinTokens(2)).withStopTokenIds(Set.of(1, 2));
    assertEquals(Float.NEGATIVE_INFINITY, processed(plain, new int[] {4}, 0)[1]);
    assertEquals(2f, processed(plain, new int[] {4}, 0, 0)[1], "2 generated: the stop tokens may come");
    assertEquals(Set.of(1, 2), SequenceState.create(plain, new int[0]).stopTokenIds());
  }

  @Test
  void processorsRunAfterTheRepetitionPenaltyInOrderWithACopyPerSequence() {
    List<String> calls = new ArrayList<>();
    LogitsProcessor first = (state, logits, n) -> calls.add("first saw " + logits[2]);
    LogitsProcessor counting = new LogitsProcessor() {
      int steps;

      @Override
      public void process(SequenceState state, float[] logits, int n) {
        calls.add("counting step " + steps++);
      }

      @Override
      public LogitsProcessor forSequence() {
        return new LogitsProcessor() {
          int own;

          @Override
          public void process(SequenceState state, float[] logits, int n) {
            calls.add("copy step " + own++ + " of " + state.generatedLength());
          }
        };
      }
    };
    SamplingParams p = SamplingParams.greedy().withRepetitionPenalty(2).withProcessors(List.of(first, counting));
    Sampler sampler = new Sampler();
    SequenceState a = SequenceState.create(p, new int[] {2});
    sampler.sample(ROW.clone(), p, a);
    sampler.sample(ROW.clone(), p, a);
    SequenceState b = SequenceState.create(p, new int[0]);
    sampler.sample(ROW.clone(), p, b);
    assertEquals(List.of("first saw 1.5", "copy step 0 of 0", "first saw 1.5", "copy step 1 of 1", "first saw 3.0", "copy step 0 of 0"),
        calls, "the penalty (3 / 2) came first; each sequence has its own copy; the template itself never runs");
  }

  @Test
  void aProcessorThatMasksEverythingIsRefusedNamingIt() {
    LogitsProcessor all = new LogitsProcessor() {
      @Override
      public void process(SequenceState state, float[] logits, int n) {
        java.util.Arrays.fill(logits, 0, n, Float.NEGATIVE_INFINITY);
      }

      @Override
      public String toString() {
        return "MaskAll";
      }
    };
    SamplingParams p = SamplingParams.defaults().withProcessor(all);
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
        () -> new Sampler().sample(ROW.clone(), p, SequenceState.create(p)));
    assertTrue(e.getMessage().contains("[MaskAll] masked all 5 tokens"), e.getMessage());
  }
}
