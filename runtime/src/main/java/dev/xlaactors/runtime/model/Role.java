package dev.xlaactors.runtime.model;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.Arrays;
import java.util.Locale;

/**
 * What a program of a {@link ModelPackage} does, and so which inputs and outputs it has (the role table of
 * docs/model-package.md). Each role is sized by {@link #sizeKey()} ({@code batch} or {@code slots}), some
 * by a {@code length} too, and {@code decode_batch} by a {@code batch} of rows beside its cache's slots.
 */
public enum Role {
  /** {@code tokens} i32[B,T] to the logits at every position, f32[B,T,V]. */
  SCORE("batch", true),
  /** One prompt written into one slot of the cache: the logits of its last position and the cache. */
  PREFILL_SLOT("slots", true),
  /**
   * A chunk of {@code length} prompt tokens written at an offset of one slot's cache row, attending to the row
   * below the offset: the logits of one row of the chunk (the prompt's last token) and the cache. A prompt of
   * any length up to the context goes in by chunks.
   */
  PREFILL_CHUNK("slots", true),
  /** One decoding step of every slot at its own position: logits f32[S,V] and the cache. */
  DECODE_SLOTS("slots", false),
  /**
   * One decoding step of {@code batch} sequences held in any rows of a cache of {@code slots} rows, each
   * reading only the first {@code length} positions of its row: logits f32[B,V] and the cache. A step's cost
   * follows the sequences that run and their lengths, not the cache's size.
   */
  DECODE_BATCH("slots", true, true),
  /** As {@link #PREFILL_CHUNK}, but the logits of every row of the chunk, f32[1,C,V]: scoring by chunks. */
  SCORE_CHUNK("slots", true),
  /** An empty cache of S slots. */
  SLOT_CACHE("slots", false),
  /** {@code tokens} and {@code mask} i32[B,T] to the last hidden states f32[B,T,D]. */
  EMBED("batch", true),
  /** Any program, served by batches of B (the first dimension of every input and output). */
  MAIN("batch", false);

  private final String sizeKey;
  private final boolean hasLength;
  private final boolean hasBatch;

  Role(String sizeKey, boolean hasLength) {
    this(sizeKey, hasLength, false);
  }

  Role(String sizeKey, boolean hasLength, boolean hasBatch) {
    this.sizeKey = sizeKey;
    this.hasLength = hasLength;
    this.hasBatch = hasBatch;
  }

  /** The manifest's name of the role, e.g. {@code prefill_slot}. */
  public String jsonName() {
    return name().toLowerCase(Locale.ROOT);
  }

  /** The manifest key that sizes a program of this role: {@code batch} or {@code slots}. */
  public String sizeKey() {
    return sizeKey;
  }

  /** Whether a program of this role has a {@code length} (of its token inputs). */
  public boolean hasLength() {
    return hasLength;
  }

  /** Whether a program of this role has a {@code batch} of rows beside its {@code slots} (decode_batch). */
  public boolean hasBatch() {
    return hasBatch;
  }

  /** The role the manifest names {@code name}; refused naming the roles there are. */
  public static Role fromJson(String name) {
    for (Role r : values()) {
      if (r.jsonName().equals(name)) {
        return r;
      }
    }
    throw new InvalidArgumentException("unknown role '" + name + "'; the roles are "
        + Arrays.stream(values()).map(Role::jsonName).toList());
  }

  @Override
  public String toString() {
    return jsonName();
  }
}
