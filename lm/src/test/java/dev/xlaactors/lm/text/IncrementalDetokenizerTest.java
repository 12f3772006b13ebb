package dev.xlaactors.lm.text;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.OptionalInt;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Streaming text token by token over byte-level vocabularies, which split characters over tokens. */
class IncrementalDetokenizerTest {
  @TempDir static Path dir;
  static HuggingFaceTokenizer gpt2;
  static HuggingFaceTokenizer sentencePiece;

  static final List<String> TEXTS = List.of(
      "Plain English, with punctuation: done.",
      "日本語のテキストと中文文本，还有한국어 텍스트。",
      "emoji 😀😃 thumbs 👍🏽 flag 🇯🇵 family 👨‍👩‍👧‍👦 heart ❤️ robot 🤖",
      "accents: café naïve résumé Ångström, combining e\u0301 and a\u0308",
      "mixed: Привет, 世界! γειά 🌍 مرحبا x²+y²",
      "🧑🏿‍🚀👩🏼‍🔬 back to back ZWJ sequences 🏳️‍🌈");

  @BeforeAll
  static void open() {
    gpt2 = HuggingFaceTokenizer.open(Gpt2TokenizerJson.write(dir.resolve("tokenizer.json")));
    sentencePiece = HuggingFaceTokenizer.open(SentencePieceTokenizerJson.write(dir.resolve("sentencepiece.json")));
  }

  @AfterAll
  static void close() {
    gpt2.close();
    sentencePiece.close();
  }

  private static List<String> stream(Tokenizer tokenizer, int[] prompt, int[] generated) {
    IncrementalDetokenizer detokenizer = IncrementalDetokenizer.create(tokenizer, prompt, false);
    List<String> pieces = new ArrayList<>();
    for (int id : generated) {
      pieces.add(detokenizer.next(id));
    }
    pieces.add(detokenizer.finish());
    return pieces;
  }

  @Test
  void piecesConcatenateToTheWholeDecodeWithoutReplacementCharacters() {
    for (Tokenizer tokenizer : List.of(gpt2, TiktokenTokenizer.of("r50k_base"), TiktokenTokenizer.of("cl100k_base"))) {
      for (String text : TEXTS) {
        int[] ids = tokenizer.encode(text);
        List<String> pieces = stream(tokenizer, new int[0], ids);
        assertEquals(tokenizer.decode(ids), String.join("", pieces), tokenizer + ": " + text);
        assertEquals(text, String.join("", pieces));
        for (String piece : pieces) {
          assertFalse(piece.contains("\uFFFD"), tokenizer + " emitted a broken character in '" + piece + "' of " + text);
        }
      }
    }
  }

  @Test
  void holdsBackACharacterSplitOverTokensUntilItIsWhole() {
    int[] ids = gpt2.encode("🤖");
    assertTrue(ids.length > 1, "GPT-2 spells the robot in " + Arrays.toString(ids));
    assertTrue(gpt2.decode(new int[] {ids[0]}).contains("\uFFFD"), "a lone first byte token decodes to U+FFFD");
    IncrementalDetokenizer detokenizer = IncrementalDetokenizer.create(gpt2);
    for (int i = 0; i < ids.length - 1; i++) {
      assertEquals("", detokenizer.next(ids[i]), "token " + i + " ends inside the character");
    }
    assertEquals("🤖", detokenizer.next(ids[ids.length - 1]));
    assertEquals("", detokenizer.finish());
  }

  @Test
  void streamsTheContinuationOfAPromptWithoutRepeatingIt() {
    String prompt = "Translate: 東京";
    String continuation = "は日本の首都です 🗼 and that's it.";
    int[] all = gpt2.encode(prompt + continuation);
    int[] promptIds = gpt2.encode(prompt);
    // The prompt's tokens are a prefix of the whole text's here (no merge across the boundary).
    assertArrayEquals(promptIds, Arrays.copyOf(all, promptIds.length));
    int[] generated = Arrays.copyOfRange(all, promptIds.length, all.length);
    assertEquals(continuation, String.join("", stream(gpt2, promptIds, generated)));
  }

  @Test
  void finishFlushesAnIncompleteTail() {
    int[] ids = gpt2.encode("ok 🤖");
    IncrementalDetokenizer detokenizer = IncrementalDetokenizer.create(gpt2);
    StringBuilder text = new StringBuilder();
    for (int i = 0; i < ids.length - 1; i++) {
      text.append(detokenizer.next(ids[i]));
    }
    assertEquals("ok", text.toString());
    String rest = detokenizer.finish();
    assertTrue(rest.startsWith(" ") && rest.endsWith("\uFFFD"), "the cut-off robot is flushed as '" + rest + "'");
    assertThrows(IllegalStateException.class, () -> detokenizer.next(ids[0]));
  }

  @Test
  void skipsSpecialTokensWhenAsked() {
    int eos = gpt2.tokenId("<|endoftext|>").orElseThrow();
    int[] ids = gpt2.encode("a<|endoftext|>b");
    assertEquals(eos, ids[1]);
    IncrementalDetokenizer skipping = IncrementalDetokenizer.create(gpt2, new int[0], true);
    StringBuilder text = new StringBuilder();
    for (int id : ids) {
      text.append(skipping.next(id));
    }
    assertEquals("ab", text.append(skipping.finish()).toString());
  }

  @Test
  void eachStepDecodesAFewTokensNotTheWholeSequence() {
    CountingTokenizer counting = new CountingTokenizer(gpt2);
    int[] ids = gpt2.encode(String.join(" ", TEXTS).repeat(20));
    assertTrue(ids.length > 1000);
    List<String> pieces = stream(counting, new int[0], ids);
    assertEquals(gpt2.decode(ids), String.join("", pieces));
    assertTrue(counting.longestDecode <= IncrementalDetokenizer.MAX_UNREAD_TOKENS + 1,
        "the longest decode took " + counting.longestDecode + " tokens");
  }

  /** Records the longest decode it was asked for. */
  private static final class CountingTokenizer implements Tokenizer {
    final Tokenizer inner;
    int longestDecode;

    CountingTokenizer(Tokenizer inner) {
      this.inner = inner;
    }

    @Override
    public int[] encode(String text, boolean addSpecialTokens) {
      return inner.encode(text, addSpecialTokens);
    }

    @Override
    public String decode(int[] ids, boolean skipSpecialTokens) {
      longestDecode = Math.max(longestDecode, ids.length);
      return inner.decode(ids, skipSpecialTokens);
    }

    @Override
    public int vocabularySize() {
      return inner.vocabularySize();
    }

    @Override
    public OptionalInt tokenId(String token) {
      return inner.tokenId(token);
    }

    @Override
    public void close() {}
  }

  /** A SentencePiece-style vocabulary: words carry their leading space as "▁", which a lone token's decode drops. */
  static final String METASPACE = """
      {"version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
       "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true},
       "post_processor": null,
       "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true},
       "model": {"type": "WordLevel", "unk_token": "[UNK]",
                 "vocab": {"[UNK]": 0, "\u2581hello": 1, "\u2581world": 2, "\u2581again": 3}}}
      """;

  @Test
  void keepsTheSpacingThatALoneTokensDecodeDrops() throws java.io.IOException {
    Path file = java.nio.file.Files.writeString(dir.resolve("metaspace.json"), METASPACE);
    try (HuggingFaceTokenizer tokenizer = HuggingFaceTokenizer.open(file)) {
      int[] ids = tokenizer.encode("hello world again");
      assertArrayEquals(new int[] {1, 2, 3}, ids);
      assertEquals("world", tokenizer.decode(new int[] {2}), "a lone token loses its space");
      assertEquals(List.of("hello", " world", " again", ""), stream(tokenizer, new int[0], ids));
      // After a prompt, the first generated word is spaced by the prompt's context.
      assertEquals(List.of(" world", " again", ""), stream(tokenizer, new int[] {1}, new int[] {2, 3}));
    }
  }

  @Test
  void sentencePieceWithByteFallbackStreamsSpacesAndWholeCharacters() {
    // Alone, "▁world" decodes to "world" (the decoder strips a text's first space) and a byte piece to U+FFFD:
    // the window's context keeps the spaces, and a character's byte pieces wait for its last one.
    for (String text : TEXTS) {
      int[] ids = sentencePiece.encode("Say: " + text);
      int[] prompt = sentencePiece.encode("Say:");
      assertArrayEquals(prompt, Arrays.copyOf(ids, prompt.length), "the prompt's pieces start the text's");
      List<String> pieces = stream(sentencePiece, prompt, Arrays.copyOfRange(ids, prompt.length, ids.length));
      assertEquals(" " + text, String.join("", pieces), text);
      pieces.forEach(p -> assertFalse(p.contains("\uFFFD"), "half a character in " + pieces));
    }
  }

  @Test
  void aPromptThatEndsInsideACharacterLosesNothing() {
    // The prompt's last tokens hold the first bytes of a character its continuation completes: that
    // character is the first text the generated tokens make, whole (it was lost: the prompt's U+FFFD
    // counted as text already emitted). At every split, so also where the prompt's context would start
    // inside a character (SentencePiece's byte fallback then made all that followed U+FFFD).
    for (Tokenizer tokenizer : List.of(gpt2, sentencePiece)) {
      for (String text : TEXTS) {
        int[] ids = tokenizer.encode(text);
        int splits = 0;
        for (int k = 1; k < ids.length; k++) {
          byte[] head = tokenizer.decodeBytes(Arrays.copyOf(ids, k));
          int partial = IncrementalDetokenizer.incompleteTailBytes(head);
          if (partial > 0) {
            splits++;
          }
          byte[] all = tokenizer.decodeBytes(ids);
          String expected = new String(all, head.length - partial, all.length - head.length + partial, java.nio.charset.StandardCharsets.UTF_8);
          List<String> pieces = stream(tokenizer, Arrays.copyOf(ids, k), Arrays.copyOfRange(ids, k, ids.length));
          assertEquals(expected, String.join("", pieces), tokenizer + " split at " + k + ": " + text);
        }
        if (!text.startsWith("Plain") && !text.startsWith("accents")) {
          assertTrue(splits > 0, "no token of " + tokenizer + " ends inside a character of " + text);
        }
      }
    }
  }
}
