package dev.xlaactors.lm.structured;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.lm.sampling.LogitsProcessor;
import dev.xlaactors.lm.sampling.SequenceState;
import java.util.Arrays;
import java.util.Set;

/**
 * Constrains a sequence to a {@link TokenGrammar}: at each step only the tokens whose bytes the automaton
 * accepts from the sequence's state keep their logits, and the end of text only where the output is
 * whole. So whatever the model (random weights included), the generated text is in the automaton's
 * language, e.g. JSON valid for a schema.
 *
 * <p>Budget: a sequence has {@code maxTokens} tokens. When fewer remain than the automaton's farthest
 * allowed target needs (one token kept for the end of text), only tokens that still let it finish are kept (the state's tokens are ordered by
 * distance, so this is a prefix); every byte being a token of byte-level vocabularies makes the distance in
 * bytes a bound on the tokens. A budget smaller than the shortest valid output ends unfinished
 * ({@code finish_reason} length), as unconstrained generation would.
 *
 * <p>Cost per token: the sequence's state advances by the drawn token's bytes; the state's token set comes
 * from the grammar's cache (computed once per state, in a walk of the sorted vocabulary); the row is set to
 * {@code -Infinity} but the allowed tokens (one fill of the vocabulary and one copy per allowed token).
 *
 * <p>Stateful: {@link #forSequence()} gives each sequence its own automaton state; not thread-safe (one
 * sequence's steps run one at a time).
 */
public final class GrammarProcessor implements LogitsProcessor {
  private final TokenGrammar grammar;
  private final int[] endTokens;
  private int state;
  private int consumed;
  private boolean ended;
  private float[] saved = new float[0];

  /** A processor of {@code grammar} whose outputs end with one of {@code endTokenIds} (the model's end of text; at least one). */
  public GrammarProcessor(TokenGrammar grammar, Set<Integer> endTokenIds) {
    if (grammar == null) {
      throw new InvalidArgumentException("grammar is null: pass the TokenGrammar of the constraint");
    }
    if (endTokenIds == null || endTokenIds.isEmpty()) {
      throw new InvalidArgumentException("a grammar constraint needs the model's end-of-text token ids, got none: pass the stop token ids"
          + " (a constrained output ends with one once it is whole)");
    }
    this.grammar = grammar;
    this.endTokens = endTokenIds.stream().mapToInt(Integer::intValue).sorted().toArray();
    this.state = grammar.automaton().start();
  }

  private GrammarProcessor(GrammarProcessor template) {
    this.grammar = template.grammar;
    this.endTokens = template.endTokens;
    this.state = grammar.automaton().start();
  }

  @Override
  public LogitsProcessor forSequence() {
    return new GrammarProcessor(this);
  }

  /** The automaton state the sequence is in (after the tokens seen so far). */
  public int state() {
    return state;
  }

  @Override
  public void process(SequenceState sequence, float[] logits, int vocabularySize) {
    advance(sequence);
    TokenGrammar.StateTokens allowed = grammar.tokens(state);
    ByteAutomaton automaton = grammar.automaton();
    // Tokens left after this one, less one for the end of text: a whole output then ends by its end token.
    int spare = sequence.maxTokens() - sequence.generatedLength() - 2;
    int keep = allowed.tokens().length;
    boolean endAllowed = automaton.accepting(state) && !ended;
    if (keep > 0 && allowed.distances()[keep - 1] > spare) {
      keep = allowed.within(spare);
      if (keep == 0 && !endAllowed) {
        keep = allowed.within(allowed.distances()[0]); // cannot finish in time: come as close as possible
      }
    }
    int[] tokens = allowed.tokens();
    if (saved.length < keep + endTokens.length) {
      saved = new float[Math.max(keep + endTokens.length, saved.length * 2)];
    }
    for (int i = 0; i < keep; i++) {
      int t = tokens[i];
      saved[i] = t < vocabularySize ? logits[t] : Float.NEGATIVE_INFINITY;
    }
    for (int i = 0; i < endTokens.length; i++) {
      saved[keep + i] = endTokens[i] < vocabularySize ? logits[endTokens[i]] : Float.NEGATIVE_INFINITY;
    }
    Arrays.fill(logits, 0, vocabularySize, Float.NEGATIVE_INFINITY);
    for (int i = 0; i < keep; i++) {
      if (tokens[i] < vocabularySize) {
        logits[tokens[i]] = saved[i];
      }
    }
    if (endAllowed || keep == 0) {
      for (int i = 0; i < endTokens.length; i++) {
        if (endTokens[i] < vocabularySize) {
          logits[endTokens[i]] = saved[keep + i];
        }
      }
    }
  }

  /** Reads the tokens drawn since the last step. */
  private void advance(SequenceState sequence) {
    for (; consumed < sequence.generatedLength(); consumed++) {
      int token = sequence.generatedToken(consumed);
      if (Arrays.binarySearch(endTokens, token) >= 0) {
        ended = true;
        continue;
      }
      int next = grammar.next(state, token);
      if (next < 0) {
        throw new InvalidArgumentException("token " + token + " was drawn in automaton state " + state + " where the grammar does not"
            + " allow it: another logits processor after the grammar must not unmask tokens");
      }
      state = next;
    }
  }

  @Override
  public String toString() {
    return "GrammarProcessor[state " + state + " of " + grammar.automaton().stateCount() + "]";
  }
}
