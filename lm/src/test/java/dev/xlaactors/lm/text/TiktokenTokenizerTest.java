package dev.xlaactors.lm.text;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.List;
import java.util.OptionalInt;
import org.junit.jupiter.api.Test;

/** JTokkit's encodings behind the {@link Tokenizer} interface. */
class TiktokenTokenizerTest {

  @Test
  void encodesAndDecodesEachEncoding() {
    TiktokenTokenizer r50k = TiktokenTokenizer.of("r50k_base");
    assertArrayEquals(new int[] {15496, 11, 995, 0}, r50k.encode("Hello, world!"));
    assertEquals("Hello, world!", r50k.decode(new int[] {15496, 11, 995, 0}));
    TiktokenTokenizer cl100k = TiktokenTokenizer.of("cl100k_base");
    assertArrayEquals(new int[] {9906, 11, 1917, 0}, cl100k.encode("Hello, world!"));
    TiktokenTokenizer o200k = TiktokenTokenizer.of("o200k_base");
    assertArrayEquals(new int[] {13225, 11, 2375, 0}, o200k.encode("Hello, world!"));
    for (TiktokenTokenizer t : List.of(r50k, cl100k, o200k)) {
      String text = "naïve 日本語 👨‍👩‍👧 x=42;";
      assertEquals(text, t.decode(t.encode(text)), t.encodingName());
    }
  }

  @Test
  void eachTokensBytesJoinIntoTheTextWhereDecodingOneTokenCannot() {
    TiktokenTokenizer r50k = TiktokenTokenizer.of("r50k_base");
    String text = "fox 👨‍👩‍👧<|endoftext|>";
    int[] ids = r50k.encode(text);
    java.io.ByteArrayOutputStream joined = new java.io.ByteArrayOutputStream();
    boolean split = false;
    for (int id : ids) {
      joined.writeBytes(r50k.decodeBytes(new int[] {id}));
      split |= r50k.decode(new int[] {id}).contains("\uFFFD");
    }
    assertTrue(split, "some token of the emoji holds part of a character");
    assertEquals(text, joined.toString(java.nio.charset.StandardCharsets.UTF_8));
    assertArrayEquals(text.getBytes(java.nio.charset.StandardCharsets.UTF_8), r50k.decodeBytes(ids));
  }

  @Test
  void knowsVocabularySizesAndSpecialTokens() {
    assertEquals(50257, TiktokenTokenizer.of("r50k_base").vocabularySize());
    assertEquals(100277, TiktokenTokenizer.of("cl100k_base").vocabularySize());
    assertEquals(200019, TiktokenTokenizer.of("o200k_base").vocabularySize());
    assertEquals(OptionalInt.of(100257), TiktokenTokenizer.of("cl100k_base").tokenId("<|endoftext|>"));
    assertEquals(OptionalInt.of(200018), TiktokenTokenizer.of("o200k_base").tokenId("<|endofprompt|>"));
    assertEquals(OptionalInt.of(15496), TiktokenTokenizer.of("r50k_base").tokenId("Hello"));
    assertEquals(OptionalInt.empty(), TiktokenTokenizer.of("r50k_base").tokenId("Hello, world"));
    assertEquals("<|fim_prefix|>", TiktokenTokenizer.of("cl100k_base").decode(new int[] {100258}));
  }

  @Test
  void specialTokenTextBecomesTheSpecialToken() {
    TiktokenTokenizer r50k = TiktokenTokenizer.of("r50k_base");
    assertArrayEquals(new int[] {5303, 50256, 8117, 50256}, r50k.encode("hi<|endoftext|>there<|endoftext|>"));
    assertEquals("hi<|endoftext|>there", r50k.decode(new int[] {5303, 50256, 8117}));
    assertEquals("hithere", r50k.decode(new int[] {5303, 50256, 8117}, true));
    assertArrayEquals(r50k.encode("hi", true), r50k.encode("hi"));
  }

  @Test
  void refusesUnknownEncodingsNamingTheKnownOnes() {
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> TiktokenTokenizer.of("p50k_edit"));
    assertTrue(e.getMessage().contains("'p50k_edit'"), e.getMessage());
    assertTrue(e.getMessage().contains("[cl100k_base, o200k_base, r50k_base]"), e.getMessage());
  }

  @Test
  void refusesIdsItHasNoTokenFor() {
    TiktokenTokenizer o200k = TiktokenTokenizer.of("o200k_base");
    InvalidArgumentException outside = assertThrows(InvalidArgumentException.class, () -> o200k.decode(new int[] {200019}));
    assertTrue(outside.getMessage().contains("[0, 200019)"), outside.getMessage());
    // 199998 lies inside the range but o200k_base has no token there.
    assertThrows(InvalidArgumentException.class, () -> o200k.decode(new int[] {199998}));
  }
}
