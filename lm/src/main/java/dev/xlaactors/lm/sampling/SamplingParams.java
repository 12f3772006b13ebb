package dev.xlaactors.lm.sampling;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.List;
import java.util.Set;

/**
 * How one request's tokens are drawn and when its generation ends: plain, immutable data that can be
 * logged, compared and sent across a cluster, validated once here (as vLLM's {@code SamplingParams}).
 *
 * <p>The {@link Sampler} applies, in Hugging Face's order: {@code repetitionPenalty} to the tokens the
 * sequence holds, then the {@code processors} in order, then {@code temperature} (0 = greedy: the highest logit, the lowest id on a tie, and
 * the rest below is ignored), {@code topK}, {@code topP} and {@code minP}, and draws from what is left.
 *
 * @param temperature divides the logits; 0 = greedy, else finite and at least {@value #MIN_TEMPERATURE}
 *     (smaller divisors overflow the logits; vLLM clamps them to the same bound)
 * @param topK keep the {@code topK} most likely tokens; {@code >= 0}; 0 = no cut
 * @param topP keep the smallest set of most likely tokens whose probability reaches {@code topP}
 *     (nucleus sampling); in {@code (0, 1]}; 1 = no cut
 * @param minP keep tokens at least {@code minP} times as likely as the most likely one; in
 *     {@code [0, 1]}; 0 = no cut
 * @param seed seeds the sequence's random generator, so a request can be replayed; null = a random seed
 * @param stopTokenIds generation ends after any of these tokens (e.g. end-of-text); each {@code >= 0};
 *     null is read as none
 * @param stopStrings generation ends before any of these strings (see
 *     {@link dev.xlaactors.lm.text.StopStringMatcher}); none empty; null is read as none
 * @param maxTokens the most tokens to generate; {@code >= 1}
 * @param repetitionPenalty divides the positive logits and multiplies the negative ones of tokens the
 *     sequence already holds (prompt included), as Hugging Face's CTRL-style penalty; finite,
 *     {@code > 0}; 1 = none
 * @param logprobs how many of the most likely tokens to report with each sample, with their
 *     log-probabilities; in {@code [0, }{@value #MAX_LOGPROBS}{@code ]}; 0 = none (the drawn token's
 *     log-probability is always reported)
 * @param processors Java code run on each step's logits after the repetition penalty and before
 *     temperature ({@link LogitsProcessor}): built-ins such as {@link LogitBias}, {@link OccurrencePenalty},
 *     {@link MinTokens} and grammar constraints, or a user's own; applied in order; none null; null is read
 *     as none
 */
public record SamplingParams(
    double temperature,
    int topK,
    double topP,
    double minP,
    Long seed,
    Set<Integer> stopTokenIds,
    List<String> stopStrings,
    int maxTokens,
    double repetitionPenalty,
    int logprobs,
    List<LogitsProcessor> processors) {

  /** The lowest temperature other than 0 (greedy). */
  public static final double MIN_TEMPERATURE = 0.01;

  /** The most top log-probabilities a sample reports (OpenAI's limit). */
  public static final int MAX_LOGPROBS = 20;

  /** The token limit of {@link #defaults()} and {@link #greedy()} (OpenAI's and vLLM's default). */
  public static final int DEFAULT_MAX_TOKENS = 16;

  /** Validates every field, naming the field, the value, the allowed range and the fix. */
  public SamplingParams {
    if (!(temperature == 0 || temperature >= MIN_TEMPERATURE) || Double.isInfinite(temperature)) {
      throw invalid("temperature", temperature, "0 or a finite number >= " + MIN_TEMPERATURE,
          "use 0 for greedy decoding, 1 for the model's own distribution");
    }
    if (topK < 0) {
      throw invalid("topK", topK, "an integer >= 0", "use 0 to keep every token");
    }
    if (!(topP > 0 && topP <= 1)) {
      throw invalid("topP", topP, "a number in (0, 1]", "use 1 to keep every token");
    }
    if (!(minP >= 0 && minP <= 1)) {
      throw invalid("minP", minP, "a number in [0, 1]", "use 0 to keep every token");
    }
    stopTokenIds = stopTokenIds == null ? Set.of() : stopTokenIds;
    for (Integer id : stopTokenIds) {
      if (id == null || id < 0) {
        throw invalid("stopTokenIds", stopTokenIds, "token ids >= 0", "leave out the " + id);
      }
    }
    stopTokenIds = Set.copyOf(stopTokenIds);
    stopStrings = stopStrings == null ? List.of() : stopStrings;
    for (String stop : stopStrings) {
      if (stop == null || stop.isEmpty()) {
        throw invalid("stopStrings", stopStrings, "non-empty strings", "leave out the " + (stop == null ? "null" : "empty string"));
      }
    }
    stopStrings = List.copyOf(stopStrings);
    if (maxTokens < 1) {
      throw invalid("maxTokens", maxTokens, "an integer >= 1", "ask for at least one token");
    }
    if (!(repetitionPenalty > 0) || Double.isInfinite(repetitionPenalty)) {
      throw invalid("repetitionPenalty", repetitionPenalty, "a finite number > 0",
          "use 1 for no penalty, e.g. 1.2 to discourage repeats");
    }
    if (logprobs < 0 || logprobs > MAX_LOGPROBS) {
      throw invalid("logprobs", logprobs, "an integer in [0, " + MAX_LOGPROBS + "]", "use 0 for none");
    }
    processors = processors == null ? List.of() : processors;
    if (processors.stream().anyMatch(java.util.Objects::isNull)) {
      throw invalid("processors", processors, "logits processors, none null", "leave out the null");
    }
    processors = List.copyOf(processors);
  }

  private static InvalidArgumentException invalid(String field, Object value, String expected, String fix) {
    return new InvalidArgumentException("sampling parameter " + field + " is " + value + ", expected " + expected + ": " + fix);
  }

  /**
   * Sampling from the model's own distribution: temperature 1, no cuts, no penalty, a random seed,
   * {@value #DEFAULT_MAX_TOKENS} tokens, no stops, no top log-probabilities.
   */
  public static SamplingParams defaults() {
    return new SamplingParams(1.0, 0, 1.0, 0.0, null, Set.of(), List.of(), DEFAULT_MAX_TOKENS, 1.0, 0, List.of());
  }

  /** {@link #defaults()} with temperature 0: always the most likely token. */
  public static SamplingParams greedy() {
    return defaults().withTemperature(0);
  }

  /** Whether the sampler takes the highest logit (temperature 0) rather than drawing. */
  public boolean isGreedy() {
    return temperature == 0;
  }

  /** These parameters with {@code temperature} changed. */
  public SamplingParams withTemperature(double temperature) {
    return new SamplingParams(temperature, topK, topP, minP, seed, stopTokenIds, stopStrings, maxTokens, repetitionPenalty, logprobs, processors);
  }

  /** These parameters with {@code topK} changed. */
  public SamplingParams withTopK(int topK) {
    return new SamplingParams(temperature, topK, topP, minP, seed, stopTokenIds, stopStrings, maxTokens, repetitionPenalty, logprobs, processors);
  }

  /** These parameters with {@code topP} changed. */
  public SamplingParams withTopP(double topP) {
    return new SamplingParams(temperature, topK, topP, minP, seed, stopTokenIds, stopStrings, maxTokens, repetitionPenalty, logprobs, processors);
  }

  /** These parameters with {@code minP} changed. */
  public SamplingParams withMinP(double minP) {
    return new SamplingParams(temperature, topK, topP, minP, seed, stopTokenIds, stopStrings, maxTokens, repetitionPenalty, logprobs, processors);
  }

  /** These parameters with {@code seed} changed (null = random). */
  public SamplingParams withSeed(Long seed) {
    return new SamplingParams(temperature, topK, topP, minP, seed, stopTokenIds, stopStrings, maxTokens, repetitionPenalty, logprobs, processors);
  }

  /** These parameters with {@code stopTokenIds} changed. */
  public SamplingParams withStopTokenIds(Set<Integer> stopTokenIds) {
    return new SamplingParams(temperature, topK, topP, minP, seed, stopTokenIds, stopStrings, maxTokens, repetitionPenalty, logprobs, processors);
  }

  /** These parameters with {@code stopStrings} changed. */
  public SamplingParams withStopStrings(List<String> stopStrings) {
    return new SamplingParams(temperature, topK, topP, minP, seed, stopTokenIds, stopStrings, maxTokens, repetitionPenalty, logprobs, processors);
  }

  /** These parameters with {@code maxTokens} changed. */
  public SamplingParams withMaxTokens(int maxTokens) {
    return new SamplingParams(temperature, topK, topP, minP, seed, stopTokenIds, stopStrings, maxTokens, repetitionPenalty, logprobs, processors);
  }

  /** These parameters with {@code repetitionPenalty} changed. */
  public SamplingParams withRepetitionPenalty(double repetitionPenalty) {
    return new SamplingParams(temperature, topK, topP, minP, seed, stopTokenIds, stopStrings, maxTokens, repetitionPenalty, logprobs, processors);
  }

  /** These parameters with {@code logprobs} changed. */
  public SamplingParams withLogprobs(int logprobs) {
    return new SamplingParams(temperature, topK, topP, minP, seed, stopTokenIds, stopStrings, maxTokens, repetitionPenalty, logprobs, processors);
  }

  /** These parameters with {@code processors} changed. */
  public SamplingParams withProcessors(List<LogitsProcessor> processors) {
    return new SamplingParams(temperature, topK, topP, minP, seed, stopTokenIds, stopStrings, maxTokens, repetitionPenalty, logprobs, processors);
  }

  /** These parameters with {@code processor} run after the ones they have. */
  public SamplingParams withProcessor(LogitsProcessor processor) {
    java.util.ArrayList<LogitsProcessor> all = new java.util.ArrayList<>(processors);
    all.add(processor);
    return withProcessors(all);
  }
}
