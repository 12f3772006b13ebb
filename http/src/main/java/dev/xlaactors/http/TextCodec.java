package dev.xlaactors.http;

import dev.xlaactors.lm.LanguageModel;

/**
 * Text to token ids and back for a generation endpoint (a tokenizer): with one, {@code POST .../generate}
 * takes {@code "prompt": "text"} and each streamed token carries its {@code "text"}; without, requests give
 * {@code "tokens"}. Must be thread-safe (requests use it concurrently).
 */
public interface TextCodec {
  /** The token ids of {@code text}. */
  int[] encode(String text);

  /** The text of one token (may be part of a character for byte-level tokenizers). */
  String decode(int token);

  /**
   * The UTF-8 bytes of one token. A byte-level tokenizer overrides it, since its token may hold part of a
   * character, which {@link #decode} cannot return intact: the streamed text joins the bytes and sends a
   * character once it is whole. The default is {@link #decode}'s text in UTF-8.
   */
  default byte[] decodeBytes(int token) {
    return decode(token).getBytes(java.nio.charset.StandardCharsets.UTF_8);
  }

  /**
   * The codec of a language model's tokenizer: prompts encoded as the model encodes them ({@link
   * LanguageModel#encode}: its special tokens and BOS), and each token's own bytes, so a character that
   * byte-level tokens split arrives whole once its last token does. Thread-safe, as the tokenizer is.
   */
  static TextCodec of(LanguageModel model) {
    return new TextCodec() {
      @Override
      public int[] encode(String text) {
        return model.encode(text);
      }

      @Override
      public String decode(int token) {
        return model.tokenizer().decode(new int[] {token});
      }

      @Override
      public byte[] decodeBytes(int token) {
        return model.tokenizer().decodeBytes(new int[] {token});
      }
    };
  }
}
