package dev.xlaactors.actors.serve;

import java.util.Arrays;

/**
 * What each slot's KV-cache row holds, as token ids: its first {@code held[slot]} positions hold the keys and values
 * of these tokens (a prompt, then every token fed back through a decode step), so a new request whose prompt
 * starts with them needs only the rest prefilled (llama-server's {@code cache_prompt}, vLLM's automatic prefix
 * caching at the granularity of a slot). Only tokens a finished step actually wrote count: positions a chunk
 * program pads past a prompt's end hold nothing known, and a write at a position cuts off whatever the row held
 * from there on (those positions now belong to another sequence).
 *
 * <p>It also orders the free slots for eviction: a slot's {@code released} stamp is when its last request left
 * it (0: it holds nothing), so a request without a useful prefix takes the least recently used row and the
 * most recent conversations stay reusable. Plain state of the {@link SlotScheduler}, used on the server's actor
 * thread only; valid only for a decoder that {@link SlotDecoder#keepsFreeRows keeps free rows}.
 */
final class PromptCache {
  private final int[][] tokens; // per slot, grown as needed up to the context
  private final int[] held;
  private final long[] released;
  private final int contextLength;
  private long clock;

  /** An empty cache of {@code slots} rows of {@code contextLength} positions. */
  PromptCache(int slots, int contextLength) {
    this.tokens = new int[slots][];
    this.held = new int[slots];
    this.released = new long[slots];
    this.contextLength = contextLength;
  }

  /** The tokens {@code slot}'s row holds, positions 0 .. held-1 (a copy). */
  int[] tokens(int slot) {
    return tokens[slot] == null ? new int[0] : Arrays.copyOf(tokens[slot], held[slot]);
  }

  /** How many leading tokens of {@code prompt} {@code slot}'s row holds. */
  int commonPrefix(int slot, int[] prompt) {
    int[] row = tokens[slot];
    int n = Math.min(held[slot], prompt.length);
    int i = 0;
    while (i < n && row[i] == prompt[i]) {
      i++;
    }
    return i;
  }

  /**
   * The free slot for {@code prompt} ({@code free[s]}: slot s may be taken; at least one is): the one whose row
   * holds the longest prefix of it (among equals the least recently released, then the lowest) when that prefix is
   * more than half the prompt; otherwise the least recently released free slot, an empty row first (it holds
   * nothing worth keeping), then the lowest. The half is llama-server's default {@code --slot-prompt-similarity}:
   * nearly every prompt shares a few tokens with every row (a BOS token, a chat template's opening), and taking a
   * row for those would evict a conversation that its next turn could have reused, to save a few tokens now.
   */
  int choose(boolean[] free, int[] prompt) {
    int best = -1;
    int bestPrefix = -1;
    int oldest = -1;
    for (int s = 0; s < free.length; s++) {
      if (!free[s]) {
        continue;
      }
      int prefix = commonPrefix(s, prompt);
      if (prefix > bestPrefix || (prefix == bestPrefix && released[s] < released[best])) {
        best = s;
        bestPrefix = prefix;
      }
      if (oldest < 0 || released[s] < released[oldest]) {
        oldest = s;
      }
    }
    return 2L * bestPrefix > prompt.length ? best : oldest;
  }

  /** {@code slot}'s row now holds {@code source[from .. from+count)} at positions {@code from ..}: a prompt part. */
  void written(int slot, int[] source, int from, int count) {
    cut(slot, from);
    if (held[slot] != from) {
      return; // a gap below: nothing past it is known
    }
    ensure(slot, from + count);
    System.arraycopy(source, from, tokens[slot], from, count);
    held[slot] = from + count;
  }

  /** {@code slot}'s row now holds {@code token} at {@code position}: a decode step. */
  void written(int slot, int position, int token) {
    cut(slot, position);
    if (held[slot] != position) {
      return;
    }
    ensure(slot, position + 1);
    tokens[slot][position] = token;
    held[slot] = position + 1;
  }

  /** {@code slot}'s request left it: its row is now the most recently used. */
  void released(int slot) {
    released[slot] = ++clock;
  }

  /** Every row holds nothing known: after the decoder was {@link SlotDecoder#reset reset}. */
  void forgetAll() {
    Arrays.fill(held, 0);
    Arrays.fill(released, 0);
  }

  private void cut(int slot, int position) {
    held[slot] = Math.min(held[slot], position);
  }

  private void ensure(int slot, int length) {
    int[] row = tokens[slot];
    if (row == null || row.length < length) {
      int size = Math.min(contextLength, Math.max(length, row == null ? 64 : row.length * 2));
      tokens[slot] = row == null ? new int[Math.max(size, length)] : Arrays.copyOf(row, Math.max(size, length));
    }
  }

  @Override
  public String toString() {
    return "PromptCache" + Arrays.toString(held);
  }
}
