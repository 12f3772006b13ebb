package dev.xlaactors.lm.text;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.Arrays;

/**
 * Turns a stream of generated token ids into text pieces that are safe to emit: never half a character.
 *
 * <p>Byte-level vocabularies (GPT-2, tiktoken) split many characters (emoji, CJK) over several tokens,
 * and a decode that ends inside such a character ends in U+FFFD. Like vLLM and TGI, this keeps a small
 * window of tokens: {@code prefix} tokens already emitted (decoded again only as context, so tokenizers
 * that drop a leading space on a lone token still space correctly) and the {@code unread} tokens after
 * them. Each {@link #next(int)} decodes the window; when the text grew and does not end in U+FFFD, the
 * growth is emitted and the window slides so that the unread tokens become the new prefix. A step thus
 * decodes a few tokens, not the whole sequence.
 *
 * <p>A tail that is still U+FFFD after {@value #MAX_UNREAD_TOKENS} unread tokens is not a split
 * character (one takes at most four bytes) but U+FFFD in the text or invalid bytes from the model, and
 * is emitted. {@link #finish()} flushes whatever is held back.
 *
 * <p>One per sequence; not thread-safe.
 */
public final class IncrementalDetokenizer {
  /** How many prompt tokens give the first generated tokens their context (vLLM uses 5). */
  static final int PROMPT_CONTEXT_TOKENS = 5;

  /** Unread tokens after which a U+FFFD tail is emitted anyway. */
  static final int MAX_UNREAD_TOKENS = 8;

  private static final char REPLACEMENT = '\uFFFD';

  private final Tokenizer tokenizer;
  private final boolean skipSpecialTokens;
  /** The prefix tokens then the unread ones; nothing before the prefix is kept. */
  private int[] window = new int[16];
  private int size;
  /** How many of {@link #window}'s tokens are prefix (already emitted). */
  private int prefixSize;
  /** The length of the prefix tokens' decoded text. */
  private int prefixTextLength;
  private boolean finished;

  private IncrementalDetokenizer(Tokenizer tokenizer, int[] promptTokens, boolean skipSpecialTokens) {
    this.tokenizer = tokenizer;
    this.skipSpecialTokens = skipSpecialTokens;
    int from = Math.max(0, promptTokens.length - PROMPT_CONTEXT_TOKENS);
    // The context starts on a character: SentencePiece's byte-fallback decoder turns every byte of a run that
    // starts inside one into U+FFFD, which would hide all the text after it.
    for (int back = 0; from > 0 && back < 3 && startsInsideCharacter(promptTokens[from]); back++) {
      from--;
    }
    for (int i = from; i < promptTokens.length; i++) {
      append(promptTokens[i]);
    }
    // A prompt that ends inside a character (its last tokens hold the first bytes of one) loses nothing: the
    // tokens that hold only bytes of that character are not text yet and stay unread (a SentencePiece byte
    // piece; a window must not start inside a character there, since its decoder turns every byte of an
    // invalid run into U+FFFD); a token that also holds whole characters before it (GPT-2's " \xF0") stays
    // prefix, its text cut before the U+FFFD of the partial bytes. The generated token that completes the
    // character then emits it whole.
    int partial = size == 0 ? 0 : incompleteTailBytes(tokenizer.decodeBytes(Arrays.copyOf(window, size)));
    int unread = 0;
    for (int i = size - 1; i >= 0 && partial > 0; i--) {
      int length = tokenizer.decodeBytes(new int[] {window[i]}).length;
      if (length > partial) {
        break;
      }
      partial -= length;
      unread++;
    }
    prefixSize = size - unread;
    String text = decode(0, prefixSize);
    int replaced = 0;
    while (replaced < partial && replaced < text.length() && text.charAt(text.length() - 1 - replaced) == REPLACEMENT) {
      replaced++;
    }
    prefixTextLength = text.length() - replaced;
  }

  /** Whether token {@code id}'s bytes start with a UTF-8 continuation byte (it holds the end of a character). */
  private boolean startsInsideCharacter(int id) {
    byte[] b = tokenizer.decodeBytes(new int[] {id});
    return b.length > 0 && (b[0] & 0xC0) == 0x80;
  }

  /** How many bytes at the end of {@code b} start a UTF-8 character that is not complete (0 to 3). */
  static int incompleteTailBytes(byte[] b) {
    int i = b.length - 1;
    int back = 0;
    while (i >= 0 && back < 3 && (b[i] & 0xC0) == 0x80) { // continuation bytes back to the lead byte
      i--;
      back++;
    }
    if (i < 0) {
      return 0; // only continuation bytes: nothing a later byte could complete
    }
    int lead = b[i] & 0xFF;
    int need = lead >= 0xF8 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return b.length - i >= need ? 0 : b.length - i;
  }

  /**
   * A detokenizer for the tokens generated after {@code promptTokens} (its last few give the first
   * generated tokens their context; none is emitted).
   */
  public static IncrementalDetokenizer create(Tokenizer tokenizer, int[] promptTokens, boolean skipSpecialTokens) {
    if (tokenizer == null || promptTokens == null) {
      throw new InvalidArgumentException("tokenizer and prompt tokens must not be null: pass new int[0] for no prompt");
    }
    return new IncrementalDetokenizer(tokenizer, promptTokens, skipSpecialTokens);
  }

  /** A detokenizer with no prompt that keeps special tokens in the text. */
  public static IncrementalDetokenizer create(Tokenizer tokenizer) {
    return create(tokenizer, new int[0], false);
  }

  /**
   * Takes the next generated token; returns the text it completes, possibly empty (when it ends inside a
   * character, that text waits for the tokens that complete it).
   *
   * @throws IllegalStateException after {@link #finish()}
   */
  public String next(int tokenId) {
    if (finished) {
      throw new IllegalStateException("the detokenizer has finished: create a new one for another sequence");
    }
    append(tokenId);
    String text = decode(0, size);
    int unread = size - prefixSize;
    if (text.length() <= prefixTextLength) {
      // Nothing new (e.g. skipped special tokens): slide anyway once the window is long, to keep it short.
      if (unread >= MAX_UNREAD_TOKENS) {
        slide();
      }
      return "";
    }
    if (text.charAt(text.length() - 1) == REPLACEMENT && unread < MAX_UNREAD_TOKENS) {
      return "";
    }
    String piece = text.substring(prefixTextLength);
    slide();
    return piece;
  }

  /** The text still held back (an incomplete character at the end stays U+FFFD); ends this sequence. */
  public String finish() {
    if (finished) {
      return "";
    }
    finished = true;
    String text = decode(0, size);
    return text.length() > prefixTextLength ? text.substring(prefixTextLength) : "";
  }

  /** The unread tokens become the prefix. */
  private void slide() {
    System.arraycopy(window, prefixSize, window, 0, size - prefixSize);
    size -= prefixSize;
    prefixSize = size;
    prefixTextLength = decode(0, prefixSize).length();
  }

  private void append(int tokenId) {
    if (size == window.length) {
      window = Arrays.copyOf(window, size * 2);
    }
    window[size++] = tokenId;
  }

  private String decode(int from, int to) {
    return to == from ? "" : tokenizer.decode(Arrays.copyOfRange(window, from, to), skipSpecialTokens);
  }
}
