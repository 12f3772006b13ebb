package dev.xlaactors.lm.structured;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.networknt.schema.Schema;
import com.networknt.schema.SchemaRegistry;
import com.networknt.schema.SpecificationVersion;
import dev.xlaactors.lm.sampling.Sampler;
import dev.xlaactors.lm.sampling.SamplingParams;
import dev.xlaactors.lm.sampling.SequenceState;
import dev.xlaactors.lm.text.TiktokenTokenizer;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * JSON schemas compiled to automata and applied through the sampler to a stand-in for a random model
 * (seeded Gaussian logits, a fresh draw each step) over GPT-2's real tokens (tiktoken's r50k_base: its
 * first {@value #SUBSET} ids, the 256 bytes and the earliest merges, to keep CI's share small, plus its end
 * of text): every output of every seed parses, is valid for its schema by networknt's validator, and ends
 * with the end of text within its token budget. The whole 50,257-token vocabulary is read as the grammar
 * reads it; the 1,000-sample run with the real vocabulary and a real checkpoint is
 * {@code bench/run.sh structured}.
 */
class JsonSchemaOutputTest {
  /** Seeds per schema here; bench/run.sh structured draws 1,000. */
  private static final int SAMPLES = 8;
  /** GPT-2's ids kept (the end of text becomes id {@value #SUBSET}). */
  private static final int SUBSET = 4096;
  private static final int END = SUBSET;
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final SchemaRegistry VALIDATORS = SchemaRegistry.withDefaultDialect(SpecificationVersion.DRAFT_2020_12);

  static final List<String> SCHEMAS = List.of(
      """
      {"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"score":{"type":"number"},
       "admin":{"type":"boolean"}},"required":["name","age","score","admin"],"additionalProperties":false}""",
      """
      {"type":"object","properties":{"colour":{"enum":["red","green","blue"]},"tags":{"type":"array","items":{"type":"string"},
       "maxItems":3},"note":{"type":["string","null"]}},"required":["colour","tags"]}""",
      """
      {"$defs":{"Point":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]}},
       "type":"object","properties":{"path":{"type":"array","items":{"$ref":"#/$defs/Point"},"minItems":1,"maxItems":4},
       "shape":{"anyOf":[{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"integer"}},"required":["kind","r"]},
       {"type":"object","properties":{"kind":{"const":"box"},"w":{"type":"integer"}},"required":["kind","w"]}]}},
       "required":["path","shape"]}""",
      """
      {"type":"object"}""");

  private static final float[] POOL = new float[1 << 18];
  private static TiktokenTokenizer tokenizer;
  private static TokenVocabulary vocabulary;

  @BeforeAll
  static void vocabulary() {
    tokenizer = TiktokenTokenizer.of("r50k_base");
    byte[][] bytes = new byte[SUBSET + 1][];
    for (int id = 0; id < SUBSET; id++) {
      bytes[id] = tokenizer.decodeBytes(new int[] {id});
    }
    vocabulary = TokenVocabulary.of(bytes); // bytes[SUBSET] null: the end of text is no text
    SplittableRandom r = new SplittableRandom(7);
    for (int i = 0; i < POOL.length; i++) {
      POOL[i] = (float) (gaussian(r) * 4);
    }
  }

  @AfterAll
  static void close() {
    tokenizer.close();
  }

  @Test
  void everySeedsOutputIsValidForItsSchema() throws Exception {
    Sampler sampler = new Sampler();
    for (String schemaText : SCHEMAS) {
      Schema validator = VALIDATORS.getSchema(schemaText);
      TokenGrammar grammar = TokenGrammar.cached(schemaText, vocabulary, () -> JsonSchemaAutomaton.compile(schemaText));
      for (int seed = 0; seed < SAMPLES; seed++) {
        SamplingParams params = SamplingParams.defaults().withSeed((long) seed).withMaxTokens(100)
            .withProcessor(new GrammarProcessor(grammar, Set.of(END)));
        SequenceState state = SequenceState.create(params, new int[] {464});
        SplittableRandom model = new SplittableRandom(1000 + seed);
        int vocab = vocabulary.size();
        float[] logits = new float[vocabulary.size()];
        ByteArrayOutputStream text = new ByteArrayOutputStream();
        boolean ended = false;
        for (int step = 0; step < params.maxTokens() && !ended; step++) {
          // A confident random model (logits N(0, 4^2), a fresh window of the pool each step): the constraint, not luck, decides.
          int from = model.nextInt(POOL.length - vocab);
          System.arraycopy(POOL, from, logits, 0, vocab);
          int token = sampler.sample(logits, params, state).token();
          if (token == END) {
            ended = true;
          } else {
            text.writeBytes(vocabulary.bytes(token));
          }
        }
        String out = text.toString(StandardCharsets.UTF_8);
        assertTrue(ended, "seed " + seed + " did not end within its budget: " + out);
        JsonNode parsed = JSON.readTree(out);
        assertEquals(List.of(), validator.validate(parsed), "seed " + seed + " of " + schemaText + ": " + out);
      }
    }
  }

  @Test
  void gpt2sWholeVocabularyIsReadAsItsBytes() {
    TokenVocabulary whole = TokenVocabulary.of(tokenizer);
    assertEquals(50257, whole.size());
    // All but <|endoftext|> and the 8 tokens whose bytes spell U+FFFD itself (dropped: indistinguishable from a partial character).
    assertEquals(50248, whole.usableCount());
    assertEquals(null, whole.bytes(50256));
    assertEquals(" the", new String(whole.bytes(262), StandardCharsets.UTF_8));
    assertEquals(1, whole.bytes(0xA4 - 0xA1 + 0x5E).length, "a lone byte token stays one byte");
    TokenGrammar grammar = new TokenGrammar(JsonSchemaAutomaton.compile(SCHEMAS.get(0)), whole);
    int start = grammar.automaton().start();
    assertEquals(List.of(90), java.util.Arrays.stream(grammar.tokens(start).tokens()).boxed().filter(t -> t == 90).toList(),
        "'{' (id 90) opens the object");
    for (int t : grammar.tokens(start).tokens()) {
      assertEquals('{', whole.bytes(t)[0], "every allowed first token starts with '{': " + t);
    }
  }

  @Test
  void theAutomatonAcceptsExactlyTheCompactJsonOfTheSchema() {
    ByteAutomaton a = JsonSchemaAutomaton.compile(SCHEMAS.get(0));
    assertTrue(a.matches("{\"name\":\"Ann \\\"A\\\" \u00e9\u4e2d\uD83D\uDE00\",\"age\":-3,\"score\":1.5e-7,\"admin\":true}"));
    assertFalse(a.matches("{\"name\":\"Ann\",\"age\":3.5,\"score\":1,\"admin\":true}"), "an integer with a fraction");
    assertFalse(a.matches("{\"name\":\"Ann\",\"age\":3,\"score\":1}"), "a required property missing");
    assertFalse(a.matches("{\"name\":\"A\nB\",\"age\":3,\"score\":1,\"admin\":true}"), "a raw newline in a string");
    assertFalse(a.matches("{\"name\":\"A\",\"age\":03,\"score\":1,\"admin\":true}"), "a leading zero");
    assertFalse(a.matches(new byte[] {'{', '"', 'n', 'a', 'm', 'e', '"', ':', '"', (byte) 0xC0, (byte) 0x80, '"'}), "overlong UTF-8");
    ByteAutomaton optional = JsonSchemaAutomaton.compile(SCHEMAS.get(1));
    assertTrue(optional.matches("{\"colour\":\"red\",\"tags\":[]}"));
    assertTrue(optional.matches("{\"colour\":\"blue\",\"tags\":[\"a\",\"b\",\"c\"],\"note\":null}"));
    assertFalse(optional.matches("{\"colour\":\"blue\",\"tags\":[\"a\",\"b\",\"c\",\"d\"]}"), "more than maxItems");
    assertFalse(optional.matches("{\"colour\":\"pink\",\"tags\":[]}"), "not in the enum");
    String shortest = "{\"name\":\"\",\"age\":0,\"score\":0,\"admin\":true}";
    assertTrue(a.matches(shortest));
    assertEquals(shortest.length(), a.distance(a.start()), "the shortest valid output is " + shortest);
  }

  @Test
  void keywordsOutsideTheSubsetAreRefusedByName() {
    UnsupportedSchemaException pattern = assertThrows(UnsupportedSchemaException.class,
        () -> JsonSchemaAutomaton.compile("{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\",\"pattern\":\"^a+$\"}}}"));
    assertEquals("pattern", pattern.keyword());
    assertTrue(pattern.getMessage().contains("#/properties/id"), pattern.getMessage());
    UnsupportedSchemaException recursive = assertThrows(UnsupportedSchemaException.class, () -> JsonSchemaAutomaton.compile(
        "{\"$defs\":{\"Node\":{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#/$defs/Node\"}}}},\"$ref\":\"#/$defs/Node\"}"));
    assertEquals("$ref", recursive.keyword());
    assertEquals("minimum", assertThrows(UnsupportedSchemaException.class,
        () -> JsonSchemaAutomaton.compile("{\"type\":\"integer\",\"minimum\":0}")).keyword());
  }

  private static double gaussian(SplittableRandom r) {
    return Math.sqrt(-2 * Math.log(1 - r.nextDouble())) * Math.cos(2 * Math.PI * r.nextDouble());
  }
}
