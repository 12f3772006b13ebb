package dev.xlaactors.lm.structured;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.networknt.schema.Schema;
import com.networknt.schema.SchemaRegistry;
import com.networknt.schema.SpecificationVersion;
import dev.xlaactors.lm.sampling.Sampler;
import dev.xlaactors.lm.sampling.SamplingParams;
import dev.xlaactors.lm.sampling.SequenceState;
import dev.xlaactors.lm.text.HuggingFaceTokenizer;
import dev.xlaactors.lm.text.SentencePieceTokenizerJson;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Constrained decoding over a SentencePiece vocabulary with byte fallback (Llama 2's and Gemma's kind, the
 * lm tests' {@link SentencePieceTokenizerJson}): pieces carry their word-start space as "▁", and a character
 * without a piece is written as its UTF-8 bytes' pieces ({@code <0xC3><0xA9>}). With a random model's
 * logits every seed's answer, decoded by the tokenizer itself (not by the grammar's own reading of the
 * vocabulary), parses and is valid for its schema; and the grammar follows a character spelled by byte
 * pieces one byte at a time.
 */
class SentencePieceOutputTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int SAMPLES = 8;

  @Test
  void everySeedsAnswerOverASentencePieceVocabularyIsValid(@TempDir Path dir) throws Exception {
    try (HuggingFaceTokenizer sp = HuggingFaceTokenizer.open(SentencePieceTokenizerJson.write(dir.resolve("sp.json")))) {
      TokenVocabulary vocabulary = TokenVocabulary.of(sp);
      int end = SentencePieceTokenizerJson.EOS;
      assertEquals(null, vocabulary.bytes(end), "the end of text is no text");
      int space = sp.tokenId("\u2581").orElseThrow();
      assertEquals(" ", new String(vocabulary.bytes(space), StandardCharsets.UTF_8), "'▁' is read as the space it writes");
      int c3 = sp.tokenId("<0xC3>").orElseThrow();
      int a9 = sp.tokenId("<0xA9>").orElseThrow();
      assertEquals(1, vocabulary.bytes(c3).length, "a byte piece is its one byte, though alone it is no character");

      ByteAutomaton nameOnly = JsonSchemaAutomaton.compile("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"string\"}},"
          + "\"required\":[\"n\"]}");
      TokenGrammar g = new TokenGrammar(nameOnly, vocabulary);
      int s = g.automaton().start();
      for (char c : "{\"n\":\"".toCharArray()) { // piece by piece: encoding would prepend "▁"
        s = g.next(s, sp.tokenId(String.valueOf(c)).orElseThrow());
        assertTrue(s >= 0, "the prefix's pieces are allowed");
      }
      int half = g.next(s, c3);
      assertTrue(half >= 0, "the first byte of 'é' is allowed inside a string");
      assertEquals(-1, g.next(half, sp.tokenId("\"").orElseThrow()), "a quote cannot cut 'é' in half");
      assertTrue(g.next(half, a9) >= 0, "its second byte completes it");

      SchemaRegistry validators = SchemaRegistry.withDefaultDialect(SpecificationVersion.DRAFT_2020_12);
      Sampler sampler = new Sampler();
      int n = vocabulary.size();
      for (String schemaText : List.of(JsonSchemaOutputTest.SCHEMAS.get(0), JsonSchemaOutputTest.SCHEMAS.get(1))) {
        Schema validator = validators.getSchema(schemaText);
        TokenGrammar grammar = new TokenGrammar(JsonSchemaAutomaton.compile(schemaText), vocabulary);
        for (int seed = 0; seed < SAMPLES; seed++) {
          SamplingParams params = SamplingParams.defaults().withSeed((long) seed).withMaxTokens(120)
              .withProcessor(new GrammarProcessor(grammar, Set.of(end)));
          SequenceState state = SequenceState.create(params, sp.encode("JSON:", true));
          SplittableRandom model = new SplittableRandom(2000 + seed);
          List<Integer> drawn = new ArrayList<>();
          ByteArrayOutputStream read = new ByteArrayOutputStream();
          boolean ended = false;
          for (int step = 0; step < params.maxTokens() && !ended; step++) {
            float[] logits = new float[n];
            for (int i = 0; i < n; i++) {
              logits[i] = (float) (model.nextDouble() * 16 - 8); // a confident random model: the constraint, not luck, decides
            }
            int token = sampler.sample(logits, params, state).token();
            if (token == end) {
              ended = true;
            } else {
              drawn.add(token);
              read.writeBytes(vocabulary.bytes(token));
            }
          }
          String text = sp.decode(drawn.stream().mapToInt(Integer::intValue).toArray(), true);
          assertTrue(ended, "seed " + seed + " did not end within its budget: " + text);
          assertEquals(read.toString(StandardCharsets.UTF_8), text, "the tokenizer decodes what the grammar read");
          assertNotNull(JSON.readTree(text));
          assertEquals(List.of(), validator.validate(JSON.readTree(text)), "seed " + seed + " of " + schemaText + ": " + text);
        }
      }
    }
  }
}
