package dev.xlaactors.lm.text;

import java.util.OptionalInt;

/**
 * Turns text into token ids and back for one model's vocabulary.
 *
 * <p>Conventions shared by every implementation:
 *
 * <ul>
 *   <li>{@link #encode(String)} adds no special tokens (no BOS/EOS, no template); ask for them with
 *       {@link #encode(String, boolean)}. Text that spells a special token (e.g. {@code <|endoftext|>})
 *       becomes that token, as Hugging Face tokenizers do by default: callers that must keep user text
 *       from reaching control tokens strip it first.
 *   <li>{@link #decode(int[])} drops nothing; {@link #decode(int[], boolean)} can skip special tokens.
 *       A sequence that ends inside a multi-byte character decodes to U+FFFD for the missing part (what
 *       {@link IncrementalDetokenizer} relies on to hold text back).
 *   <li>Ids outside {@code [0, vocabularySize())} are refused with an {@link
 *       dev.xlaactors.error.InvalidArgumentException}.
 * </ul>
 *
 * <p>Implementations are thread-safe for encoding and decoding; {@link #close()} releases native memory,
 * is idempotent, and must not race with other calls.
 */
public interface Tokenizer extends AutoCloseable {

  /** The ids of {@code text}, with no special tokens added. */
  default int[] encode(String text) {
    return encode(text, false);
  }

  /**
   * The ids of {@code text}; with {@code addSpecialTokens} the tokenizer's template (BOS, EOS, CLS/SEP)
   * is applied where it has one.
   */
  int[] encode(String text, boolean addSpecialTokens);

  /** The text of {@code ids}, special tokens included. */
  default String decode(int[] ids) {
    return decode(ids, false);
  }

  /** The text of {@code ids}; with {@code skipSpecialTokens} special tokens are left out. */
  String decode(int[] ids, boolean skipSpecialTokens);

  /**
   * The UTF-8 bytes of {@code ids}, special tokens included. A byte-level tokenizer (GPT-2's, tiktoken's)
   * or a SentencePiece one with byte fallback (Llama 2's, Gemma's) gives a token's own bytes even when it
   * holds only part of a character, which {@link #decode} turns into U+FFFD (and a piece's leading space,
   * which decode drops at the start of a text); joining the bytes of consecutive tokens gives the text whole. The default is
   * {@link #decode}'s text in UTF-8, right for tokenizers whose tokens are whole characters.
   */
  default byte[] decodeBytes(int[] ids) {
    return decode(ids, false).getBytes(java.nio.charset.StandardCharsets.UTF_8);
  }

  /** The number of ids this tokenizer knows: one more than the highest id, special tokens included. */
  int vocabularySize();

  /**
   * The id of the special token {@code token}, e.g. {@code "<|endoftext|>"}, or of any whole token as the
   * vocabulary spells it (byte-level vocabularies spell a space {@code Ġ}); empty when there is none.
   */
  OptionalInt tokenId(String token);

  /** Releases what the tokenizer holds; idempotent. */
  @Override
  void close();
}
