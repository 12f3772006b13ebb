package dev.xlaactors.http;

import com.fasterxml.jackson.core.JsonGenerator;
import dev.xlaactors.lm.TextGenerator;
import dev.xlaactors.lm.sampling.Sample;
import dev.xlaactors.lm.sampling.TopLogprob;
import dev.xlaactors.lm.text.IncrementalDetokenizer;
import dev.xlaactors.lm.text.Tokenizer;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.pekko.util.ByteString;

/**
 * The JSON the OpenAI API answers with, written as its clients parse it: completions
 * ({@code text_completion}), chat completions ({@code chat.completion}), their stream chunks
 * ({@code text_completion} and {@code chat.completion.chunk}, each an unnamed server-sent event
 * {@code data: {json}}), the usage chunk ({@code choices: []}), {@code data: [DONE]}, and log-probabilities
 * in each API's form. One instance per response: its id, creation time, model and kind.
 */
final class OpenAiResponses {
  /** The event that ends every stream. */
  static final ByteString DONE = ByteString.fromString("data: [DONE]\n\n");
  /** A server-sent event comment, written when a stream has been silent for xla-actors.http.sse-keep-alive; clients skip it. */
  static final ByteString KEEP_ALIVE = ByteString.fromString(": keep-alive\n\n");

  /** Which API a response answers. */
  enum Api {
    COMPLETIONS("cmpl-", "text_completion", "text_completion"),
    CHAT("chatcmpl-", "chat.completion", "chat.completion.chunk");

    final String idPrefix;
    final String object;
    final String chunkObject;

    Api(String idPrefix, String object, String chunkObject) {
      this.idPrefix = idPrefix;
      this.object = object;
      this.chunkObject = chunkObject;
    }
  }

  /**
   * One finished choice: its index among the response's choices, its generation, the prompt text it
   * repeats first ({@code echo}; null: none) and that prompt's log-probabilities (null: not reported).
   */
  record Choice(int index, TextGenerator.Result result, String echo, PromptLogprobs prompt) {}

  /** Token counts of a response. */
  record Usage(int promptTokens, int completionTokens) {}

  private final Api api;
  private final String id;
  private final long created;
  private final String model;
  private final Tokenizer tokenizer;
  private final Integer logprobs; // null: none reported; else how many alternatives
  private final boolean usageOnChunks;
  private boolean toolCalls;

  /** The writer of one response whose stream chunks carry no {@code "usage"}. */
  OpenAiResponses(Api api, String model, Tokenizer tokenizer, Integer logprobs) {
    this(api, model, tokenizer, logprobs, false);
  }

  /**
   * The writer of one response; {@code usageOnChunks}: every stream chunk carries {@code "usage"} (null,
   * or the counts so far when given), as OpenAI writes chunks when the client asked for usage.
   */
  OpenAiResponses(Api api, String model, Tokenizer tokenizer, Integer logprobs, boolean usageOnChunks) {
    this.api = api;
    this.id = api.idPrefix + java.util.UUID.randomUUID().toString().replace("-", "");
    this.created = System.currentTimeMillis() / 1000;
    this.model = model;
    this.tokenizer = tokenizer;
    this.logprobs = logprobs;
    this.usageOnChunks = usageOnChunks;
  }

  /** This chat response's answers follow {@link ToolCallFormat}: they are read back into tool calls or words. */
  OpenAiResponses withToolCalls() {
    this.toolCalls = true;
    return this;
  }

  /** Whether the answers follow {@link ToolCallFormat}. */
  boolean toolCalls() {
    return toolCalls;
  }

  /** A new call id, as OpenAI's ({@code call_} and 24 characters). */
  static String callId() {
    return "call_" + java.util.UUID.randomUUID().toString().replace("-", "").substring(0, 24);
  }

  /** Which API this response answers. */
  Api api() {
    return api;
  }

  /** Whether the client asked for log-probabilities. */
  boolean reportsLogprobs() {
    return logprobs != null;
  }

  // ------------------------------------------------------------------------------------------ whole responses

  /** The whole (not streamed) response of {@code choices}, in index order. */
  byte[] response(List<Choice> choices, Usage usage) {
    return TensorJson.object(g -> {
      head(g, api.object);
      g.writeArrayFieldStart("choices");
      for (Choice c : choices) {
        g.writeStartObject();
        g.writeNumberField("index", c.index());
        String text = (c.echo() == null ? "" : c.echo()) + c.result().text();
        String finish = finishReason(c.result().finishReason());
        if (api == Api.CHAT && toolCalls) {
          ToolCallFormat.Decoder answer = new ToolCallFormat.Decoder(callId());
          answer.feed(c.result().text());
          answer.finish();
          g.writeObjectFieldStart("message");
          g.writeStringField("role", "assistant");
          if (answer.isCall()) {
            g.writeNullField("content");
            g.writeArrayFieldStart("tool_calls");
            g.writeStartObject();
            g.writeStringField("id", answer.id());
            g.writeStringField("type", "function");
            g.writeObjectFieldStart("function");
            g.writeStringField("name", answer.name());
            g.writeStringField("arguments", answer.arguments());
            g.writeEndObject();
            g.writeEndObject();
            g.writeEndArray();
            finish = finishReason(c.result().finishReason(), answer.isWholeCall());
          } else {
            g.writeStringField("content", answer.content());
          }
          g.writeEndObject();
        } else if (api == Api.CHAT) {
          g.writeObjectFieldStart("message");
          g.writeStringField("role", "assistant");
          g.writeStringField("content", text);
          g.writeEndObject();
        } else {
          g.writeStringField("text", text);
        }
        int[] offsets = logprobs == null || api == Api.CHAT ? new int[0] : generatedOffsets(c, text.length());
        logprobs(g, c.prompt(), c.echo(), c.result().samples(), offsets);
        g.writeStringField("finish_reason", finish);
        g.writeEndObject();
      }
      g.writeEndArray();
      usage(g, usage);
    });
  }

  // ------------------------------------------------------------------------------------------ stream chunks

  /** A chat stream's first chunk of choice {@code index}: the assistant's role, no text yet; {@code usage} as {@link #chunk}'s. */
  ByteString roleChunk(int index, Usage usage) {
    return event(TensorJson.object(g -> {
      head(g, api.chunkObject);
      g.writeArrayFieldStart("choices");
      g.writeStartObject();
      g.writeNumberField("index", index);
      g.writeObjectFieldStart("delta");
      g.writeStringField("role", "assistant");
      g.writeStringField("content", "");
      g.writeEndObject();
      g.writeNullField("logprobs");
      g.writeNullField("finish_reason");
      g.writeEndObject();
      g.writeEndArray();
      chunkUsage(g, usage);
    }));
  }

  /**
   * The chunk of choice {@code index} carrying {@code text} and, when reported, the log-probabilities of
   * {@code sample} (null: none, as for text held back to the end); {@code finish} null while the choice goes on;
   * {@code usage} the counts so far (vLLM's {@code continuous_usage_stats}; null: none, written as null when
   * the client asked for usage).
   */
  ByteString chunk(int index, String text, Sample sample, int textOffset, TextGenerator.FinishReason finish, Usage usage) {
    return chunk(index, text, sample, textOffset, finish == null ? null : finishReason(finish), usage);
  }

  /** As the chunk above with the finish reason as written ({@code "tool_calls"} too). */
  ByteString chunk(int index, String text, Sample sample, int textOffset, String finish, Usage usage) {
    return event(TensorJson.object(g -> {
      head(g, api.chunkObject);
      g.writeArrayFieldStart("choices");
      g.writeStartObject();
      g.writeNumberField("index", index);
      if (api == Api.CHAT) {
        g.writeObjectFieldStart("delta");
        if (finish == null || !text.isEmpty()) {
          g.writeStringField("content", text);
        }
        g.writeEndObject();
      } else {
        g.writeStringField("text", text);
      }
      logprobs(g, null, null, sample == null ? List.of() : List.of(sample), new int[] {textOffset});
      if (finish == null) {
        g.writeNullField("finish_reason");
      } else {
        g.writeStringField("finish_reason", finish);
      }
      g.writeEndObject();
      g.writeEndArray();
      chunkUsage(g, usage);
    }));
  }

  /**
   * A chat stream's chunk of a tool call of choice {@code index} (its first call, index 0): the call's start
   * ({@code id} and {@code name} given, arguments "") or a delta of its arguments ({@code id} null), as OpenAI streams them.
   */
  ByteString toolCallChunk(int index, String id, String name, String arguments, Usage usage) {
    return event(TensorJson.object(g -> {
      head(g, api.chunkObject);
      g.writeArrayFieldStart("choices");
      g.writeStartObject();
      g.writeNumberField("index", index);
      g.writeObjectFieldStart("delta");
      g.writeArrayFieldStart("tool_calls");
      g.writeStartObject();
      g.writeNumberField("index", 0);
      if (id != null) {
        g.writeStringField("id", id);
        g.writeStringField("type", "function");
      }
      g.writeObjectFieldStart("function");
      if (name != null) {
        g.writeStringField("name", name);
      }
      g.writeStringField("arguments", arguments);
      g.writeEndObject();
      g.writeEndObject();
      g.writeEndArray();
      g.writeEndObject();
      g.writeNullField("logprobs");
      g.writeNullField("finish_reason");
      g.writeEndObject();
      g.writeEndArray();
      chunkUsage(g, usage);
    }));
  }

  /** A completion stream's first chunk of choice {@code index} when it echoes its prompt: the prompt's text and log-probabilities (null: none). */
  ByteString echoChunk(int index, String echo, PromptLogprobs prompt, Usage usage) {
    return event(TensorJson.object(g -> {
      head(g, api.chunkObject);
      g.writeArrayFieldStart("choices");
      g.writeStartObject();
      g.writeNumberField("index", index);
      g.writeStringField("text", echo);
      logprobs(g, prompt, echo, List.of(), new int[0]);
      g.writeNullField("finish_reason");
      g.writeEndObject();
      g.writeEndArray();
      chunkUsage(g, usage);
    }));
  }

  /** The last chunk before {@code [DONE]} when the client asked for usage: no choices, the counts. */
  ByteString usageChunk(Usage usage) {
    return event(TensorJson.object(g -> {
      head(g, api.chunkObject);
      g.writeArrayFieldStart("choices");
      g.writeEndArray();
      usage(g, usage);
    }));
  }

  /** An error inside a stream that already began (openai-python raises {@code APIError} on it). */
  static ByteString errorEvent(OpenAiError e) {
    return event(e.body());
  }

  private static ByteString event(byte[] json) {
    return ByteString.fromString("data: " + sseSafe(new String(json, StandardCharsets.UTF_8)) + "\n\n");
  }

  /**
   * {@code json} with U+0085 (NEL), U+2028 and U+2029 written as JSON escapes: JSON allows them raw in a
   * string, but they are line breaks to Python's {@code str.splitlines}, which httpx uses to cut a stream
   * into lines, so a raw one splits a {@code data:} line in two and the client fails to parse either half.
   * They can only occur inside JSON strings, where the escape means the same character.
   */
  static String sseSafe(String json) {
    for (int i = 0; i < json.length(); i++) {
      char c = json.charAt(i);
      if (c == '\u0085' || c == '\u2028' || c == '\u2029') {
        return json.replace("\u0085", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029");
      }
    }
    return json;
  }

  // ------------------------------------------------------------------------------------------ parts

  private void head(JsonGenerator g, String object) throws IOException {
    g.writeStringField("id", id);
    g.writeStringField("object", object);
    g.writeNumberField("created", created);
    g.writeStringField("model", model);
  }

  /** A stream chunk's {@code "usage"}: absent unless the client asked for usage, then null or the counts so far. */
  private void chunkUsage(JsonGenerator g, Usage usage) throws IOException {
    if (usage != null) {
      usage(g, usage);
    } else if (usageOnChunks) {
      g.writeNullField("usage");
    }
  }

  private static void usage(JsonGenerator g, Usage usage) throws IOException {
    g.writeObjectFieldStart("usage");
    g.writeNumberField("prompt_tokens", usage.promptTokens());
    g.writeNumberField("completion_tokens", usage.completionTokens());
    g.writeNumberField("total_tokens", usage.promptTokens() + usage.completionTokens());
    g.writeEndObject();
  }

  static String finishReason(TextGenerator.FinishReason reason) {
    return reason == TextGenerator.FinishReason.STOP ? "stop" : "length";
  }

  /** {@code "tool_calls"} for a call that ended whole ({@code call}: its arguments are all there), else as {@link #finishReason(TextGenerator.FinishReason)}. */
  static String finishReason(TextGenerator.FinishReason reason, boolean call) {
    return call && reason == TextGenerator.FinishReason.STOP ? "tool_calls" : finishReason(reason);
  }

  /**
   * {@code "logprobs"}: null unless asked for; completions' form {@code {tokens, token_logprobs,
   * top_logprobs, text_offset}} or chat's {@code {content: [{token, logprob, bytes, top_logprobs}]}}.
   * {@code text_offset} is over the text returned: the echoed prompt's ({@code echo}; its tokens' offsets
   * from {@link #promptOffsets}) then the generated tokens' ({@code offsets}, one per sample).
   */
  private void logprobs(JsonGenerator g, PromptLogprobs prompt, String echo, List<Sample> samples, int[] offsets) throws IOException {
    if (logprobs == null) {
      g.writeNullField("logprobs");
      return;
    }
    g.writeObjectFieldStart("logprobs");
    if (api == Api.CHAT) {
      g.writeArrayFieldStart("content");
      for (Sample s : samples) {
        g.writeStartObject();
        tokenLogprob(g, s.token(), s.logprob());
        g.writeArrayFieldStart("top_logprobs");
        for (TopLogprob t : s.top().subList(0, Math.min(logprobs, s.top().size()))) {
          g.writeStartObject();
          tokenLogprob(g, t.token(), t.logprob());
          g.writeEndObject();
        }
        g.writeEndArray();
        g.writeEndObject();
      }
      g.writeEndArray();
      g.writeEndObject();
      return;
    }
    // Completions: the echoed prompt's tokens first (the first without a log-probability: null), then the generated ones.
    int promptLength = prompt == null ? 0 : prompt.tokens().length;
    g.writeArrayFieldStart("tokens");
    for (int i = 0; i < promptLength; i++) {
      g.writeString(tokenString(prompt.tokens()[i]));
    }
    for (Sample s : samples) {
      g.writeString(tokenString(s.token()));
    }
    g.writeEndArray();
    g.writeArrayFieldStart("token_logprobs");
    for (int i = 0; i < promptLength; i++) {
      if (i == 0) {
        g.writeNull();
      } else {
        g.writeNumber(prompt.logprobs()[i]);
      }
    }
    for (Sample s : samples) {
      g.writeNumber(s.logprob());
    }
    g.writeEndArray();
    g.writeArrayFieldStart("top_logprobs");
    for (int i = 0; i < promptLength; i++) {
      if (i == 0) {
        g.writeNull();
      } else {
        topLogprobs(g, prompt.tokens()[i], prompt.logprobs()[i], prompt.top().get(i));
      }
    }
    for (Sample s : samples) {
      topLogprobs(g, s.token(), s.logprob(), s.top());
    }
    g.writeEndArray();
    g.writeArrayFieldStart("text_offset");
    if (promptLength > 0) {
      for (int offset : promptOffsets(prompt.tokens(), echo)) {
        g.writeNumber(offset);
      }
    }
    for (int i = 0; i < samples.size(); i++) {
      g.writeNumber(offsets[i]);
    }
    g.writeEndArray();
    g.writeEndObject();
  }

  /**
   * Where each prompt token's text starts in {@code echo}, the prompt's text as returned: the text the
   * incremental detokenizer makes of the tokens before it (a character split over tokens starts at its
   * first; a token that makes no text, at the next text). When {@code echo} is the client's own text its
   * special tokens (a BOS the tokenizer added) are not in it, so they are skipped; a prompt of token ids is
   * echoed as the tokenizer decodes it, special tokens included. Offsets never pass the echo's end.
   */
  private int[] promptOffsets(int[] tokens, String echo) {
    boolean skipSpecial = !echo.equals(tokenizer.decode(tokens));
    return offsets(tokens, new int[0], skipSpecial, 0, echo.length());
  }

  /** Where each generated token's text starts in the choice's returned text (after its echo), as {@link TextGenerator} made it. */
  private int[] generatedOffsets(Choice c, int textLength) {
    int[] tokens = new int[c.result().samples().size()];
    for (int i = 0; i < tokens.length; i++) {
      tokens[i] = c.result().samples().get(i).token();
    }
    int start = c.echo() == null ? 0 : c.echo().length();
    return offsets(tokens, c.result().promptTokens(), true, start, textLength);
  }

  /** The offsets of {@code tokens}' texts (after {@code context}) from {@code start}, capped at {@code end}. */
  private int[] offsets(int[] tokens, int[] context, boolean skipSpecial, int start, int end) {
    IncrementalDetokenizer detokenizer = IncrementalDetokenizer.create(tokenizer, context, skipSpecial);
    int[] out = new int[tokens.length];
    int at = start;
    for (int i = 0; i < tokens.length; i++) {
      out[i] = Math.min(at, end);
      at += detokenizer.next(tokens[i]).length();
    }
    return out;
  }

  /**
   * One position's {@code {text: logprob}}: the k most likely and the chosen token (as vLLM). Each token is
   * keyed by {@link #tokenString}, so tokens with different bytes never share a key (the parts of a
   * character are {@code bytes:\xNN} keys, not all U+FFFD); tokens whose bytes are the same (a byte piece
   * and a piece spelling the same character) are one entry, the more likely one's.
   */
  private void topLogprobs(JsonGenerator g, int token, float logprob, List<TopLogprob> top) throws IOException {
    Map<String, Float> entries = new LinkedHashMap<>();
    for (TopLogprob t : top.subList(0, Math.min(logprobs, top.size()))) {
      entries.putIfAbsent(tokenString(t.token()), t.logprob());
    }
    entries.putIfAbsent(tokenString(token), logprob);
    g.writeStartObject();
    for (Map.Entry<String, Float> e : entries.entrySet()) {
      g.writeNumberField(e.getKey(), e.getValue());
    }
    g.writeEndObject();
  }

  /** Chat's {@code {token, logprob, bytes}}: {@code bytes} are the token's own (part of a character too). */
  private void tokenLogprob(JsonGenerator g, int token, float logprob) throws IOException {
    g.writeStringField("token", tokenString(token));
    g.writeNumberField("logprob", logprob);
    g.writeArrayFieldStart("bytes");
    for (byte b : tokenizer.decodeBytes(new int[] {token})) {
      g.writeNumber(b & 0xFF);
    }
    g.writeEndArray();
  }

  /**
   * A token as log-probabilities show it: its own bytes as text when they are whole UTF-8 (a SentencePiece
   * piece with its space), else {@code bytes:} and each byte as {@code \xNN}, as OpenAI writes a token that
   * holds part of a character (decoded alone it would be U+FFFD, the same for every such token).
   */
  String tokenString(int token) {
    byte[] bytes = tokenizer.decodeBytes(new int[] {token});
    CharsetDecoder utf8 = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
        .onUnmappableCharacter(CodingErrorAction.REPORT);
    try {
      return utf8.decode(ByteBuffer.wrap(bytes)).toString();
    } catch (CharacterCodingException partial) {
      StringBuilder out = new StringBuilder("bytes:");
      for (byte b : bytes) {
        out.append(String.format(java.util.Locale.ROOT, "\\x%02x", b & 0xFF));
      }
      return out.toString();
    }
  }
}
