package dev.xlaactors.http;

import dev.xlaactors.lm.sampling.TopLogprob;
import java.util.ArrayList;
import java.util.List;
import java.util.PriorityQueue;

/**
 * The log-probabilities of a prompt's own tokens, which a completion with {@code echo} and {@code logprobs}
 * reports before the generated ones (how evaluation harnesses score text): token {@code i}'s under the
 * model's distribution after tokens {@code 0..i-1} (the log-softmax of the score program's logits, as
 * {@link dev.xlaactors.lm.sampling.Sample} reports generated tokens), with the {@code k} most likely
 * alternatives there; the first token has none (NaN, written as null).
 *
 * @param tokens the prompt's token ids
 * @param logprobs each token's log-probability; {@code logprobs[0]} is NaN
 * @param top each position's {@code k} most likely tokens, most likely first (ties: lower id); empty at 0
 */
record PromptLogprobs(int[] tokens, float[] logprobs, List<List<TopLogprob>> top) {

  /** From the score program's {@code logits} of {@code tokens} ({@code [tokens.length][vocabulary]}), with {@code k} alternatives. */
  static PromptLogprobs of(int[] tokens, float[][] logits, int k) {
    float[] logprobs = new float[tokens.length];
    List<List<TopLogprob>> top = new ArrayList<>();
    logprobs[0] = Float.NaN;
    top.add(List.of());
    for (int i = 1; i < tokens.length; i++) {
      float[] row = logits[i - 1];
      double logZ = logSumExp(row);
      logprobs[i] = (float) (row[tokens[i]] - logZ);
      top.add(topK(row, k, logZ));
    }
    return new PromptLogprobs(tokens.clone(), logprobs, List.copyOf(top));
  }

  private static double logSumExp(float[] row) {
    double max = Double.NEGATIVE_INFINITY;
    for (float x : row) {
      max = Math.max(max, x);
    }
    double sum = 0;
    for (float x : row) {
      sum += Math.exp(x - max);
    }
    return max + Math.log(sum);
  }

  private static List<TopLogprob> topK(float[] row, int k, double logZ) {
    if (k == 0) {
      return List.of();
    }
    // The k largest, kept in a min-heap: the smallest logit (on a tie, the higher id) is dropped first.
    PriorityQueue<Integer> heap = new PriorityQueue<>((a, b) -> row[a] != row[b] ? Float.compare(row[a], row[b]) : Integer.compare(b, a));
    for (int id = 0; id < row.length; id++) {
      heap.add(id);
      if (heap.size() > k) {
        heap.poll();
      }
    }
    List<TopLogprob> out = new ArrayList<>();
    while (!heap.isEmpty()) {
      int id = heap.poll();
      out.add(0, new TopLogprob(id, (float) (row[id] - logZ)));
    }
    return List.copyOf(out);
  }
}
