package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.lm.sampling.TopLogprob;
import java.util.List;
import org.junit.jupiter.api.Test;

/** A prompt's log-probabilities from score logits: the log-softmax of the row before each token, and the top k there. */
class PromptLogprobsTest {
  @Test
  void eachTokenIsScoredByTheRowBeforeIt() {
    float[][] logits = {{0, (float) Math.log(3), 0}, {2, 2, 1}, {9, 9, 9}};
    PromptLogprobs p = PromptLogprobs.of(new int[] {2, 1, 0}, logits, 2);
    assertTrue(Float.isNaN(p.logprobs()[0]));
    assertEquals(List.of(), p.top().get(0));
    assertEquals(Math.log(3.0 / 5), p.logprobs()[1], 1e-6); // token 1 after row 0: e^ln3 / (1 + 3 + 1)
    double z = Math.log(2 * Math.exp(2) + Math.exp(1));
    assertEquals(2 - z, p.logprobs()[2], 1e-6);
    assertEquals(List.of(new TopLogprob(1, (float) Math.log(3.0 / 5)), new TopLogprob(0, (float) Math.log(1.0 / 5))), p.top().get(1));
    assertEquals(List.of(0, 1), p.top().get(2).stream().map(TopLogprob::token).toList()); // a tie: the lower id first
  }
}
