package dev.xlaactors.http;

import dev.xlaactors.actors.serve.GenerationServer;
import dev.xlaactors.actors.serve.SlotDecoder;
import org.apache.pekko.actor.typed.ActorRef;

/**
 * A language model served at {@code POST /v1/models/<name>/generate}: its {@link GenerationServer}, the
 * limits prompts are checked against, and an optional {@link TextCodec}.
 *
 * @param name the model's name in the URL
 * @param server the generation server
 * @param vocabulary token ids are {@code 0 .. vocabulary-1}
 * @param maxPromptLength the longest prompt, in tokens
 * @param contextLength the most tokens a sequence holds (prompt and generated)
 * @param text the tokenizer, or null (requests then give token ids)
 */
public record GenerationEndpoint(String name, ActorRef<GenerationServer.Command> server, int vocabulary, int maxPromptLength,
    int contextLength, TextCodec text) {

  /** The endpoint of {@code server}, which serves {@code decoder}; reads the decoder's constant limits only. */
  public static GenerationEndpoint of(String name, ActorRef<GenerationServer.Command> server, SlotDecoder decoder, TextCodec text) {
    return new GenerationEndpoint(name, server, decoder.vocabulary(), decoder.maxPromptLength(), decoder.contextLength(), text);
  }
}
