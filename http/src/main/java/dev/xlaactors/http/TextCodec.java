package dev.xlaactors.http;

import dev.xlaactors.lm.LanguageModel;
import dev.xlaactors.lm.text.IncrementalDetokenizer;
import dev.xlaactors.lm.text.Tokenizer;
import java.util.function.Function;

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
   * The text of one generation's tokens, piece by piece, as they arrive (one per response's stream; not
   * thread-safe).
   */
  interface Pieces {
    /** The text {@code token} completes (empty while a character is incomplete). */
    String next(int token);

    /** What is still held back at the end (an incomplete character: U+FFFD), or empty. */
    String rest();
  }

  /**
   * The pieces of the tokens generated after {@code prompt}. The default joins each token's {@link
   * #decodeBytes} and sends whole characters, right for codecs whose tokens are bytes; a tokenizer's codec
   * ({@link #of(Tokenizer, Function)}) decodes as its tokenizer does, in context.
   */
  default Pieces pieces(int[] prompt) {
    return new ServingRoutes.TokenText(this);
  }

  /**
   * The codec of a language model's tokenizer: prompts encoded as the model encodes them ({@link
   * LanguageModel#encode}: its special tokens and BOS), and its tokens' text as {@link #of(Tokenizer,
   * Function)} gives it. Thread-safe, as the tokenizer is.
   */
  static TextCodec of(LanguageModel model) {
    return of(model.tokenizer(), model::encode);
  }

  /**
   * The codec of {@code tokenizer}, prompts encoded by {@code encode}: each token's own bytes, and a
   * generation's text by the incremental detokenizer every route uses ({@link IncrementalDetokenizer}, with
   * the prompt's last tokens as context, special tokens kept), so a SentencePiece piece keeps its space and
   * a character split over tokens (byte-level or byte-fallback) arrives whole once its last token does.
   */
  static TextCodec of(Tokenizer tokenizer, Function<String, int[]> encode) {
    return new TextCodec() {
      @Override
      public int[] encode(String text) {
        return encode.apply(text);
      }

      @Override
      public String decode(int token) {
        return tokenizer.decode(new int[] {token});
      }

      @Override
      public byte[] decodeBytes(int token) {
        return tokenizer.decodeBytes(new int[] {token});
      }

      @Override
      public Pieces pieces(int[] prompt) {
        IncrementalDetokenizer detokenizer = IncrementalDetokenizer.create(tokenizer, prompt, false);
        return new Pieces() {
          @Override
          public String next(int token) {
            return detokenizer.next(token);
          }

          @Override
          public String rest() {
            return detokenizer.finish();
          }
        };
      }
    };
  }
}
