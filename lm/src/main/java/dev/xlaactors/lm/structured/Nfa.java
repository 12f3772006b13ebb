package dev.xlaactors.lm.structured;

import java.util.Arrays;

/**
 * A nondeterministic automaton over bytes under construction (Thompson's): states with epsilon edges and
 * byte-range edges. Fragments are built fresh for each use (a fragment is never shared between two places),
 * and every state lies on a path from a fragment's start to its end, so the automaton made from it has no
 * dead ends. Package-private: the schema compiler builds one and {@link ByteAutomaton#of} determinises it.
 */
final class Nfa {
  /** A fragment: its entry and exit states. */
  record Frag(int start, int end) {}

  /** The most states one automaton may have: a schema that needs more is refused (it would take long to compile). */
  static final int MAX_STATES = 200_000;

  int[][] eps = new int[64][];
  int[] epsCount = new int[64];
  /** Byte edges per state, each {@code lo, hi, target}. */
  int[][] edges = new int[64][];
  int[] edgeCount = new int[64];
  int size;

  int state() {
    if (size == eps.length) {
      if (size >= MAX_STATES) {
        throw new UnsupportedSchemaException("size", size, "the schema needs more than " + MAX_STATES + " automaton states; make it"
            + " smaller (fewer nested levels, shorter enums, smaller maxLength or maxItems)");
      }
      int n = size * 2;
      eps = Arrays.copyOf(eps, n);
      epsCount = Arrays.copyOf(epsCount, n);
      edges = Arrays.copyOf(edges, n);
      edgeCount = Arrays.copyOf(edgeCount, n);
    }
    eps[size] = new int[2];
    edges[size] = new int[3];
    return size++;
  }

  void eps(int from, int to) {
    if (epsCount[from] == eps[from].length) {
      eps[from] = Arrays.copyOf(eps[from], eps[from].length * 2);
    }
    eps[from][epsCount[from]++] = to;
  }

  void range(int from, int lo, int hi, int to) {
    if (edgeCount[from] + 3 > edges[from].length) {
      edges[from] = Arrays.copyOf(edges[from], edges[from].length * 2 + 3);
    }
    edges[from][edgeCount[from]++] = lo;
    edges[from][edgeCount[from]++] = hi;
    edges[from][edgeCount[from]++] = to;
  }

  // ------------------------------------------------------------------------------------------ fragments

  Frag empty() {
    int s = state();
    return new Frag(s, s);
  }

  /** One byte in {@code [lo, hi]}. */
  Frag bytes(int lo, int hi) {
    int s = state();
    int e = state();
    range(s, lo, hi, e);
    return new Frag(s, e);
  }

  Frag literal(byte[] text) {
    int s = state();
    int at = s;
    for (byte b : text) {
      int next = state();
      range(at, b & 0xff, b & 0xff, next);
      at = next;
    }
    return new Frag(s, at);
  }

  Frag literal(String ascii) {
    return literal(ascii.getBytes(java.nio.charset.StandardCharsets.UTF_8));
  }

  Frag seq(Frag... parts) {
    for (int i = 1; i < parts.length; i++) {
      eps(parts[i - 1].end, parts[i].start);
    }
    return new Frag(parts[0].start, parts[parts.length - 1].end);
  }

  Frag alt(Frag... choices) {
    int s = state();
    int e = state();
    for (Frag c : choices) {
      eps(s, c.start);
      eps(c.end, e);
    }
    return new Frag(s, e);
  }

  /** {@code f} or nothing; fresh entry and exit states, as an edge from {@code f}'s own start would skip into its loops. */
  Frag optional(Frag f) {
    int s = state();
    int e = state();
    eps(s, f.start);
    eps(f.end, e);
    eps(s, e);
    return new Frag(s, e);
  }

  /** Zero or more of {@code f}. */
  Frag star(Frag f) {
    int s = state();
    eps(s, f.start);
    eps(f.end, s);
    return new Frag(s, s);
  }

  /** Fresh fragments, one per use: a fragment's states belong to one place in the automaton. */
  @FunctionalInterface
  interface Maker {
    Frag make();
  }

  /** {@code min} to {@code max} of {@code maker}'s fragment; {@code max} -1 = unbounded. */
  Frag repeat(Maker maker, int min, int max) {
    Frag all = empty();
    for (int i = 0; i < min; i++) {
      all = seq(all, maker.make());
    }
    if (max < 0) {
      return seq(all, star(maker.make()));
    }
    // Optional tails nested, so that each later copy needs the one before: a?(a?(a?)).
    int extra = max - min;
    if (extra > 0) {
      Frag tail = optional(maker.make());
      for (int i = 1; i < extra; i++) {
        tail = optional(seq(maker.make(), tail));
      }
      all = seq(all, tail);
    }
    return all;
  }

  /** {@code item} repeated {@code min} to {@code max} times with {@code separator} between ({@code max} -1 = unbounded). */
  Frag separated(Maker item, Maker separator, int min, int max) {
    if (max == 0) {
      return empty();
    }
    Maker withSep = () -> seq(separator.make(), item.make());
    Frag some = seq(item.make(), repeat(withSep, Math.max(min - 1, 0), max < 0 ? -1 : max - 1));
    return min == 0 ? optional(some) : some;
  }
}
