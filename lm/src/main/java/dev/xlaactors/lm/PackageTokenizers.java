package dev.xlaactors.lm;

import dev.xlaactors.lm.text.HuggingFaceTokenizer;
import dev.xlaactors.lm.text.TiktokenTokenizer;
import dev.xlaactors.lm.text.Tokenizer;
import dev.xlaactors.runtime.model.ModelPackage;
import java.util.Optional;

/** Opens the tokenizer a model package names: a Hugging Face tokenizer.json, or a tiktoken encoding JTokkit bundles. */
final class PackageTokenizers {
  private PackageTokenizers() {}

  /** The tokenizer of {@code pkg}, or empty when its manifest names none. The caller closes it. */
  static Optional<Tokenizer> open(ModelPackage pkg) {
    return pkg.tokenizer().map(spec -> spec.huggingFaceFile() != null ? HuggingFaceTokenizer.open(spec.huggingFaceFile())
        : TiktokenTokenizer.of(spec.tiktokenEncoding()));
  }
}
