package dev.xlaactors.lm.sampling;

import java.util.List;

/**
 * One drawn token, with log-probabilities as OpenAI and vLLM (by default) report them: under the
 * model's own distribution, i.e. the log-softmax of the raw logits, before the repetition penalty,
 * temperature and the top-k/top-p/min-p cuts. So a token drawn at temperature 0.2 still reports how
 * likely the model found it, and the numbers can be compared across requests with different settings.
 *
 * @param token the drawn token id
 * @param logprob the drawn token's log-probability under the model's distribution ({@code <= 0})
 * @param top the {@link SamplingParams#logprobs()} most likely tokens under that distribution, most likely
 *     first (ties: lower id first); empty when none were asked for
 */
public record Sample(int token, float logprob, List<TopLogprob> top) {
  /** Copies {@code top}. */
  public Sample {
    top = List.copyOf(top);
  }
}
