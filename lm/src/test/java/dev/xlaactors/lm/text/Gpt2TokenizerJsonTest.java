package dev.xlaactors.lm.text;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalInt;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The written GPT-2 tokenizer.json, run by the Rust tokenizers through DJL, agrees with JTokkit's r50k_base. */
class Gpt2TokenizerJsonTest {
  @TempDir static Path dir;
  static HuggingFaceTokenizer huggingFace;
  static TiktokenTokenizer tiktoken;

  /** Text chosen to exercise every branch of GPT-2's regex and the byte-level alphabet. */
  static final List<String> CORPUS = List.of(
      "Hello, world!",
      "The quick brown fox jumps over the lazy dog. It's 5 o'clock; they'll've gone, we'd've stayed.",
      "  leading spaces and trailing   ",
      "tabs\tand\nnewlines\r\n\n\nand   runs    of     spaces",
      "public static void main(String[] args) {\n    System.out.println(\"hi\" + 42);\n}\n",
      "def f(x):\n\treturn x ** 2  # square\n",
      "3.14159 2,718 1e-10 0x1F -42 +7 1234567890 ½ ²",
      "!!!??? ... --- *** @@@ ### $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}} <<< >>> ~~~ `` '' \"\"",
      "café naïve résumé Ångström façade Æsir Øresund Straße",
      "日本語のテキストと中文文本，还有한국어 텍스트。",
      "emoji 😀😃 👍🏽 🇯🇵 👨‍👩‍👧‍👦 ❤️ 🤖",
      "Mixed: Привет мир, γειά σου κόσμε, שלום עולם, مرحبا بالعالم, नमस्ते दुनिया",
      "zero\u200Bwidth, non\u00A0breaking, ideographic\u3000space, em\u2003space",
      "'S 'T 'RE 'VE 'M 'LL 'D and 's 't 're 've 'm 'll 'd",
      "before<|endoftext|>after",
      "<|endoftext|>",
      "",
      " ",
      "\n",
      "a");

  @BeforeAll
  static void open() {
    huggingFace = HuggingFaceTokenizer.open(Gpt2TokenizerJson.write(dir.resolve("tokenizer.json")));
    tiktoken = TiktokenTokenizer.of("r50k_base");
  }

  @AfterAll
  static void close() {
    huggingFace.close();
  }

  @Test
  void encodesTokenForTokenAsJTokkit() {
    List<String> differing = new ArrayList<>();
    for (String text : CORPUS) {
      int[] expected = tiktoken.encode(text);
      int[] actual = huggingFace.encode(text);
      if (!java.util.Arrays.equals(expected, actual)) {
        differing.add(text + ": jtokkit " + java.util.Arrays.toString(expected) + " djl " + java.util.Arrays.toString(actual));
      }
    }
    assertEquals(List.of(), differing);
  }

  @Test
  void decodesAsJTokkitAndRoundTrips() {
    for (String text : CORPUS) {
      int[] ids = tiktoken.encode(text);
      assertEquals(tiktoken.decode(ids), huggingFace.decode(ids), text);
      assertEquals(text, huggingFace.decode(ids), text);
    }
  }

  @Test
  void knowsGpt2sVocabularyAndSpecialToken() {
    assertEquals(50257, huggingFace.vocabularySize());
    assertEquals(OptionalInt.of(50256), huggingFace.tokenId("<|endoftext|>"));
    assertArrayEquals(new int[] {15496, 11, 995, 0}, huggingFace.encode("Hello, world!"));
    assertArrayEquals(new int[] {50256}, huggingFace.encode("<|endoftext|>"));
    assertEquals("ab", huggingFace.decode(new int[] {64, 50256, 65}, true));
  }

  @Test
  void derivesGpt2sFirstMergesFromTheRanks() {
    List<byte[]> tokens = Gpt2TokenizerJson.readRanks();
    List<byte[][]> merges = Gpt2TokenizerJson.merges(tokens);
    assertEquals(50_000, merges.size()); // GPT-2's merges.txt has 50,000 lines
    char[] alphabet = Gpt2TokenizerJson.byteToUnicode();
    assertEquals('Ġ', alphabet[' ']);
    assertEquals('Ċ', alphabet['\n']);
    assertEquals('!', alphabet['!']);
    // The first lines of GPT-2's merges.txt: "Ġ t", "Ġ a", "h e", "i n", "r e".
    assertEquals(List.of(" t", " a", "he", "in", "re"), merges.subList(0, 5).stream()
        .map(m -> new String(m[0], java.nio.charset.StandardCharsets.ISO_8859_1) + new String(m[1], java.nio.charset.StandardCharsets.ISO_8859_1))
        .toList());
  }
}
