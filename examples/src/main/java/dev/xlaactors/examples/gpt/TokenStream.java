package dev.xlaactors.examples.gpt;

import java.util.Optional;
import org.apache.pekko.NotUsed;
import org.apache.pekko.stream.javadsl.Source;

/**
 * Tokens of one generation as a Pekko Streams {@link Source}: each element pulled runs one decode step
 * (on the stream's blocking IO dispatcher), so the consumer's demand paces the model, tokens arrive in
 * order as they are sampled, and the stream completes at a stop token, the token limit or the end of the
 * context. Cancelling the stream frees the generation's KV cache.
 */
public final class TokenStream {
  private TokenStream() {}

  /**
   * The tokens generated after {@code prompt} on {@code model} (loaded for batch 1). The prompt is checked
   * now, so a bad one fails here rather than inside the stream.
   */
  public static Source<Integer, NotUsed> tokens(GptModel model, int[] prompt, SamplingSettings settings, int maxTokens) {
    return tokens(model, prompt, settings, maxTokens, null);
  }

  /**
   * As {@link #tokens(GptModel, int[], SamplingSettings, int)}, each decode step a supervised run of
   * {@code sampling} (null: at the runtime level).
   */
  public static Source<Integer, NotUsed> tokens(
      GptModel model, int[] prompt, SamplingSettings settings, int maxTokens, GptSampling sampling) {
    int[][] prompts = {prompt};
    model.checkPrompts(prompts);
    if (maxTokens < 1) {
      throw new dev.xlaactors.error.InvalidArgumentException("max tokens must be at least 1, got " + maxTokens);
    }
    return Source.unfoldResource(
        () -> model.start(prompts, settings, maxTokens, sampling),
        TokenStream::nextToken,
        GptGeneration::close);
  }

  private static Optional<Integer> nextToken(GptGeneration generation) {
    int[] next = generation.next();
    return next == null ? Optional.empty() : Optional.of(next[0]);
  }
}
