package dev.xlaactors.lm.sampling;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.runtime.HostVectorMath;
import java.nio.FloatBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * Draws one token from one row of logits by a request's {@link SamplingParams} and its sequence's
 * {@link SequenceState}, and reports log-probabilities (see {@link Sample}).
 *
 * <p>The steps, in Hugging Face's order: the repetition penalty on the sequence's tokens; the request's
 * {@link LogitsProcessor}s in order (masks and biases; the reported log-probabilities stay the model's); temperature
 * 0 takes the highest logit (the lowest id on a tie); otherwise the logits are divided by the
 * temperature, cut to the top {@code k}, then to the nucleus of probability {@code topP} (a fraction of
 * the top-k's mass when there is a top-k cut), then to the tokens at least {@code minP} times as likely
 * as the best, and one token is drawn from the softmax of what is left with the sequence's random
 * generator.
 *
 * <p>No step sorts the vocabulary: top-k is a bounded heap ({@code O(V log k)}) and only its {@code k}
 * candidates are sorted; top-p without top-k is a quickselect on probability mass (expected
 * {@code O(V)}; the nucleus is found without being sorted); min-p alone and plain sampling are linear
 * passes. Per row: one copy, one {@code exp} pass for the log-probabilities (which also gives the sampling
 * weights at temperature 1 without a penalty), one more for a draw that weighs every token at another
 * temperature; under a top-k cut only the {@code k} candidates are weighed. The {@code exp} passes run in
 * the bridge ({@link HostVectorMath#expSum}): a term below {@code e^-87.3} of the best is 0, and a pass over
 * a 50,257-token row took about 36 us there against 330-600 us by {@link Math#exp}.
 *
 * <p>A sampler holds scratch buffers sized to the vocabulary and reuses them: one per thread (e.g. per
 * decode loop), serving any number of sequences; not thread-safe.
 */
public final class Sampler {
  private final TopKSelector selector = new TopKSelector();
  private final NucleusSelector nucleus = new NucleusSelector();
  /** The row as the model gave it. */
  private float[] raw = new float[0];
  /** The row after the repetition penalty and temperature (only when either applies). */
  private float[] scores = new float[0];
  /** {@code exp(score - max score)} per token: unnormalised probabilities, the best exactly 1. */
  private double[] weights = new double[0];
  /** The largest penalised logit: the temperature (at least {@link SamplingParams#MIN_TEMPERATURE}) divides it without overflow. */
  private static final double PENALISED_BOUND = Float.MAX_VALUE * SamplingParams.MIN_TEMPERATURE;
  private int[] candidates = new int[0];
  /** The lowest index of the raw row's highest logit, as {@link #checkedMax} found it. */
  private int rawArgmax;
  private final int[] topIds = new int[SamplingParams.MAX_LOGPROBS];

  /** A sampler; its buffers grow to the largest vocabulary it sees. */
  public Sampler() {}

  /** Draws from {@code logits}, one row holding the whole vocabulary. */
  public Sample sample(float[] logits, SamplingParams params, SequenceState state) {
    if (logits == null) {
      throw new InvalidArgumentException("logits are null: pass the row of the step's logits");
    }
    return sample(FloatBuffer.wrap(logits), 0, logits.length, params, state);
  }

  /**
   * Draws from the row of {@code vocabularySize} logits starting at index {@code offset} of
   * {@code rows} (absolute indices: the buffer's position is ignored and left as it is), e.g. row
   * {@code b} of a {@code [batch, vocab]} output at {@code offset = b * vocab}. The drawn token is
   * appended to {@code state}.
   */
  public Sample sample(FloatBuffer rows, int offset, int vocabularySize, SamplingParams params, SequenceState state) {
    if (rows == null || params == null || state == null) {
      throw new InvalidArgumentException("logits, sampling params and sequence state must not be null");
    }
    if (vocabularySize < 1 || offset < 0 || (long) offset + vocabularySize > rows.limit()) {
      throw new InvalidArgumentException("the logits row [" + offset + ", " + ((long) offset + vocabularySize)
          + ") does not fit the buffer of " + rows.limit() + " logits: expected offset >= 0, vocabulary size >= 1"
          + " and offset + vocabulary size <= the buffer's limit (row b of [batch, vocab] starts at b * vocab)");
    }
    int n = vocabularySize;
    ensureCapacity(n);
    rows.get(offset, raw, 0, n);
    float rawMax = checkedMax(n);
    boolean penalised = params.repetitionPenalty() != 1 && state.distinctCount() > 0;
    boolean processed = !state.processors().isEmpty();
    // A top-k cut orders by the values before the temperature (dividing by it keeps their order) and weighs its
    // candidates at the temperature itself, so only a draw that weighs every token at another temperature
    // needs the row divided, in a copy.
    boolean dividesRow = !params.isGreedy() && params.temperature() != 1 && params.topK() == 0;
    boolean rawOrder = !(penalised || processed || dividesRow);
    // The raw row's weights serve as the sampling weights only for a draw from the raw row that weighs every
    // token (no top-k cut); otherwise the pass only sums them.
    boolean drawsByRawWeights = rawOrder && !params.isGreedy() && params.topK() == 0;
    double rawMass = HostVectorMath.expSum(raw, n, rawMax, drawsByRawWeights ? weights : null);
    double logNormalizer = rawMax + Math.log(rawMass);

    float[] ordered = raw; // the values the cuts order by
    if (!rawOrder) {
      ordered = scores;
      System.arraycopy(raw, 0, scores, 0, n);
      if (penalised) {
        applyRepetitionPenalty(params.repetitionPenalty(), state, n);
      }
      if (processed) {
        applyProcessors(state, n);
      }
    }
    int token;
    if (params.isGreedy()) {
      token = ordered == raw ? rawArgmax : argmax(ordered, n);
    } else if (params.topK() > 0) {
      token = draw(ordered, Double.NaN, params, state, n); // the cut weighs its k candidates itself
    } else if (ordered == raw) {
      token = draw(ordered, rawMass, params, state, n); // the raw row's weights are already there
    } else {
      token = draw(ordered, fillWeights(ordered, ordered[argmax(ordered, n)], params.temperature(), n), params, state, n);
    }
    state.append(token);
    return new Sample(token, (float) (raw[token] - logNormalizer), topLogprobs(params.logprobs(), n, logNormalizer));
  }

  private static InvalidArgumentException notADistribution(int index, float logit) {
    return new InvalidArgumentException("logit " + index + " is " + logit + ": expected finite logits or -inf for masked"
        + " tokens; the model produced no distribution to sample from");
  }

  private void ensureCapacity(int n) {
    if (raw.length < n) {
      raw = new float[n];
      scores = new float[n];
      weights = new double[n];
      candidates = new int[n];
    }
  }

  /**
   * The highest raw logit, its lowest index left in {@link #rawArgmax}; refuses NaN, +inf and a row that is all
   * -inf. Plain comparisons: {@link Math#max}'s NaN handling made this pass about twice as slow.
   */
  private float checkedMax(int n) {
    float max = Float.NEGATIVE_INFINITY;
    int at = 0;
    for (int i = 0; i < n; i++) {
      float x = raw[i];
      if (x > max) {
        if (x == Float.POSITIVE_INFINITY) {
          throw notADistribution(i, x);
        }
        max = x;
        at = i;
      } else if (x != x) {
        throw notADistribution(i, x);
      }
    }
    rawArgmax = at;
    if (max == Float.NEGATIVE_INFINITY) {
      throw new InvalidArgumentException("every one of the " + n + " logits is -inf: no token can be drawn;"
          + " check the mask applied to the logits");
    }
    return max;
  }

  /**
   * Divides {@code values} by {@code temperature} in place (unless it is 1), sets
   * {@code weights[i] = exp(values[i] - max)} and returns their sum. {@code max} is the highest value
   * before the division; it is divided the same way, so the best token's weight is exactly 1.
   */
  private double fillWeights(float[] values, float max, double temperature, int n) {
    divideByTemperature(values, temperature, n);
    float scaledMax = temperature == 1 ? max : (float) (max / temperature);
    return HostVectorMath.expSum(values, n, scaledMax, weights);
  }

  /** Divides {@code values} by {@code temperature} in place, unless it is 1. */
  private static void divideByTemperature(float[] values, double temperature, int n) {
    if (temperature != 1) {
      for (int i = 0; i < n; i++) {
        values[i] = (float) (values[i] / temperature);
      }
    }
  }

  /** Hugging Face's CTRL penalty: each distinct token's logit divided by the penalty if positive, else multiplied. */
  private void applyRepetitionPenalty(double penalty, SequenceState state, int n) {
    for (int i = 0; i < state.distinctCount(); i++) {
      int token = state.distinctToken(i);
      if (token >= n) {
        throw new InvalidArgumentException("token " + token + " of the sequence is outside the logits row of " + n
            + " tokens: the sequence's tokens must come from the model's vocabulary");
      }
      float x = scores[token];
      double y = x > 0 ? x / penalty : x * penalty;
      // Kept finite, and finite after the smallest temperature divides it: a penalty near 0 (8.5e-156, found by
      // serve-fuzz) made repeated tokens' logits +Infinity, their weights exp(Inf - Inf) = NaN, and no token drawable.
      scores[token] = (float) Math.max(-PENALISED_BOUND, Math.min(PENALISED_BOUND, y));
    }
  }

  /**
   * Runs the sequence's processors on {@code scores} in order, then checks what they left: no NaN or
   * {@code +Infinity}, and at least one token that can be drawn.
   */
  private void applyProcessors(SequenceState state, int n) {
    for (LogitsProcessor p : state.processors()) {
      p.process(state, scores, n);
    }
    boolean any = false;
    for (int i = 0; i < n; i++) {
      float x = scores[i];
      if (Float.isNaN(x) || x == Float.POSITIVE_INFINITY) {
        throw new InvalidArgumentException("after the logits processors " + state.processors() + " logit " + i + " is " + x
            + ": expected processors to leave finite logits or -inf for masked tokens");
      }
      any |= x != Float.NEGATIVE_INFINITY;
    }
    if (!any) {
      throw new InvalidArgumentException("the logits processors " + state.processors() + " masked all " + n + " tokens: no token"
          + " can be drawn; a processor must leave at least one token (e.g. the end of text when its constraint is met)");
    }
  }

  /** The index of the highest value; the lowest index on a tie. */
  private static int argmax(float[] values, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) {
      if (values[i] > values[best]) {
        best = i;
      }
    }
    return best;
  }

  /**
   * Applies top-k, top-p and min-p to the row and draws one token. Without a top-k cut, {@code weights} holds
   * every token's weight and {@code total} their sum; a top-k cut takes the row before the temperature and
   * weighs its candidates here, each as {@link #fillWeights} would after dividing ({@code exp} of its distance
   * below the best over the temperature; the best's weight is exactly 1), so neither need be filled for it.
   */
  private int draw(float[] ordered, double total, SamplingParams params, SequenceState state, int n) {
    double topP = params.topP();
    int count;
    if (params.topK() > 0) {
      count = selector.select(ordered, n, params.topK(), candidates); // sorted, best first
      float best = ordered[candidates[0]];
      double temperature = params.temperature();
      for (int i = 0; i < count; i++) {
        weights[candidates[i]] = Math.exp((ordered[candidates[i]] - best) / temperature);
      }
      if (topP < 1) {
        double mass = 0;
        for (int i = 0; i < count; i++) {
          mass += weights[candidates[i]];
        }
        // Keep a candidate while the mass before it is below topP of the top-k's mass.
        double need = topP * mass;
        int keep = 0;
        while (keep < count && need > 0) {
          need -= weights[candidates[keep++]];
        }
        count = keep;
      }
    } else if (topP < 1) {
      count = nucleus.select(ordered, weights, n, topP * total, candidates);
    } else {
      for (int i = 0; i < n; i++) {
        candidates[i] = i;
      }
      count = n;
    }
    // Min-p: the best token has weight exactly 1, so the cut is weight >= minP (the best always stays).
    double minP = params.minP();
    double sum = 0;
    int kept = 0;
    for (int i = 0; i < count; i++) {
      int id = candidates[i];
      if (weights[id] >= minP && weights[id] > 0) {
        candidates[kept++] = id;
        sum += weights[id];
      }
    }
    double r = state.nextDouble() * sum;
    for (int i = 0; i < kept; i++) {
      r -= weights[candidates[i]];
      if (r < 0) {
        return candidates[i];
      }
    }
    return candidates[kept - 1];
  }

  /** The {@code count} most likely tokens under the model's distribution. */
  private List<TopLogprob> topLogprobs(int count, int n, double logNormalizer) {
    if (count == 0) {
      return List.of();
    }
    int found = selector.select(raw, n, count, topIds);
    List<TopLogprob> top = new ArrayList<>(found);
    for (int i = 0; i < found; i++) {
      top.add(new TopLogprob(topIds[i], (float) (raw[topIds[i]] - logNormalizer)));
    }
    return top;
  }
}
