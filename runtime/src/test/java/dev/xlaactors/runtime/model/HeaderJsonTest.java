package dev.xlaactors.runtime.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The strict JSON reader of safetensors headers: what it accepts, and that it refuses the rest. */
class HeaderJsonTest {
  @Test
  void readsEveryKindOfValueInDocumentOrder() throws Exception {
    Object parsed = HeaderJson.parse(" {\"z\": [1, -2.5e3, 0], \"a\": {\"t\": true, \"f\": false, \"n\": null},"
        + " \"s\": \"q\\\"b\\\\s\\/\\b\\f\\n\\r\\t\\u00e4\\ud83d\\ude00\"} ");
    Map<?, ?> root = (Map<?, ?>) parsed;
    assertEquals(List.of("z", "a", "s"), List.copyOf(root.keySet()), "document order");
    assertEquals(List.of(new HeaderJson.Number("1"), new HeaderJson.Number("-2.5e3"), new HeaderJson.Number("0")),
        root.get("z"));
    Map<?, ?> a = (Map<?, ?>) root.get("a");
    assertEquals(Boolean.TRUE, a.get("t"));
    assertEquals(Boolean.FALSE, a.get("f"));
    assertSame(HeaderJson.NULL, a.get("n"));
    assertEquals("q\"b\\s/\b\f\n\r\t\u00e4\ud83d\ude00", root.get("s"), "escapes, a surrogate pair joined");
    assertEquals(Map.of(), HeaderJson.parse("{}"));
    assertEquals(List.of(), HeaderJson.parse("[ ]"));
  }

  @Test
  void refusesWhatStrictJsonDoesNotAllow() {
    String[][] cases = {
      {"{\"a\": 1,}", "a string key"},
      {"[1, 2,]", "a value"},
      {"{'a': 1}", "a string key"},
      {"{\"a\" 1}", "':'"},
      {"{\"a\": 01}", "',' or '}'"},
      {"{\"a\": 1.}", "a digit after '.'"},
      {"{\"a\": 1e}", "a digit in the exponent"},
      {"{\"a\": -}", "a digit"},
      {"{\"a\": tru}", "a value"},
      {"{\"a\": \"x\ty\"}", "escaped control character"},
      {"{\"a\": \"\\x\"}", "an escape"},
      {"{\"a\": \"\\u12g4\"}", "four hex digits"},
      {"{\"a\": \"open", "closing '\"'"},
      {"{} {}", "end of the JSON"},
      {"", "a value"},
      {"{\"a\": 1, \"a\": 2}", "duplicate key 'a'"},
      {"[".repeat(100) + "]".repeat(100), "levels of nesting"},
    };
    for (String[] c : cases) {
      HeaderJson.Malformed e = assertThrows(HeaderJson.Malformed.class, () -> HeaderJson.parse(c[0]), c[0]);
      assertTrue(e.getMessage().contains(c[1]), c[0] + " -> " + e.getMessage());
    }
  }
}
