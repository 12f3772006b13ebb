package dev.xlaactors.http;

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
}
