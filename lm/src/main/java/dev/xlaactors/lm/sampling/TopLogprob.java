package dev.xlaactors.lm.sampling;

/**
 * One of the most likely tokens at a step, reported with a {@link Sample}.
 *
 * @param token the token id
 * @param logprob its log-probability under the model's distribution (see {@link Sample})
 */
public record TopLogprob(int token, float logprob) {}
