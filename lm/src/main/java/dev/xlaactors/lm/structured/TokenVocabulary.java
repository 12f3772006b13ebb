package dev.xlaactors.lm.structured;

import dev.xlaactors.lm.text.Tokenizer;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Map;
import java.util.WeakHashMap;

/**
 * The bytes each token of a vocabulary adds to the text, as a constraint reads them: a byte-level
 * vocabulary's (GPT-2's, tiktoken's, Qwen's) raw bytes, part of a character included; a SentencePiece
 * vocabulary's text with its word-start space (read after an anchor token, since decoding a token alone
 * drops it). Tokens a constraint never allows are left out: special tokens (the end of text is handled
 * apart, by {@link GrammarProcessor}), tokens with no bytes, and SentencePiece byte-fallback tokens that
 * hold part of a character (their text alone is U+FFFD).
 *
 * <p>The ids are kept sorted by their bytes with the length of the prefix each shares with the one before,
 * so that walking the whole vocabulary through an automaton reuses shared prefixes and skips every token
 * under a dead prefix at once ({@link TokenGrammar}). Immutable and thread-safe.
 */
public final class TokenVocabulary {
  private static final Map<Tokenizer, TokenVocabulary> CACHE = new WeakHashMap<>();

  private final byte[][] bytes;
  final int[] order;
  final int[] shared;
  final int maxLength;

  private TokenVocabulary(byte[][] bytes) {
    this.bytes = bytes;
    Integer[] ids = new Integer[bytes.length];
    int usable = 0;
    int longest = 0;
    for (int i = 0; i < bytes.length; i++) {
      if (bytes[i] != null && bytes[i].length > 0) {
        ids[usable++] = i;
        longest = Math.max(longest, bytes[i].length);
      }
    }
    Integer[] kept = Arrays.copyOf(ids, usable);
    Arrays.sort(kept, Comparator.comparing((Integer i) -> bytes[i], Arrays::compareUnsigned));
    order = new int[usable];
    shared = new int[usable];
    for (int k = 0; k < usable; k++) {
      order[k] = kept[k];
      if (k > 0) {
        byte[] a = bytes[order[k - 1]];
        byte[] b = bytes[order[k]];
        int m = Arrays.mismatch(a, b);
        shared[k] = m < 0 ? a.length : m;
      }
    }
    maxLength = longest;
  }

  /** A vocabulary of the given token bytes (index = token id; null = never allowed). */
  public static TokenVocabulary of(byte[][] tokenBytes) {
    return new TokenVocabulary(tokenBytes.clone());
  }

  /** The vocabulary of {@code tokenizer}, read once per tokenizer (about a second for 150,000 tokens) and cached. */
  public static TokenVocabulary of(Tokenizer tokenizer) {
    synchronized (CACHE) {
      return CACHE.computeIfAbsent(tokenizer, TokenVocabulary::read);
    }
  }

  private static TokenVocabulary read(Tokenizer tokenizer) {
    int n = tokenizer.vocabularySize();
    int anchor = anchor(tokenizer);
    byte[] anchorBytes = tokenizer.decodeBytes(new int[] {anchor});
    byte[][] bytes = new byte[n][];
    for (int id = 0; id < n; id++) {
      String text;
      String plain;
      try {
        text = tokenizer.decode(new int[] {id}, false);
        plain = tokenizer.decode(new int[] {id}, true);
      } catch (RuntimeException e) {
        continue; // an id the tokenizer has no token for (a gap in the vocabulary)
      }
      if (plain.isEmpty() && !text.isEmpty()) {
        continue; // special
      }
      byte[] alone = tokenizer.decodeBytes(new int[] {id});
      byte[] after = tokenizer.decodeBytes(new int[] {anchor, id});
      byte[] b = alone;
      if (after.length >= anchorBytes.length && Arrays.equals(after, 0, anchorBytes.length, anchorBytes, 0, anchorBytes.length)) {
        b = Arrays.copyOfRange(after, anchorBytes.length, after.length); // keeps a word-start space decoding alone drops
      }
      if (text.indexOf('\uFFFD') >= 0 && Arrays.equals(alone, text.getBytes(java.nio.charset.StandardCharsets.UTF_8))) {
        continue; // part of a character that the tokenizer only gives as U+FFFD: its real bytes are unknown here
      }
      bytes[id] = b;
    }
    return new TokenVocabulary(bytes);
  }

  /** A token that decodes to itself in any position: the one of "a". */
  private static int anchor(Tokenizer tokenizer) {
    int[] a = tokenizer.encode("a", false);
    return a.length > 0 ? a[a.length - 1] : 0;
  }

  /** The number of ids. */
  public int size() {
    return bytes.length;
  }

  /** The bytes of token {@code id}, or null when a constraint never allows it. */
  public byte[] bytes(int id) {
    return id >= 0 && id < bytes.length ? bytes[id] : null;
  }

  /** How many tokens a constraint may allow. */
  public int usableCount() {
    return order.length;
  }
}
