package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.lm.structured.ByteAutomaton;
import dev.xlaactors.lm.structured.JsonSchemaAutomaton;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The answer form of tool calls: the schema each tool_choice compiles to accepts exactly the calls (and, with auto, the
 * words) it should, and the decoder reads an answer fed in pieces of any size as it reads it whole.
 */
class ToolCallFormatTest {
  private static OpenAiRequest.Tools tools(String choice) {
    String body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":["
        + "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\",\"properties\":"
        + "{\"city\":{\"type\":\"string\"},\"unit\":{\"$ref\":\"#/$defs/Unit\"}},\"required\":[\"city\",\"unit\"],"
        + "\"$defs\":{\"Unit\":{\"enum\":[\"C\",\"F\"]}}}}},"
        + "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}],\"tool_choice\":" + choice + "}";
    return OpenAiRequest.chat(TensorJson.parseObject(body.getBytes(StandardCharsets.UTF_8))).tools();
  }

  private static final String WEATHER = "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"unit\":\"C\"}}";
  private static final String NOW = "{\"name\":\"now\",\"arguments\":{}}";
  private static final String WORDS = "{\"response\":\"Hi \\\"you\\\"\\n\\u00e9\\ud83c\\udf89\"}";

  @Test
  void eachToolChoiceAcceptsItsForms() {
    ByteAutomaton required = JsonSchemaAutomaton.compile(ToolCallFormat.schema(tools("\"required\""), null));
    assertTrue(required.matches(WEATHER));
    assertTrue(required.matches(NOW));
    assertFalse(required.matches(WORDS), "required: a call only");
    assertFalse(required.matches(WEATHER.replace("\"C\"", "\"K\"")), "arguments follow the tool's schema ($defs hoisted)");
    assertFalse(required.matches(WEATHER.replace(",\"unit\":\"C\"", "")), "required arguments");
    assertFalse(required.matches(WEATHER.replace("get_weather", "get_time")), "only the tools' names");

    ByteAutomaton named = JsonSchemaAutomaton.compile(ToolCallFormat.schema(tools("{\"type\":\"function\",\"function\":{\"name\":\"now\"}}"),
        null));
    assertTrue(named.matches(NOW));
    assertFalse(named.matches(WEATHER));

    ByteAutomaton auto = JsonSchemaAutomaton.compile(ToolCallFormat.schema(tools("\"auto\""), null));
    assertTrue(auto.matches(WEATHER));
    assertTrue(auto.matches(WORDS));
    ByteAutomaton autoFormat = JsonSchemaAutomaton.compile(ToolCallFormat.schema(tools("\"auto\""),
        new OpenAiRequest.ResponseFormat("{\"type\":\"object\",\"properties\":{\"age\":{\"type\":\"integer\"}},\"required\":[\"age\"]}", "p")));
    assertTrue(autoFormat.matches("{\"response\":{\"age\":41}}"));
    assertFalse(autoFormat.matches(WORDS), "the response follows the response format");
    assertTrue(autoFormat.matches(NOW));

    assertNull(ToolCallFormat.schema(tools("\"none\""), null), "none: no constraint");
  }

  @Test
  void aToolSchemaOutsideTheSubsetIsRefusedNamingTheToolAndKeyword() {
    String body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\":[{\"type\":\"function\",\"function\":"
        + "{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"pattern\":\"a+\"}}}}}]}";
    OpenAiRequest.Tools t = OpenAiRequest.chat(TensorJson.parseObject(body.getBytes(StandardCharsets.UTF_8))).tools();
    OpenAiError e = assertThrows(OpenAiError.class, () -> ToolCallFormat.schema(t, null));
    assertEquals("tools[0].function.parameters", e.param());
    assertTrue(e.getMessage().contains("tool 'f'") && e.getMessage().contains("'pattern'"), e.getMessage());
  }

  @Test
  void piecesOfAnySizeDecodeAsTheWhole() {
    for (String answer : List.of(WEATHER, NOW, WORDS, "{\"response\":{\"age\":41}}")) {
      ToolCallFormat.Decoder whole = new ToolCallFormat.Decoder("call_x");
      List<ToolCallFormat.Event> wholeEvents = new ArrayList<>(whole.feed(answer));
      wholeEvents.addAll(whole.finish());
      for (int size = 1; size <= 5; size++) {
        ToolCallFormat.Decoder pieces = new ToolCallFormat.Decoder("call_x");
        StringBuilder arguments = new StringBuilder();
        StringBuilder content = new StringBuilder();
        String name = null;
        List<ToolCallFormat.Event> events = new ArrayList<>();
        for (int i = 0; i < answer.length(); i += size) {
          events.addAll(pieces.feed(answer.substring(i, Math.min(answer.length(), i + size))));
        }
        events.addAll(pieces.finish());
        for (ToolCallFormat.Event e : events) {
          if (e instanceof ToolCallFormat.CallStart s) {
            assertNull(name, "one start");
            name = s.name();
          } else if (e instanceof ToolCallFormat.ArgumentsDelta a) {
            arguments.append(a.text());
          } else if (e instanceof ToolCallFormat.ContentDelta c) {
            content.append(c.text());
          }
        }
        assertEquals(whole.name(), name, answer);
        assertEquals(whole.arguments(), arguments.toString(), answer);
        assertEquals(whole.content(), content.toString(), answer);
      }
    }
    ToolCallFormat.Decoder weather = new ToolCallFormat.Decoder("call_x");
    weather.feed(WEATHER);
    weather.finish();
    assertEquals("get_weather", weather.name());
    assertEquals("{\"city\":\"Paris\",\"unit\":\"C\"}", weather.arguments());
    assertTrue(weather.isWholeCall());
    ToolCallFormat.Decoder stopped = new ToolCallFormat.Decoder("call_x"); // a stop string cut it
    stopped.feed(WEATHER.substring(0, WEATHER.indexOf("Paris")));
    stopped.finish();
    assertEquals("get_weather", stopped.name());
    assertFalse(stopped.isWholeCall(), "cut short: finish_reason is not tool_calls");
    ToolCallFormat.Decoder words = new ToolCallFormat.Decoder("call_x");
    words.feed(WORDS);
    words.finish();
    assertFalse(words.isCall());
    assertEquals("Hi \"you\"\n\u00e9\ud83c\udf89", words.content());
    ToolCallFormat.Decoder cut = new ToolCallFormat.Decoder("call_x");
    cut.feed("{\"na");
    cut.finish();
    assertEquals("{\"na", cut.content(), "cut short before either form: the text as it is");
  }

  @Test
  void pythonsJsonDumpsIsWhatTojsonWrites() {
    java.util.Map<String, Object> m = new java.util.LinkedHashMap<>();
    m.put("a", List.of(1, 2.5, 3.0, true));
    m.put("é\n", null);
    assertEquals("{\"a\": [1, 2.5, 3.0, true], \"é\\n\": null}", PythonJsonFilter.dumps(m, null, false));
    assertEquals("{\n  \"a\": [\n    1,\n    2.5,\n    3.0,\n    true\n  ],\n  \"é\\n\": null\n}", PythonJsonFilter.dumps(m, 2, false));
    assertEquals("1e+20", PythonJsonFilter.dumps(1e20, null, false));
  }
}
