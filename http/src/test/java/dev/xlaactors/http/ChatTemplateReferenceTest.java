package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.xlaactors.lm.text.HuggingFaceTokenizer;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Clock;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * Our chat templates give the prompts the models were trained on: for the verbatim templates of several
 * model families (Qwen2.5, Qwen3, SmolLM3, Mistral Nemo, Phi-3.5, Gemma 2, Llama 3.1 and 3.2, fetched by
 * tools/chat-templates.sh when the build runs tests) and a Llama-2-style one, {@link ChatTemplate} plus the
 * tokenizer give exactly the token ids of transformers' {@code apply_chat_template(...,
 * add_generation_prompt=True)} (chat-templates/reference.json, made by tools/chat_template_reference.py with
 * small tokenizers made there): conversations with system prompts, several turns, "{{" and "{%" in the
 * content, non-ASCII, and for Qwen2.5's template {@code apply_chat_template(..., tools=...)} of a conversation with tools,
 * an assistant's calls and the tools' results (the definitions written by transformers' {@code tojson}). A conversation a
 * template refuses is refused here with the template's words.
 */
class ChatTemplateReferenceTest {
  private static final String RESOURCES = "/chat-templates/";

  @TestFactory
  Stream<DynamicTest> promptIdsEqualTransformersApplyChatTemplate() throws IOException {
    JsonNode reference = reference();
    Path templates = templatesDirectory();
    Clock clock = Clock.fixed(LocalDateTime.parse(reference.get("now").asText()).toInstant(ZoneOffset.UTC), ZoneOffset.UTC);
    List<DynamicTest> tests = new ArrayList<>();
    for (JsonNode family : reference.get("families")) {
      String name = family.get("family").asText();
      tests.add(DynamicTest.dynamicTest(name, () -> checkFamily(family, templates, reference.get("llama2_style_template").asText(), clock)));
    }
    return tests.stream();
  }

  private static void checkFamily(JsonNode family, Path templates, String llama2Style, Clock clock) throws Exception {
    String name = family.get("family").asText();
    String template = family.get("template").isNull() ? llama2Style
        : Files.readString(templates.resolve(family.get("template").asText() + ".jinja"), StandardCharsets.UTF_8);
    assertEquals(family.get("template_sha256").asText(), sha256(template), name + ": the template is not the one the reference was made with");
    Map<String, String> special = new LinkedHashMap<>();
    family.get("special_tokens").fields().forEachRemaining(e -> special.put(e.getKey(), e.getValue().asText()));
    ChatTemplate chat = new ChatTemplate(name, template, special, ChatTemplateSettings.DEFAULTS, clock);
    Path tokenizerJson = resource(name + "/tokenizer.json");
    try (HuggingFaceTokenizer tokenizer = HuggingFaceTokenizer.open(tokenizerJson)) {
      int c = 0;
      for (JsonNode conversation : family.get("conversations")) {
        List<OpenAiRequest.Message> messages = new ArrayList<>();
        for (JsonNode m : conversation.get("messages")) {
          messages.add(message(m));
        }
        List<OpenAiRequest.Tool> tools = new ArrayList<>();
        for (JsonNode t : conversation.path("tools")) { // as a request's tools[i] (the template gets them as sent)
          JsonNode f = t.get("function");
          tools.add(new OpenAiRequest.Tool(f.get("name").asText(), f.path("description").asText(null), f.get("parameters"), null, t));
        }
        String where = name + " conversation " + c++ + (tools.isEmpty() ? "" : " (with tools)");
        if (conversation.has("error")) {
          OpenAiError e = assertThrows(OpenAiError.class, () -> chat.render(messages, true, tools), where);
          assertTrue(e.getMessage().contains(conversation.get("error").asText()), where + ": " + e.getMessage());
          continue;
        }
        String text = chat.render(messages, true, tools);
        assertEquals(conversation.get("text").asText(), text, where + ": rendered text");
        int[] expected = new int[conversation.get("ids").size()];
        for (int i = 0; i < expected.length; i++) {
          expected[i] = conversation.get("ids").get(i).asInt();
        }
        assertArrayEquals(expected, tokenizer.encode(text, false), where + ": prompt ids");
      }
    }
  }

  /** A message of the reference as the request's parser makes it: an assistant's calls with their arguments as JSON text. */
  private static OpenAiRequest.Message message(JsonNode m) {
    List<OpenAiRequest.ToolCall> calls = new ArrayList<>();
    for (JsonNode call : m.path("tool_calls")) {
      calls.add(new OpenAiRequest.ToolCall(call.get("id").asText(), call.at("/function/name").asText(),
          call.at("/function/arguments").toString()));
    }
    JsonNode content = m.get("content");
    return new OpenAiRequest.Message(m.get("role").asText(), content.isNull() ? null : content.asText(), calls,
        m.path("tool_call_id").asText(null));
  }

  private static JsonNode reference() throws IOException {
    try (InputStream in = ChatTemplateReferenceTest.class.getResourceAsStream(RESOURCES + "reference.json")) {
      return new ObjectMapper().readTree(in);
    }
  }

  private static Path resource(String name) throws Exception {
    return Paths.get(ChatTemplateReferenceTest.class.getResource(RESOURCES + name).toURI());
  }

  /**
   * Where tools/chat-templates.sh put the templates (the build runs it before the tests, into
   * {@code XLA_ACTORS_CACHE}, else ~/.cache/xla-actors); the test is skipped, saying why, when they are not there.
   */
  private static Path templatesDirectory() {
    String cache = System.getenv("XLA_ACTORS_CACHE");
    Path dir = (cache != null ? Paths.get(cache) : Paths.get(System.getProperty("user.home"), ".cache", "xla-actors"))
        .resolve("chat-templates-llama-cpp-python-0.3.36");
    Assumptions.assumeTrue(Files.isRegularFile(dir.resolve(".complete")), "the verbatim chat templates are not in " + dir
        + " (tools/chat-templates.sh fetches them from PyPI when the http module's tests run; its warning in the build log says "
        + "why it could not): run tools/chat-templates.sh, then this test");
    return dir;
  }

  private static String sha256(String text) throws NoSuchAlgorithmException {
    return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8)));
  }
}
