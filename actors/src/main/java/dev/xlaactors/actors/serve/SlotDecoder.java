package dev.xlaactors.actors.serve;

/**
 * A language model as {@link GenerationServer} drives it: a fixed number of sequence slots, each with
 * its own rows of a KV cache that stays on the device, filled by {@link #prefill} and advanced one token
 * at a time by {@link #decode}, which steps every slot at once at its own position. The server owns the
 * slots (which request is in which) and calls one method at a time, never concurrently, from its
 * background thread; an implementation need not be thread-safe but must not hold on to the arrays passed in.
 *
 * <p>The interface keeps the actors module model-agnostic: the lm module implements it over a model
 * package's slot programs ({@code dev.xlaactors.lm.PackageSlotDecoder}), weights bound once and the cache
 * donated to every call.
 */
public interface SlotDecoder extends AutoCloseable {
  /** How many sequences decode at once (the cache's rows). At least 1; constant. */
  int slots();

  /** Token ids are {@code 0 .. vocabulary()-1}; logits rows have this many values. */
  int vocabulary();

  /** The longest prompt {@link #prefill} takes. */
  int maxPromptLength();

  /** Positions are {@code 0 .. contextLength()-1}: a sequence holds at most this many tokens. */
  int contextLength();

  /**
   * Writes {@code prompt} (1 to {@link #maxPromptLength()} tokens, each in the vocabulary, already
   * checked by the server) into {@code slot}'s cache rows, replacing what the slot held, and returns the
   * logits ({@link #vocabulary()} values) of the prompt's last position. Other slots are left as they are.
   */
  float[] prefill(int slot, int[] prompt);

  /**
   * The most prompt tokens the server hands {@link #prefill(int, int[], int, int)} in one part while other
   * sequences decode, so that a long prompt is written over several iterations instead of stalling their
   * streams. By default the whole prompt ({@link #maxPromptLength()}): one part.
   */
  default int prefillChunk() {
    return maxPromptLength();
  }

  /**
   * Writes the part {@code prompt[from .. from+count)} of a prompt into {@code slot}'s cache row, whose earlier
   * parts (positions below {@code from}) earlier calls wrote; returns the logits of the prompt's last position
   * when the part ends the prompt, else null. By default only a whole prompt, through {@link #prefill(int, int[])}.
   */
  default float[] prefill(int slot, int[] prompt, int from, int count) {
    if (from != 0 || count != prompt.length) {
      throw new UnsupportedOperationException("this decoder takes a whole prompt at once, not tokens " + from + ".."
          + (from + count - 1) + " of " + prompt.length);
    }
    return prefill(slot, prompt);
  }

  /**
   * One decode step of every slot: slot {@code s} reads {@code tokens[s]} at position {@code positions[s]}
   * (its cache holds positions below it) and writes that position. Slots with {@code active[s]} false are
   * not in use: their token and position are 0 and what the step writes into them is overwritten by the
   * next prefill. Returns the logits, {@code slots() * vocabulary()} values, row {@code s} for slot
   * {@code s} (rows of inactive slots are meaningless). The array may be the decoder's own, overwritten by its
   * next decode step (a package's decoder does so): copy what must outlive that.
   */
  float[] decode(int[] tokens, int[] positions, boolean[] active);

  /**
   * Whether the row of a slot that is not active in a {@link #decode} step (and not the one a {@link #prefill}
   * writes) is left exactly as it was, so that a free slot still holds the keys and values of the tokens its
   * last sequence wrote. When true, the server may start a new request in a free slot whose row already holds
   * the first tokens of its prompt and prefill only the rest ({@code xla-actors.actors.generation.prompt-cache}):
   * the keys and values at a position depend only on the tokens up to it. An implementation that says so must
   * also take prompt parts that start past 0 ({@link #prefill(int, int[], int, int)}). False by default: a decoder
   * whose step writes into every slot (a fixed {@code decode_slots} program) would make such a prefix stale.
   */
  default boolean keepsFreeRows() {
    return false;
  }

  /**
   * Called after {@link #prefill} or {@link #decode} failed: the cache may be gone (it is donated to each
   * call), so make a fresh one. Every slot is empty afterwards.
   */
  void reset();

  /**
   * Aborts the call in flight, if the decoder can: the server calls it, from its actor's thread, when it
   * stops while a step runs, so nobody waits for a step whose results would go nowhere. The aborted call
   * fails; the server closes the decoder once it has returned. Does nothing by default.
   */
  default void cancel(String reason) {}

  /** Frees the cache and whatever else the decoder holds on the device. */
  @Override
  void close();
}
