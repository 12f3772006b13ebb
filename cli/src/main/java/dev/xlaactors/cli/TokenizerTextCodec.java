package dev.xlaactors.cli;

import dev.xlaactors.http.TextCodec;
import dev.xlaactors.lm.LanguageModel;

/** A language model's tokenizer as the HTTP generation route uses it: prompts as the model encodes them, each token's text and bytes. */
final class TokenizerTextCodec implements TextCodec {
  private final LanguageModel model;

  TokenizerTextCodec(LanguageModel model) {
    this.model = model;
  }

  @Override
  public int[] encode(String text) {
    return model.encode(text);
  }

  @Override
  public String decode(int token) {
    return model.tokenizer().decode(new int[] {token});
  }

  /** The token's own bytes, so the route can hold back a character split across byte-level tokens. */
  @Override
  public byte[] decodeBytes(int token) {
    return model.tokenizer().decodeBytes(new int[] {token});
  }
}
