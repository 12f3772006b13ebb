package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.xlaactors.lm.sampling.SamplingParams;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The OpenAI request bodies parsed and checked: every field the API defines either taken (with its type
 * and range checked) or refused naming it; null counts as absent; the errors carry the status, type and
 * param the clients read.
 */
class OpenAiRequestTest {
  private static JsonNode json(String s) {
    return TensorJson.parseObject(s.getBytes(StandardCharsets.UTF_8));
  }

  private static OpenAiError refused(Runnable r) {
    return assertThrows(OpenAiError.class, r::run);
  }

  @Test
  void aCompletionTakesEveryPromptFormAndTheSamplingFields() {
    OpenAiRequest.Completion c = OpenAiRequest.completion(json("""
        {"model":"m","prompt":["a","b"],"max_tokens":5,"temperature":0.5,"top_p":0.9,"top_k":-1,"min_p":0.1,"seed":7,
         "stop":"\\n","n":2,"logprobs":3,"echo":true,"stream":true,"stream_options":{"include_usage":true},"user":"u",
         "suffix":null}"""));
    assertEquals("m", c.model());
    assertEquals(List.of("a", "b"), c.prompts().stream().map(OpenAiRequest.Prompt::text).toList());
    assertEquals(5, c.sampling().maxTokens());
    assertEquals(0, c.sampling().topK()); // vLLM's -1: no cut
    assertEquals(List.of("\n"), c.sampling().stop());
    assertEquals(2, c.sampling().n());
    assertEquals(3, c.logprobs());
    assertTrue(c.echo());
    assertEquals(new OpenAiRequest.Streaming(true, true, false), c.streaming());
    assertEquals(OpenAiRequest.Extensions.NONE, c.extensions());

    SamplingParams p = c.sampling().over(SamplingParams.defaults().withStopTokenIds(Set.of(9)), 5, 3, 1);
    assertEquals(0.5, p.temperature());
    assertEquals(0.9, p.topP());
    assertEquals(0.1, p.minP());
    assertEquals(8L, p.seed()); // choice 1 of seed 7: the choices differ, and replay
    assertEquals(Set.of(9), p.stopTokenIds()); // the model's end-of-sequence ids stay
    assertEquals(List.of("\n"), p.stopStrings());
    assertEquals(3, p.logprobs());

    assertArrayEquals(new int[] {1, 2, 3}, OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":[1,2,3]}")).prompts().get(0).tokens());
    List<OpenAiRequest.Prompt> lists = OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":[[1],[2,3]]}")).prompts();
    assertArrayEquals(new int[] {2, 3}, lists.get(1).tokens());
    assertNull(OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":\"x\"}")).logprobs());
  }

  @Test
  void vllmsExtensionsAreTakenAsGuidellmAndLmEvalSendThem() {
    // guidellm 0.8.1's body: ignore_eos and continuous usage stats (both were 400 before).
    OpenAiRequest.Completion g = OpenAiRequest.completion(json("""
        {"model":"m","prompt":"x","max_tokens":8,"ignore_eos":true,"stream":true,
         "stream_options":{"include_usage":true,"continuous_usage_stats":true}}"""));
    assertEquals(new OpenAiRequest.Streaming(true, true, true), g.streaming());
    assertTrue(g.extensions().ignoreEos());
    SamplingParams p = g.extensions().apply(g.sampling().over(SamplingParams.defaults().withStopTokenIds(Set.of(9)), 8, 0, 0));
    assertEquals(Set.of(), p.stopTokenIds()); // the end-of-sequence token no longer stops it
    assertEquals(Set.of(9), OpenAiRequest.Extensions.NONE.apply(SamplingParams.defaults().withStopTokenIds(Set.of(9))).stopTokenIds());

    OpenAiRequest.Chat c = OpenAiRequest.chat(json("""
        {"model":"m","messages":[{"role":"user","content":"x"}],"add_special_tokens":true,"skip_special_tokens":false,
         "include_stop_str_in_output":true}"""));
    assertEquals(new OpenAiRequest.Extensions(false, true, false, true), c.extensions());
    assertEquals("skip_special_tokens", refused(() -> OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":\"x\","
        + "\"skip_special_tokens\":1}"))).param());
    assertEquals("stream_options.include_obfuscation", refused(() -> OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":\"x\","
        + "\"stream\":true,\"stream_options\":{\"include_obfuscation\":true}}"))).param());
    // max_tokens near 2^31 is taken here (the model's context refuses it later, in long arithmetic).
    assertEquals(Integer.MAX_VALUE, OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":2147483647}"))
        .sampling().maxTokens());
  }

  @Test
  void lineBreaksPythonSplitsOnAreEscapedInServerSentEvents() {
    assertEquals("{\"t\":\"a\\u0085b\\u2028c\\u2029\"}", OpenAiResponses.sseSafe("{\"t\":\"a\u0085b\u2028c\u2029\"}"));
    String plain = "{\"t\":\"é\"}";
    assertTrue(plain == OpenAiResponses.sseSafe(plain)); // nothing to escape: the same string, no copy
  }

  @Test
  void unsupportedAndUnknownFieldsAreRefusedNamingThem() {
    OpenAiError tools = refused(() -> OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":\"hi\",\"tools\":[]}")));
    assertEquals(400, tools.status());
    assertEquals("tools", tools.param());
    assertEquals("invalid_request_error", tools.type());
    assertTrue(tools.getMessage().contains("'tools' is not supported"), tools.getMessage());
    OpenAiError functions = refused(() -> OpenAiRequest.chat(json("{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
        + "\"content\":\"hi\"}],\"functions\":[{\"name\":\"f\"}]}")));
    assertEquals("functions", functions.param());
    assertTrue(functions.getMessage().contains("\"tools\""), "names the replacement: " + functions.getMessage());

    OpenAiError suffix = refused(() -> OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":\"x\",\"suffix\":\"y\"}")));
    assertEquals("suffix", suffix.param());

    OpenAiError unknown = refused(() -> OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":\"x\",\"temprature\":1}")));
    assertEquals("temprature", unknown.param());
    assertEquals("unknown_parameter", unknown.code());

    OpenAiError part = refused(() -> OpenAiRequest.chat(json("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
        + "[{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]}")));
    assertEquals("messages[0].content[0]", part.param());
    OpenAiError toolCalls = refused(() -> OpenAiRequest.chat(json("{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
        + "\"content\":\"\",\"tool_calls\":[]}]}")));
    assertEquals("messages[0].tool_calls", toolCalls.param());
  }

  private static final String TOOLS = "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"w\","
      + "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}},"
      + "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]";

  private static OpenAiRequest.Chat chat(String fields) {
    return OpenAiRequest.chat(json("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]," + fields + "}"));
  }

  @Test
  void toolsToolChoiceAndToolMessagesAreReadAndCheckedNamingTheField() {
    OpenAiRequest.Tools auto = chat(TOOLS).tools();
    assertEquals(List.of("get_weather", "now"), auto.functions().stream().map(OpenAiRequest.Tool::name).toList());
    assertEquals("auto", auto.choice()); // OpenAI's default with tools
    assertEquals("city", auto.functions().get(0).parameters().at("/required/0").asText());
    assertNull(auto.functions().get(1).parameters());
    assertEquals("required", chat(TOOLS + ",\"tool_choice\":\"required\"").tools().choice());
    assertFalse(chat(TOOLS + ",\"tool_choice\":\"none\"").tools().mayCall());
    OpenAiRequest.Tools named = chat(TOOLS + ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"now\"}}").tools();
    assertEquals("function", named.choice());
    assertEquals("now", named.function());
    assertNull(chat("\"tool_choice\":\"none\"").tools());

    assertEquals("tool_choice", refused(() -> chat(TOOLS + ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"x\"}}"))
        .param());
    assertEquals("tool_choice", refused(() -> chat(TOOLS + ",\"tool_choice\":\"any\"")).param());
    assertEquals("tool_choice", refused(() -> chat("\"tool_choice\":\"required\"")).param());
    assertEquals("tools[0].function.name", refused(() -> chat("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]"))
        .param());
    assertEquals("tools[1].function.name", refused(() -> chat("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\"}},"
        + "{\"type\":\"function\",\"function\":{\"name\":\"a\"}}]")).param());
    assertEquals("tools[0]", refused(() -> chat("\"tools\":[{\"type\":\"code_interpreter\"}]")).param());
    assertEquals("tools[0].function.parameters", refused(() -> chat("\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\","
        + "\"parameters\":[]}}]")).param());

    OpenAiRequest.Chat turn = OpenAiRequest.chat(json("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
        + "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":"
        + "{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},"
        + "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"sunny\"}]," + TOOLS + "}"));
    assertEquals(new OpenAiRequest.Message("assistant", null, List.of(new OpenAiRequest.ToolCall("call_1", "get_weather",
        "{\"city\":\"Paris\"}")), null), turn.messages().get(1));
    assertEquals(new OpenAiRequest.Message("tool", "sunny", List.of(), "call_1"), turn.messages().get(2));

    assertEquals("messages[0].tool_call_id", refused(() -> OpenAiRequest.chat(json("{\"model\":\"m\",\"messages\":[{\"role\":\"tool\","
        + "\"content\":\"x\"}]}"))).param());
    assertEquals("messages[0].role", refused(() -> OpenAiRequest.chat(json("{\"model\":\"m\",\"messages\":[{\"role\":\"function\","
        + "\"name\":\"f\",\"content\":\"x\"}]}"))).param());
    assertEquals("messages[0].name", refused(() -> OpenAiRequest.chat(json("{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
        + "\"content\":\"x\",\"name\":{}}]}"))).param());
    assertEquals("{not json", OpenAiRequest.chat(json("{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\",\"tool_calls\":"
        + "[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{not json\"}}]}]}")).messages().get(0)
        .toolCalls().get(0).arguments(), "a call cut short, sent back: taken as text");
  }

  @Test
  void logitsProcessorFieldsAndResponseFormatsAreRead() {
    OpenAiRequest.Sampling s = OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":\"x\",\"logit_bias\":{\"7\":-100,\"3\":2.5},"
        + "\"presence_penalty\":0.5,\"frequency_penalty\":-1,\"min_tokens\":2,\"max_tokens\":4}")).sampling();
    assertEquals(java.util.Map.of(7, -100f, 3, 2.5f), s.logitBias());
    dev.xlaactors.lm.sampling.SamplingParams p = s.over(dev.xlaactors.lm.sampling.SamplingParams.defaults()
        .withStopTokenIds(java.util.Set.of(0)), 4, 0, 0);
    assertEquals(List.of(new dev.xlaactors.lm.sampling.LogitBias(java.util.Map.of(7, -100f, 3, 2.5f)),
        new dev.xlaactors.lm.sampling.OccurrencePenalty(0.5, -1), new dev.xlaactors.lm.sampling.MinTokens(2)),
        p.processors());
    assertEquals(List.of(), OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":\"x\"}")).sampling()
        .over(dev.xlaactors.lm.sampling.SamplingParams.defaults(), 4, 0, 0).processors(), "no field, no processor");

    String chat = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],";
    assertNull(OpenAiRequest.chat(json(chat + "\"response_format\":{\"type\":\"text\"}}")).responseFormat());
    assertEquals(new OpenAiRequest.ResponseFormat(null, null),
        OpenAiRequest.chat(json(chat + "\"response_format\":{\"type\":\"json_object\"}}")).responseFormat());
    assertEquals(new OpenAiRequest.ResponseFormat("{\"type\":\"integer\"}", "n"), OpenAiRequest.chat(json(chat
        + "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"strict\":true,\"schema\":{\"type\":\"integer\"}}}}"))
        .responseFormat());

    assertEquals("logit_bias", refused(() -> OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":\"x\",\"logit_bias\":{\"1\":101}}")))
        .param());
    assertEquals("presence_penalty", refused(() -> OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":\"x\","
        + "\"presence_penalty\":2.5}"))).param());
    OpenAiError min = refused(() -> OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":\"x\",\"min_tokens\":5,\"max_tokens\":4}")));
    assertEquals("min_tokens", min.param());
    assertTrue(min.getMessage().contains("above max_tokens 4"), min.getMessage());
    OpenAiError schemaless = refused(() -> OpenAiRequest.chat(json(chat + "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\"}}}")));
    assertEquals("response_format", schemaless.param());
    assertTrue(schemaless.getMessage().contains("json_schema.schema is required"), schemaless.getMessage());
    assertEquals("response_format", refused(() -> OpenAiRequest.chat(json(chat + "\"response_format\":{\"type\":\"yaml\"}}"))).param());
    // json_schema is checked whatever the type, as the document states its shape (schemathesis sent an unknown field with text).
    OpenAiError unknown = refused(() -> OpenAiRequest.chat(json(chat + "\"response_format\":{\"type\":\"text\",\"json_schema\":"
        + "{\"schema\":{},\"x\":42}}}")));
    assertTrue(unknown.getMessage().contains("unknown field json_schema.x"), unknown.getMessage());
    OpenAiError name = refused(() -> OpenAiRequest.chat(json(chat + "\"response_format\":{\"type\":\"json_object\",\"json_schema\":"
        + "{\"schema\":{},\"name\":5}}}")));
    assertTrue(name.getMessage().contains("json_schema.name is a string"), name.getMessage());
    assertNull(OpenAiRequest.chat(json(chat + "\"response_format\":{\"type\":\"text\",\"json_schema\":{\"schema\":{}}}}")).responseFormat());
  }

  @Test
  void valuesOutOfRangeAreRefusedSayingWhatWasExpected() {
    assertEquals("temperature", refused(() -> OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":\"x\",\"temperature\":3}"))).param());
    assertEquals("max_tokens", refused(() -> OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":0}"))).param());
    assertEquals("n", refused(() -> OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":\"x\",\"n\":17}"))).param());
    assertEquals("logprobs", refused(() -> OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":\"x\",\"logprobs\":21}"))).param());
    assertEquals("stop", refused(() -> OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":\"x\",\"stop\":[\"\"]}"))).param());
    assertEquals("prompt", refused(() -> OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":[]}"))).param());
    assertEquals("prompt[0]", refused(() -> OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":[-1]}"))).param());
    assertEquals("model", refused(() -> OpenAiRequest.completion(json("{\"prompt\":\"x\"}"))).param());
    assertEquals("stream_options", refused(() -> OpenAiRequest.completion(json("{\"model\":\"m\",\"prompt\":\"x\","
        + "\"stream_options\":{\"include_usage\":true}}"))).param());
    assertEquals("top_logprobs", refused(() -> OpenAiRequest.chat(json("{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
        + "\"content\":\"x\"}],\"top_logprobs\":2}"))).param());
    assertEquals("messages[0].role", refused(() -> OpenAiRequest.chat(json("{\"model\":\"m\",\"messages\":[{\"role\":\"robot\","
        + "\"content\":\"x\"}]}"))).param());
    assertEquals("max_completion_tokens", refused(() -> OpenAiRequest.chat(json("{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
        + "\"content\":\"x\"}],\"max_tokens\":1,\"max_completion_tokens\":1}"))).param());
    assertEquals("encoding_format", refused(() -> OpenAiRequest.embeddings(json("{\"model\":\"m\",\"input\":\"x\","
        + "\"encoding_format\":\"int8\"}"))).param());
  }

  @Test
  void chatTakesTextPartsAndLogprobsAndMaxCompletionTokens() {
    OpenAiRequest.Chat c = OpenAiRequest.chat(json("""
        {"model":"m","messages":[{"role":"system","content":"be brief"},
         {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"name":"x"}],
         "max_completion_tokens":4,"logprobs":true,"top_logprobs":2}"""));
    assertEquals(List.of(new OpenAiRequest.Message("system", "be brief"), new OpenAiRequest.Message("user", "a\nb")), c.messages());
    assertEquals(4, c.sampling().maxTokens());
    assertTrue(c.logprobs());
    assertEquals(2, c.topLogprobs());
    assertFalse(c.streaming().stream());
  }

  @Test
  void embeddingsTakeTextsOrIdsAndBase64() {
    OpenAiRequest.Embeddings e = OpenAiRequest.embeddings(json("{\"model\":\"e\",\"input\":[\"a\",\"b\"],\"encoding_format\":\"base64\"}"));
    assertEquals(2, e.inputs().size());
    assertTrue(e.base64());
    assertArrayEquals(new int[] {5, 6}, OpenAiRequest.embeddings(json("{\"model\":\"e\",\"input\":[5,6]}")).inputs().get(0).tokens());
  }

  @Test
  void errorsHaveOpenAisBody() throws Exception {
    OpenAiError e = OpenAiError.invalid("n", "bad n");
    JsonNode body = TensorJson.MAPPER.readTree(e.body()).get("error");
    assertEquals("bad n", body.get("message").asText());
    assertEquals("invalid_request_error", body.get("type").asText());
    assertEquals("n", body.get("param").asText());
    assertTrue(body.get("code").isNull());
  }
}
