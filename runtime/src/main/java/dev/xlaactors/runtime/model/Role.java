package dev.xlaactors.runtime.model;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.Arrays;
import java.util.Locale;

/**
 * What a program of a {@link ModelPackage} does, and so which inputs and outputs it has (the role table of
 * docs/model-package.md). Each role is sized by {@link #sizeKey()} ({@code batch} or {@code slots}) and some
 * by a {@code length} too.
 */
public enum Role {
  /** {@code tokens} i32[B,T] to the logits at every position, f32[B,T,V]. */
  SCORE("batch", true),
  /** One prompt written into one slot of the cache: the logits of its last position and the cache. */
  PREFILL_SLOT("slots", true),
  /** One decoding step of every slot at its own position: logits f32[S,V] and the cache. */
  DECODE_SLOTS("slots", false),
  /** An empty cache of S slots. */
  SLOT_CACHE("slots", false),
  /** {@code tokens} and {@code mask} i32[B,T] to the last hidden states f32[B,T,D]. */
  EMBED("batch", true),
  /** Any program, served by batches of B (the first dimension of every input and output). */
  MAIN("batch", false);

  private final String sizeKey;
  private final boolean hasLength;

  Role(String sizeKey, boolean hasLength) {
    this.sizeKey = sizeKey;
    this.hasLength = hasLength;
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
