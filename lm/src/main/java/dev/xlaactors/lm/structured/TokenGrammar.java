package dev.xlaactors.lm.structured;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

/**
 * A {@link ByteAutomaton} lifted to a {@link TokenVocabulary}: for each automaton state, the tokens whose
 * bytes it accepts from there and the state each leads to, computed the first time a sequence reaches the
 * state and cached (as outlines and xgrammar do), ordered by how far their target is from an accepting
 * state so that a generation short of tokens can keep only those that still let it finish.
 *
 * <p>Thread-safe; shared by every sequence of every request with the same schema and vocabulary
 * ({@link #cached}).
 */
public final class TokenGrammar {
  private static final int CACHED_GRAMMARS = 64;
  private static final Map<Object, TokenGrammar> GRAMMARS = new LinkedHashMap<>(16, 0.75f, true) {
    @Override
    protected boolean removeEldestEntry(Map.Entry<Object, TokenGrammar> eldest) {
      return size() > CACHED_GRAMMARS;
    }
  };

  private final ByteAutomaton automaton;
  private final TokenVocabulary vocabulary;
  private final Map<Integer, StateTokens> states = new ConcurrentHashMap<>();

  /**
   * The tokens allowed in one state: {@code tokens[i]} leads to state {@code targets[i]}, whose distance to
   * an accepting state is {@code distances[i]}, ascending.
   */
  record StateTokens(int[] tokens, int[] targets, int[] distances) {
    /** How many of the tokens lead to a state at most {@code distance} bytes from accepting. */
    int within(int distance) {
      int lo = 0;
      int hi = distances.length;
      while (lo < hi) {
        int mid = (lo + hi) >>> 1;
        if (distances[mid] <= distance) {
          lo = mid + 1;
        } else {
          hi = mid;
        }
      }
      return lo;
    }
  }

  /** The grammar of {@code automaton} over {@code vocabulary}. */
  public TokenGrammar(ByteAutomaton automaton, TokenVocabulary vocabulary) {
    this.automaton = automaton;
    this.vocabulary = vocabulary;
  }

  /**
   * The grammar of the automaton {@code compile} makes for {@code key} (e.g. a schema's text) over
   * {@code vocabulary}: made once and kept while among the {@value #CACHED_GRAMMARS} most recently used,
   * with the token sets its states computed so far.
   */
  public static TokenGrammar cached(String key, TokenVocabulary vocabulary, Supplier<ByteAutomaton> compile) {
    Object k = java.util.List.of(key, System.identityHashCode(vocabulary));
    synchronized (GRAMMARS) {
      TokenGrammar g = GRAMMARS.get(k);
      if (g != null && g.vocabulary == vocabulary) {
        return g;
      }
    }
    TokenGrammar made = new TokenGrammar(compile.get(), vocabulary); // outside the lock: compiling can take a while
    synchronized (GRAMMARS) {
      GRAMMARS.put(k, made);
    }
    return made;
  }

  /** The automaton. */
  public ByteAutomaton automaton() {
    return automaton;
  }

  /** The vocabulary. */
  public TokenVocabulary vocabulary() {
    return vocabulary;
  }

  /** The automaton state after token {@code token} from {@code state}, or -1 when the token is not allowed there. */
  public int next(int state, int token) {
    byte[] b = vocabulary.bytes(token);
    if (b == null) {
      return -1;
    }
    return automaton.next(state, b, 0, b.length);
  }

  /** The tokens allowed in {@code state}, computed on first use. */
  StateTokens tokens(int state) {
    StateTokens t = states.get(state);
    if (t == null) {
      t = compute(state);
      states.putIfAbsent(state, t);
    }
    return t;
  }

  /** How many automaton states have their token sets computed. */
  public int cachedStates() {
    return states.size();
  }

  /** The number of tokens allowed in {@code state} (computing them when not yet cached). */
  public int allowedCount(int state) {
    return tokens(state).tokens().length;
  }

  private StateTokens compute(int state) {
    if (state < 0 || state >= automaton.stateCount()) {
      throw new InvalidArgumentException("automaton state " + state + " does not exist: expected 0.." + (automaton.stateCount() - 1));
    }
    int[] order = vocabulary.order;
    int[] shared = vocabulary.shared;
    int[] stack = new int[vocabulary.maxLength + 1];
    stack[0] = state;
    int valid = 0; // stack[0..valid] hold the states after the previous token's first bytes
    int deadLength = Integer.MAX_VALUE; // the previous token's shortest prefix the automaton refuses
    int[] tokens = new int[64];
    int[] targets = new int[64];
    int count = 0;
    for (int k = 0; k < order.length; k++) {
      int id = order[k];
      int common = k == 0 ? 0 : shared[k];
      if (common >= deadLength) {
        continue; // shares a refused prefix with the token before
      }
      deadLength = Integer.MAX_VALUE;
      byte[] b = vocabulary.bytes(id);
      int d = Math.min(valid, common);
      int s = stack[d];
      while (d < b.length) {
        s = automaton.next(s, b[d] & 0xff);
        if (s < 0) {
          deadLength = d + 1;
          break;
        }
        stack[++d] = s;
      }
      valid = d;
      if (s >= 0) {
        if (count == tokens.length) {
          tokens = Arrays.copyOf(tokens, count * 2);
          targets = Arrays.copyOf(targets, count * 2);
        }
        tokens[count] = id;
        targets[count++] = s;
      }
    }
    // Sorted by the target's distance to accepting, so a budget keeps a prefix.
    long[] keyed = new long[count];
    for (int i = 0; i < count; i++) {
      keyed[i] = ((long) automaton.distance(targets[i]) << 32) | i;
    }
    Arrays.sort(keyed);
    int[] t = new int[count];
    int[] g = new int[count];
    int[] dist = new int[count];
    for (int i = 0; i < count; i++) {
      int j = (int) keyed[i];
      t[i] = tokens[j];
      g[i] = targets[j];
      dist[i] = (int) (keyed[i] >>> 32);
    }
    return new StateTokens(t, g, dist);
  }
}
