package dev.xlaactors.http;

import com.fasterxml.jackson.core.JsonGenerator;
import dev.xlaactors.lm.TextGenerator;
import dev.xlaactors.lm.sampling.Sample;
import dev.xlaactors.lm.sampling.TopLogprob;
import dev.xlaactors.lm.text.Tokenizer;
import java.io.IOException;
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
        if (api == Api.CHAT) {
          g.writeObjectFieldStart("message");
          g.writeStringField("role", "assistant");
          g.writeStringField("content", text);
          g.writeEndObject();
        } else {
          g.writeStringField("text", text);
        }
        logprobs(g, c.prompt(), c.result().samples(), c.echo() == null ? 0 : c.echo().length());
        g.writeStringField("finish_reason", finishReason(c.result().finishReason()));
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
      logprobs(g, null, sample == null ? List.of() : List.of(sample), textOffset);
      if (finish == null) {
        g.writeNullField("finish_reason");
      } else {
        g.writeStringField("finish_reason", finishReason(finish));
      }
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
      logprobs(g, prompt, List.of(), echo.length());
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

  /**
   * {@code "logprobs"}: null unless asked for; completions' form {@code {tokens, token_logprobs,
   * top_logprobs, text_offset}} (offsets from {@code textOffset}) or chat's {@code {content: [{token,
   * logprob, bytes, top_logprobs}]}}.
   */
  private void logprobs(JsonGenerator g, PromptLogprobs prompt, List<Sample> samples, int textOffset) throws IOException {
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
      g.writeString(tokenText(prompt.tokens()[i]));
    }
    for (Sample s : samples) {
      g.writeString(tokenText(s.token()));
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
    int offset = 0;
    for (int i = 0; i < promptLength; i++) {
      g.writeNumber(offset);
      offset += tokenText(prompt.tokens()[i]).length();
    }
    offset = textOffset;
    for (Sample s : samples) {
      g.writeNumber(offset);
      offset += tokenText(s.token()).length();
    }
    g.writeEndArray();
    g.writeEndObject();
  }

  /** One position's {@code {text: logprob}}: the k most likely and the chosen token (as vLLM), one entry per distinct text. */
  private void topLogprobs(JsonGenerator g, int token, float logprob, List<TopLogprob> top) throws IOException {
    Map<String, Float> entries = new LinkedHashMap<>();
    for (TopLogprob t : top.subList(0, Math.min(logprobs, top.size()))) {
      entries.putIfAbsent(tokenText(t.token()), t.logprob());
    }
    entries.putIfAbsent(tokenText(token), logprob);
    g.writeStartObject();
    for (Map.Entry<String, Float> e : entries.entrySet()) {
      g.writeNumberField(e.getKey(), e.getValue());
    }
    g.writeEndObject();
  }

  private void tokenLogprob(JsonGenerator g, int token, float logprob) throws IOException {
    String text = tokenText(token);
    g.writeStringField("token", text);
    g.writeNumberField("logprob", logprob);
    g.writeArrayFieldStart("bytes");
    for (byte b : text.getBytes(StandardCharsets.UTF_8)) {
      g.writeNumber(b & 0xFF);
    }
    g.writeEndArray();
  }

  /** The text of one token alone (a token holding part of a character shows U+FFFD for it). */
  private String tokenText(int token) {
    return tokenizer.decode(new int[] {token});
  }
}
