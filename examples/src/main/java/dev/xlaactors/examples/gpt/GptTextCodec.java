package dev.xlaactors.examples.gpt;

import dev.xlaactors.http.TextCodec;

/** GPT-2's tokenizer ({@link GptTokenizer}, r50k_base) as the HTTP endpoint's {@link TextCodec}. Thread-safe. */
public final class GptTextCodec implements TextCodec {
  private final GptTokenizer tokenizer = new GptTokenizer();

  @Override
  public int[] encode(String text) {
    return tokenizer.encode(text);
  }

  @Override
  public String decode(int token) {
    return tokenizer.decode(new int[] {token});
  }

  /** The token's bytes: GPT-2's tokens are byte-level, so one may hold part of a character. */
  @Override
  public byte[] decodeBytes(int token) {
    return tokenizer.bytes(new int[] {token});
  }
}
