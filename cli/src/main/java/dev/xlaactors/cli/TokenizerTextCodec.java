package dev.xlaactors.cli;

import dev.xlaactors.http.TextCodec;
import dev.xlaactors.lm.LanguageModel;

/** A language model's tokenizer as the HTTP generation route uses it: prompts as the model encodes them, token text. */
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
}
