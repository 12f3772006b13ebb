package dev.xlaactors.lm.sampling;

/**
 * Java code that changes one sequence's next-token logits before the {@link Sampler} draws: a mask (a
 * logit set to {@code -Infinity} can never be drawn) or a bias (a finite amount added). The sampler runs
 * the processors of {@link SamplingParams#processors()} in order on its own copy of the row, after the
 * repetition penalty and before temperature, top-k, top-p and min-p, inside the decode loop's host
 * callback; the log-probabilities it reports stay the model's (as vLLM's default {@code raw_logprobs}).
 *
 * <p>A processor sees the sequence through {@link SequenceState}: its prompt length, the tokens it
 * generated and how often each. A stateless processor (a bias, a penalty) is shared by every sequence; one
 * that keeps state between tokens (a grammar's automaton state) returns a fresh copy from
 * {@link #forSequence()}, and reads the tokens drawn since its last call from {@link SequenceState}.
 *
 * <p>Cost matters: it runs once per generated token per sequence, over the whole vocabulary (50,257 or
 * 151,936 entries), on the thread that runs the decode loop, so it must not block. A processor must leave
 * at least one token finite; a row it leaves all {@code -Infinity}, or with a NaN or {@code +Infinity}, is
 * refused naming the processor.
 *
 * <p>Example, a processor that bans one token (docs/generate.md bans a word list):
 *
 * <pre>{@code
 * LogitsProcessor noFoo = (state, logits, vocabularySize) -> logits[fooId] = Float.NEGATIVE_INFINITY;
 * SamplingParams params = SamplingParams.defaults().withProcessor(noFoo);
 * }</pre>
 */
@FunctionalInterface
public interface LogitsProcessor {

  /**
   * Changes {@code logits[0, vocabularySize)} in place for the next token of the sequence {@code state}
   * describes ({@code logits} may be longer than the vocabulary: entries past it are not the row's).
   */
  void process(SequenceState state, float[] logits, int vocabularySize);

  /**
   * The processor one new sequence uses: this one when it keeps no state between tokens (the default),
   * else a fresh copy. Called once per sequence, when its {@link SequenceState} is created.
   */
  default LogitsProcessor forSequence() {
    return this;
  }
}
