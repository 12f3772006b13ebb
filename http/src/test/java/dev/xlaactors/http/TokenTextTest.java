package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.xlaactors.lm.TextGenerator;
import dev.xlaactors.lm.sampling.Sample;
import dev.xlaactors.lm.sampling.TopLogprob;
import dev.xlaactors.lm.text.HuggingFaceTokenizer;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Text right for every tokenizer on every route: a SentencePiece tokenizer with byte fallback (Llama 2
 * style: "▁" for spaces, {@code <0xNN>} pieces) and a byte-level BPE (Qwen's style), the small ones of
 * chat-templates/. Each test failed before its fix: the generate route dropped SentencePiece's spaces and
 * sent U+FFFD for byte pieces; chat logprob {@code bytes} were U+FFFD's; legacy {@code top_logprobs} keys
 * of partial characters all read U+FFFD and collided; echo {@code text_offset} counted a {@code <s>} the
 * text does not hold.
 */
class TokenTextTest {
  private static HuggingFaceTokenizer sentencePiece;
  private static HuggingFaceTokenizer byteLevel;

  @BeforeAll
  static void open() throws Exception {
    sentencePiece = HuggingFaceTokenizer.open(resource("llama-2-style/tokenizer.json"));
    byteLevel = HuggingFaceTokenizer.open(resource("qwen2.5/tokenizer.json"));
  }

  @AfterAll
  static void close() {
    sentencePiece.close();
    byteLevel.close();
  }

  private static Path resource(String name) throws Exception {
    return Paths.get(TokenTextTest.class.getResource("/chat-templates/" + name).toURI());
  }

  private static int id(HuggingFaceTokenizer tokenizer, String token) {
    return tokenizer.tokenId(token).orElseThrow(() -> new AssertionError(token + " is not a token"));
  }

  @Test
  void theGenerateRouteStreamsSentencePieceTextWithItsSpacesAndWholeCharacters() {
    for (HuggingFaceTokenizer tokenizer : List.of(sentencePiece, byteLevel)) {
      TextCodec codec = TextCodec.of(tokenizer, text -> tokenizer.encode(text, true));
      String continuation = " the world: naïve café, 日本語 🎉 end";
      int[] prompt = tokenizer.encode("Say", false);
      int[] all = tokenizer.encode("Say" + continuation, false);
      assertEquals(Arrays.toString(prompt), Arrays.toString(Arrays.copyOf(all, prompt.length)), "the prompt's tokens start the text's");
      TextCodec.Pieces pieces = codec.pieces(prompt);
      StringBuilder text = new StringBuilder();
      for (int t = prompt.length; t < all.length; t++) {
        String piece = pieces.next(all[t]);
        assertFalse(piece.contains("\uFFFD"), tokenizer + ": half a character in '" + piece + "'");
        text.append(piece);
      }
      text.append(pieces.rest());
      assertEquals(continuation, text.toString(), tokenizer.toString());
    }
  }

  @Test
  void chatLogprobBytesAreTheTokensOwn() throws Exception {
    // 日 is E6 97 A5: three byte pieces, each alone U+FFFD.
    int e6 = id(sentencePiece, "<0xE6>");
    int x97 = id(sentencePiece, "<0x97>");
    OpenAiResponses writer = new OpenAiResponses(OpenAiResponses.Api.CHAT, "m", sentencePiece, 2);
    List<Sample> samples = List.of(new Sample(e6, -0.5f, List.of(new TopLogprob(e6, -0.5f), new TopLogprob(x97, -1f))));
    JsonNode content = TensorJson.MAPPER.readTree(writer.response(List.of(new OpenAiResponses.Choice(0,
        new TextGenerator.Result(new int[] {1}, new int[] {e6}, "", TextGenerator.FinishReason.LENGTH, samples), null, null)),
        new OpenAiResponses.Usage(1, 1))).at("/choices/0/logprobs/content/0");
    assertEquals("[230]", content.get("bytes").toString());
    assertEquals("bytes:\\xe6", content.get("token").asText());
    assertEquals("[151]", content.at("/top_logprobs/1/bytes").toString());
    int hello = id(sentencePiece, "▁a"); // a piece with its space
    assertEquals("[32,97]", bytesOf(hello));
  }

  private static String bytesOf(int token) throws Exception {
    OpenAiResponses writer = new OpenAiResponses(OpenAiResponses.Api.CHAT, "m", sentencePiece, 0);
    return TensorJson.MAPPER.readTree(writer.response(List.of(new OpenAiResponses.Choice(0, new TextGenerator.Result(new int[] {1},
        new int[] {token}, "", TextGenerator.FinishReason.LENGTH, List.of(new Sample(token, 0f, List.of()))), null, null)),
        new OpenAiResponses.Usage(1, 1))).at("/choices/0/logprobs/content/0/bytes").toString();
  }

  @Test
  void legacyTopLogprobsKeepEveryDistinctToken() throws Exception {
    // The 20 most likely tokens are byte pieces (as at the start of a CJK character): each its own key.
    List<TopLogprob> top = new ArrayList<>();
    for (int b = 0xE0; b < 0xF4; b++) {
      top.add(new TopLogprob(id(sentencePiece, String.format("<0x%02X>", b)), -0.1f * (b - 0xDF)));
    }
    OpenAiResponses writer = new OpenAiResponses(OpenAiResponses.Api.COMPLETIONS, "m", sentencePiece, 20);
    JsonNode logprobs = TensorJson.MAPPER.readTree(writer.response(List.of(new OpenAiResponses.Choice(0, new TextGenerator.Result(
        new int[] {1}, new int[] {top.get(0).token()}, "", TextGenerator.FinishReason.LENGTH,
        List.of(new Sample(top.get(0).token(), -0.1f, top))), null, null)), new OpenAiResponses.Usage(1, 1))).at("/choices/0/logprobs");
    JsonNode keys = logprobs.at("/top_logprobs/0");
    assertEquals(20, keys.size(), keys.toString());
    Set<String> names = new HashSet<>();
    keys.fieldNames().forEachRemaining(names::add);
    assertEquals(Set.of("bytes:\\xe0", "bytes:\\xe1", "bytes:\\xe2"), Set.copyOf(names.stream().filter(n -> n.compareTo("bytes:\\xe3") < 0)
        .toList()));
    assertEquals("bytes:\\xe0", logprobs.at("/tokens/0").asText());
  }

  @Test
  void legacyTopLogprobsKeepTheLikelierOfTwoTokensWithTheSameBytes() throws Exception {
    // "a" is both a piece and the byte piece <0x61>: one key of the dict, holding the likelier token's
    // log-probability (vLLM's dict comprehension keeps the later, less likely one's), whichever was drawn.
    int byteA = id(sentencePiece, "<0x61>");
    int pieceA = id(sentencePiece, "a");
    int pieceB = id(sentencePiece, "b");
    List<TopLogprob> top = List.of(new TopLogprob(byteA, -0.5f), new TopLogprob(pieceA, -1f), new TopLogprob(pieceB, -2f));
    for (int drawn : new int[] {pieceA, byteA}) {
      float drawnLogprob = drawn == byteA ? -0.5f : -1f;
      OpenAiResponses writer = new OpenAiResponses(OpenAiResponses.Api.COMPLETIONS, "m", sentencePiece, 3);
      JsonNode logprobs = TensorJson.MAPPER.readTree(writer.response(List.of(new OpenAiResponses.Choice(0, new TextGenerator.Result(
          new int[] {1}, new int[] {drawn}, "a", TextGenerator.FinishReason.LENGTH, List.of(new Sample(drawn, drawnLogprob, top))), null,
          null)), new OpenAiResponses.Usage(1, 1))).at("/choices/0/logprobs");
      assertEquals("{\"a\":-0.5,\"b\":-2.0}", logprobs.at("/top_logprobs/0").toString(), "drawn " + drawn);
      assertEquals("a", logprobs.at("/tokens/0").asText());
      assertEquals(drawnLogprob, logprobs.at("/token_logprobs/0").floatValue(), "the drawn token's own log-probability");
    }
  }

  @Test
  void echoTextOffsetsAreOverTheReturnedText() throws Exception {
    // "Hello world" is encoded with the <s> the tokenizer adds; the echo is the client's text, without it.
    String prompt = "Hello world";
    int[] ids = sentencePiece.encode(prompt, true);
    assertEquals(1, ids[0], "<s> first");
    int[] all = sentencePiece.encode("Hello world the end", true);
    int[] generated = Arrays.copyOfRange(all, ids.length, all.length);
    String generatedText = sentencePiece.decode(all, true).substring(prompt.length());
    float[] promptLogprobs = new float[ids.length];
    List<List<TopLogprob>> promptTop = new ArrayList<>();
    for (int i = 0; i < ids.length; i++) {
      promptTop.add(List.of());
    }
    List<Sample> samples = new ArrayList<>();
    for (int t : generated) {
      samples.add(new Sample(t, -1f, List.of()));
    }
    OpenAiResponses writer = new OpenAiResponses(OpenAiResponses.Api.COMPLETIONS, "m", sentencePiece, 0);
    JsonNode choice = TensorJson.MAPPER.readTree(writer.response(List.of(new OpenAiResponses.Choice(0, new TextGenerator.Result(ids,
        generated, generatedText, TextGenerator.FinishReason.LENGTH, samples), prompt, new PromptLogprobs(ids, promptLogprobs, promptTop))),
        new OpenAiResponses.Usage(ids.length, generated.length))).at("/choices/0");
    String text = choice.get("text").asText();
    assertEquals("Hello world the end", text);
    JsonNode offsets = choice.at("/logprobs/text_offset");
    JsonNode tokens = choice.at("/logprobs/tokens");
    assertEquals(ids.length + generated.length, offsets.size());
    assertEquals(0, offsets.get(0).asInt(), "<s> is not in the text: it starts where the text does");
    for (int i = 1; i < offsets.size(); i++) {
      // Each token's text is at its offset (the first piece's space is not in the text: the decoder strips it).
      String token = tokens.get(i).asText();
      int at = offsets.get(i).asInt();
      String rest = text.substring(at);
      assertTrue(rest.startsWith(token) || (at == 0 && rest.startsWith(token.strip())), "token " + i + " '" + token + "' at " + at
          + " of '" + text + "': " + offsets);
    }
  }
}
