package dev.xlaactors.lm.text;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalInt;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** DJL's tokenizer with our defaults: no special tokens unless asked, no truncation, no padding. */
class HuggingFaceTokenizerTest {
  @TempDir Path dir;

  /** A word-level tokenizer with a BERT-like template ([CLS] text [SEP]). */
  static final String WORD_LEVEL = """
      {"version": "1.0", "truncation": null, "padding": null,
       "added_tokens": [
         {"id": 0, "content": "[UNK]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
         {"id": 1, "content": "[CLS]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
         {"id": 2, "content": "[SEP]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
       "normalizer": null,
       "pre_tokenizer": {"type": "Whitespace"},
       "post_processor": {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                    {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
         "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [1], "tokens": ["[CLS]"]},
                            "[SEP]": {"id": "[SEP]", "ids": [2], "tokens": ["[SEP]"]}}},
       "decoder": null,
       "model": {"type": "WordLevel", "unk_token": "[UNK]",
                 "vocab": {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "hello": 3, "world": 4, "again": 5}}}
      """;

  private Path write(String name, String text) throws IOException {
    return Files.writeString(dir.resolve(name), text);
  }

  @Test
  void addsTheTemplateOnlyWhenAsked() throws IOException {
    try (HuggingFaceTokenizer tokenizer = HuggingFaceTokenizer.open(write("tokenizer.json", WORD_LEVEL))) {
      assertArrayEquals(new int[] {3, 4, 0}, tokenizer.encode("hello world nope"));
      assertArrayEquals(new int[] {1, 3, 4, 2}, tokenizer.encode("hello world", true));
      assertEquals("[CLS] hello world [SEP]", tokenizer.decode(new int[] {1, 3, 4, 2}));
      assertEquals("hello world", tokenizer.decode(new int[] {1, 3, 4, 2}, true));
      assertEquals(6, tokenizer.vocabularySize());
      assertEquals(OptionalInt.of(2), tokenizer.tokenId("[SEP]"));
      assertEquals(OptionalInt.of(5), tokenizer.tokenId("again"));
      assertEquals(OptionalInt.empty(), tokenizer.tokenId("[MASK]"));
    }
  }

  @Test
  void aByteLevelVocabularyGivesEachTokensOwnBytesAsTiktokenDoes() throws IOException {
    String text = "fox 👨‍👩‍👧 naïve<|endoftext|>";
    TiktokenTokenizer r50k = TiktokenTokenizer.of("r50k_base");
    try (HuggingFaceTokenizer gpt2 = HuggingFaceTokenizer.open(Gpt2TokenizerJson.write(dir.resolve("tokenizer.json")));
        HuggingFaceTokenizer wordLevel = HuggingFaceTokenizer.open(write("word-level.json", WORD_LEVEL))) {
      int[] ids = gpt2.encode(text);
      for (int id : ids) {
        assertArrayEquals(r50k.decodeBytes(new int[] {id}), gpt2.decodeBytes(new int[] {id}), "token " + id);
      }
      assertEquals(text, new String(gpt2.decodeBytes(ids), java.nio.charset.StandardCharsets.UTF_8));
      // Not byte-level: decode's text in UTF-8.
      assertArrayEquals("hello world".getBytes(java.nio.charset.StandardCharsets.UTF_8), wordLevel.decodeBytes(new int[] {3, 4}));
    }
  }

  @Test
  void aSentencePieceVocabularyGivesEachPiecesOwnBytes() {
    // Decoded alone, "▁world" loses its space (the decoder strips a text's first one) and a byte piece of
    // "ö" is U+FFFD; a piece's own bytes keep both, and joined they are the text (with the space the
    // normalizer prepended).
    try (HuggingFaceTokenizer sp = HuggingFaceTokenizer.open(SentencePieceTokenizerJson.write(dir.resolve("sp.json")))) {
      int[] ids = sp.encode("Hello wörld</s>");
      assertEquals("world", sp.decode(new int[] {sp.tokenId("\u2581w").getAsInt(), sp.tokenId("o").getAsInt()}) + "rld");
      assertArrayEquals(" w".getBytes(java.nio.charset.StandardCharsets.UTF_8), sp.decodeBytes(new int[] {sp.tokenId("\u2581w").getAsInt()}));
      assertArrayEquals(new byte[] {(byte) 0xC3}, sp.decodeBytes(new int[] {sp.tokenId("<0xC3>").getAsInt()}));
      assertEquals(" Hello wörld</s>", new String(sp.decodeBytes(ids), java.nio.charset.StandardCharsets.UTF_8));
      assertEquals("Hello wörld</s>", sp.decode(ids));
    }
  }

  @Test
  void opensTheTokenizerJsonInAFolder() throws IOException {
    write("tokenizer.json", WORD_LEVEL);
    try (HuggingFaceTokenizer tokenizer = HuggingFaceTokenizer.open(dir)) {
      assertEquals(dir.resolve("tokenizer.json"), tokenizer.file());
    }
  }

  @Test
  void neitherTruncatesNorPads() throws IOException {
    // DJL's own default would cut this at 512 tokens.
    String text = "hello world again ".repeat(400);
    try (HuggingFaceTokenizer tokenizer = HuggingFaceTokenizer.open(write("tokenizer.json", WORD_LEVEL))) {
      assertEquals(1200, tokenizer.encode(text).length);
      assertEquals(1202, tokenizer.encode(text, true).length);
      assertEquals(1, tokenizer.encode("again").length);
    }
  }

  @Test
  void refusesAMissingFileNamingIt() {
    Path missing = dir.resolve("nope/tokenizer.json");
    XlaException e = assertThrows(XlaException.class, () -> HuggingFaceTokenizer.open(missing));
    assertEquals(ErrorCode.NOT_FOUND, e.code());
    assertTrue(e.getMessage().contains(missing.toAbsolutePath().toString()), e.getMessage());
  }

  @Test
  void refusesMalformedJsonNamingTheFile() throws IOException {
    Path bad = write("broken.json", "{\"model\": {\"vocab\": ");
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> HuggingFaceTokenizer.open(bad));
    assertTrue(e.getMessage().contains(bad.toAbsolutePath().toString()), e.getMessage());
    assertTrue(e.getMessage().contains("not valid JSON"), e.getMessage());
  }

  @Test
  void refusesATopLevelThatIsNoObjectOrTrailingValuesNamingTheFile() throws IOException {
    Path array = write("array.json", "[{\"model\": {\"vocab\": {\"a\": 0}}}]");
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> HuggingFaceTokenizer.open(array));
    assertTrue(e.getMessage().contains(array.toAbsolutePath().toString())
        && e.getMessage().contains("its top level is not a JSON object"), e.getMessage());
    Path two = write("two.json", "{\"model\": {\"vocab\": {\"a\": 0}}} {}");
    InvalidArgumentException trailing = assertThrows(InvalidArgumentException.class, () -> HuggingFaceTokenizer.open(two));
    assertTrue(trailing.getMessage().contains(two.toAbsolutePath().toString())
        && trailing.getMessage().contains("not valid JSON"), trailing.getMessage());
  }

  @Test
  void refusesJsonThatIsNoTokenizerNamingTheFile() throws IOException {
    Path bad = write("other.json", "{\"model\": {\"type\": \"NoSuchModel\", \"vocab\": {\"a\": 0}}}");
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> HuggingFaceTokenizer.open(bad));
    assertTrue(e.getMessage().contains(bad.toAbsolutePath().toString()), e.getMessage());
    assertTrue(e.getMessage().contains("tokenizers library refused"), e.getMessage());
  }

  @Test
  void refusesIdsOutsideTheVocabularyAndUseAfterClose() throws IOException {
    HuggingFaceTokenizer tokenizer = HuggingFaceTokenizer.open(write("tokenizer.json", WORD_LEVEL));
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> tokenizer.decode(new int[] {3, 6}));
    assertTrue(e.getMessage().contains("token id 6 at index 1"), e.getMessage());
    tokenizer.close();
    tokenizer.close();
    assertThrows(IllegalStateException.class, () -> tokenizer.encode("hello"));
  }
}
