package dev.xlaactors.lm.structured;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A deterministic automaton over UTF-8 bytes: the language of outputs a constraint accepts (e.g. the JSON
 * texts valid for a schema). Every state it has can still reach an accepting state (no dead ends), and
 * each knows the fewest bytes that take it there ({@link #distance}), which lets a constrained generation
 * finish within its token budget.
 *
 * <p>Immutable and thread-safe. Built by {@link JsonSchemaAutomaton}; states are ints from 0, the start
 * is 0, a missing transition is -1.
 */
public final class ByteAutomaton {
  /** The most states a determinised automaton may have: more is refused as too large a schema. */
  static final int MAX_STATES = 50_000;

  private final int[] next; // [state * 256 + byte]
  private final boolean[] accepting;
  private final int[] distance;
  private final boolean[] terminal;

  private ByteAutomaton(int[] next, boolean[] accepting) {
    this.next = next;
    this.accepting = accepting;
    int n = accepting.length;
    this.distance = distances(next, accepting);
    this.terminal = new boolean[n];
    for (int s = 0; s < n; s++) {
      boolean any = false;
      for (int b = 0; b < 256 && !any; b++) {
        any = next[s * 256 + b] >= 0;
      }
      terminal[s] = !any;
    }
  }

  /** The start state. */
  public int start() {
    return 0;
  }

  /** The number of states. */
  public int stateCount() {
    return accepting.length;
  }

  /** The state after byte {@code b} (0..255) from {@code state}, or -1 when the byte is not allowed there. */
  public int next(int state, int b) {
    return next[state * 256 + b];
  }

  /** The state after {@code bytes[from, to)} from {@code state}, or -1 when one is not allowed. */
  public int next(int state, byte[] bytes, int from, int to) {
    int s = state;
    for (int i = from; i < to && s >= 0; i++) {
      s = next[s * 256 + (bytes[i] & 0xff)];
    }
    return s;
  }

  /** Whether the bytes read so far form a whole accepted output. */
  public boolean accepting(int state) {
    return accepting[state];
  }

  /** Whether no byte can follow (an accepting state the output must end in). */
  public boolean terminal(int state) {
    return terminal[state];
  }

  /** The fewest bytes from {@code state} to an accepting state. */
  public int distance(int state) {
    return distance[state];
  }

  /** Whether the whole of {@code text} is accepted. */
  public boolean matches(byte[] text) {
    int s = next(0, text, 0, text.length);
    return s >= 0 && accepting[s];
  }

  /** Whether the whole of {@code text} (as UTF-8) is accepted. */
  public boolean matches(String text) {
    return matches(text.getBytes(java.nio.charset.StandardCharsets.UTF_8));
  }

  private static int[] distances(int[] next, boolean[] accepting) {
    int n = accepting.length;
    // Reverse edges, then a breadth-first search from the accepting states.
    int[] inCount = new int[n + 1];
    for (int i = 0; i < next.length; i++) {
      if (next[i] >= 0) {
        inCount[next[i] + 1]++;
      }
    }
    for (int s = 0; s < n; s++) {
      inCount[s + 1] += inCount[s];
    }
    int[] from = new int[inCount[n]];
    int[] fill = Arrays.copyOf(inCount, n);
    for (int i = 0; i < next.length; i++) {
      if (next[i] >= 0) {
        from[fill[next[i]]++] = i / 256;
      }
    }
    int[] dist = new int[n];
    Arrays.fill(dist, Integer.MAX_VALUE);
    ArrayDeque<Integer> queue = new ArrayDeque<>();
    for (int s = 0; s < n; s++) {
      if (accepting[s]) {
        dist[s] = 0;
        queue.add(s);
      }
    }
    while (!queue.isEmpty()) {
      int s = queue.poll();
      for (int i = inCount[s]; i < inCount[s + 1]; i++) {
        int p = from[i];
        if (dist[p] == Integer.MAX_VALUE) {
          dist[p] = dist[s] + 1;
          queue.add(p);
        }
      }
    }
    return dist;
  }

  /** The subset construction of {@code nfa} from {@code start}, accepting where {@code end} is reached. */
  static ByteAutomaton of(Nfa nfa, int start, int end) {
    // Bytes no edge tells apart share a class: the construction works per class (a few dozen), not per byte.
    int[] classOf = byteClasses(nfa);
    int classes = 0;
    int[] representative = new int[256];
    for (int b = 0; b < 256; b++) {
      if (classOf[b] == classes) {
        representative[classes++] = b;
      }
    }
    Closure closure = new Closure(nfa, end);
    Map<Key, Integer> ids = new HashMap<>();
    List<int[]> sets = new ArrayList<>();
    int[] first = closure.of(new int[] {start}, 1);
    ids.put(new Key(first), 0);
    sets.add(first);
    int[] next = new int[256 * 64];
    List<Boolean> accepting = new ArrayList<>();
    int[][] targets = new int[classes][16];
    int[] targetCount = new int[classes];
    int[] perClass = new int[classes];
    for (int d = 0; d < sets.size(); d++) {
      int[] set = sets.get(d);
      accepting.add(Arrays.binarySearch(set, end) >= 0);
      Arrays.fill(targetCount, 0);
      for (int s : set) {
        int[] e = nfa.edges[s];
        for (int i = 0; i < nfa.edgeCount[s]; i += 3) {
          for (int c = classOf[e[i]]; c <= classOf[e[i + 1]]; c++) {
            if (targetCount[c] == targets[c].length) {
              targets[c] = Arrays.copyOf(targets[c], targets[c].length * 2);
            }
            targets[c][targetCount[c]++] = e[i + 2];
          }
        }
      }
      for (int c = 0; c < classes; c++) {
        if (targetCount[c] == 0) {
          perClass[c] = -1;
          continue;
        }
        int[] to = closure.of(targets[c], targetCount[c]);
        Key key = new Key(to);
        Integer id = ids.get(key);
        if (id == null) {
          id = sets.size();
          if (id >= MAX_STATES) {
            throw new UnsupportedSchemaException("size", id, "the schema's automaton has more than " + MAX_STATES + " states; make it smaller"
                + " (fewer optional properties, nested levels or anyOf branches, smaller maxLength or maxItems)");
          }
          ids.put(key, id);
          sets.add(to);
        }
        perClass[c] = id;
      }
      if (next.length < (d + 1) * 256) {
        next = Arrays.copyOf(next, next.length * 2);
      }
      for (int b = 0; b < 256; b++) {
        next[d * 256 + b] = perClass[classOf[b]];
      }
    }
    boolean[] acc = new boolean[accepting.size()];
    for (int i = 0; i < acc.length; i++) {
      acc[i] = accepting.get(i);
    }
    return new ByteAutomaton(Arrays.copyOf(next, acc.length * 256), acc);
  }

  /** Classes of bytes, numbered in byte order: two bytes share one when every edge takes both or neither. */
  private static int[] byteClasses(Nfa nfa) {
    boolean[] startsClass = new boolean[257];
    startsClass[0] = true;
    for (int s = 0; s < nfa.size; s++) {
      int[] e = nfa.edges[s];
      for (int i = 0; i < nfa.edgeCount[s]; i += 3) {
        startsClass[e[i]] = true;
        startsClass[e[i + 1] + 1] = true;
      }
    }
    int[] classOf = new int[256];
    int c = -1;
    for (int b = 0; b < 256; b++) {
      if (startsClass[b]) {
        c++;
      }
      classOf[b] = c;
    }
    return classOf;
  }

  /** Epsilon closures with reused scratch (a stamp per state instead of a fresh set each time). */
  private static final class Closure {
    private final Nfa nfa;
    private final int end;
    private final int[] stamp;
    private int epoch;
    private int[] stack;
    private int[] found;

    Closure(Nfa nfa, int end) {
      this.nfa = nfa;
      this.end = end;
      this.stamp = new int[nfa.size];
      this.stack = new int[64];
      this.found = new int[64];
    }

    /**
     * The states reachable from {@code states[0, count)} by epsilon edges, sorted; only states with byte
     * edges, and the end, are kept: they alone tell sets apart, so equal sets merge.
     */
    int[] of(int[] states, int count) {
      epoch++;
      int top = 0;
      int n = 0;
      for (int i = 0; i < count; i++) {
        int s = states[i];
        if (stamp[s] != epoch) {
          stamp[s] = epoch;
          stack = push(stack, top++, s);
        }
      }
      while (top > 0) {
        int s = stack[--top];
        if (s == end || nfa.edgeCount[s] > 0) {
          found = push(found, n++, s);
        }
        int[] e = nfa.eps[s];
        for (int i = 0; i < nfa.epsCount[s]; i++) {
          if (stamp[e[i]] != epoch) {
            stamp[e[i]] = epoch;
            stack = push(stack, top++, e[i]);
          }
        }
      }
      int[] set = Arrays.copyOf(found, n);
      Arrays.sort(set);
      return set;
    }

    private static int[] push(int[] a, int at, int v) {
      if (at == a.length) {
        a = Arrays.copyOf(a, a.length * 2);
      }
      a[at] = v;
      return a;
    }
  }

  private record Key(int[] states) {
    @Override
    public boolean equals(Object o) {
      return o instanceof Key k && Arrays.equals(states, k.states);
    }

    @Override
    public int hashCode() {
      return Arrays.hashCode(states);
    }
  }
}
