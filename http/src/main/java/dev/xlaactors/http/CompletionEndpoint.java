package dev.xlaactors.http;

import dev.xlaactors.actors.serve.SlotDecoder;
import dev.xlaactors.lm.TextGenerator;

/**
 * A language model served by the OpenAI API ({@code POST /v1/completions}, {@code /v1/chat/completions}):
 * its {@link TextGenerator} (over the model's generation server) and the longest prompt its decoder takes.
 *
 * @param generator text generation over the model's generation server
 * @param maxPromptLength the longest prompt, in tokens (the decoder's prefill length)
 */
public record CompletionEndpoint(TextGenerator generator, int maxPromptLength) {

  /** The endpoint of {@code generator}, whose server runs {@code decoder}; reads the decoder's constant limits only. */
  public static CompletionEndpoint of(TextGenerator generator, SlotDecoder decoder) {
    return new CompletionEndpoint(generator, decoder.maxPromptLength());
  }

  /** The model's name, as requests give it in {@code model}. */
  public String name() {
    return generator.model().name();
  }
}
