package dev.xlaactors.lm.text;

import com.google.gson.GsonBuilder;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small SentencePiece-style {@code tokenizer.json} as Llama 2's and Gemma's are saved: a BPE model with
 * byte fallback ({@code <unk> <s> </s>}, the 256 byte pieces {@code <0x00>..<0xFF>}, printable ASCII and
 * "▁", a few merges), a normalizer that writes each space as "▁" and prepends one, and the decoder that
 * turns "▁" back into spaces, byte pieces into bytes, and strips the text's first space. Characters outside
 * ASCII have no piece: they become their UTF-8 bytes' pieces, so one character spans several tokens. Public: the
 * structured-output tests constrain decoding over it.
 */
public final class SentencePieceTokenizerJson {
  static final int UNK = 0;
  static final int BOS = 1;
  /** The end of text. */
  public static final int EOS = 2;

  private SentencePieceTokenizerJson() {}

  /** Writes the file to {@code file}; returns it. */
  public static Path write(Path file) {
    Map<String, Integer> vocab = new LinkedHashMap<>();
    vocab.put("<unk>", UNK);
    vocab.put("<s>", BOS);
    vocab.put("</s>", EOS);
    for (int b = 0; b < 256; b++) {
      vocab.put(String.format("<0x%02X>", b), vocab.size());
    }
    vocab.put("\u2581", vocab.size());
    for (char c = '!'; c <= '~'; c++) {
      vocab.putIfAbsent(String.valueOf(c), vocab.size());
    }
    List<List<String>> merges = new ArrayList<>();
    for (String[] m : new String[][] {{"\u2581", "t"}, {"h", "e"}, {"\u2581t", "he"}, {"\u2581", "w"}, {"o", "r"}, {"\u2581w", "or"},
        {"l", "d"}, {"\u2581wor", "ld"}, {"\u2581", "H"}, {"e", "l"}, {"el", "l"}, {"\u2581H", "ell"}, {"\u2581Hell", "o"}}) {
      merges.add(List.of(m[0], m[1]));
      vocab.putIfAbsent(m[0] + m[1], vocab.size());
    }
    List<Map<String, Object>> added = new ArrayList<>();
    for (String special : List.of("<unk>", "<s>", "</s>")) {
      Map<String, Object> t = new LinkedHashMap<>();
      t.put("id", vocab.get(special));
      t.put("content", special);
      t.put("single_word", false);
      t.put("lstrip", false);
      t.put("rstrip", false);
      t.put("normalized", false);
      t.put("special", true);
      added.add(t);
    }
    Map<String, Object> model = new LinkedHashMap<>();
    model.put("type", "BPE");
    model.put("dropout", null);
    model.put("unk_token", "<unk>");
    model.put("continuing_subword_prefix", null);
    model.put("end_of_word_suffix", null);
    model.put("fuse_unk", true);
    model.put("byte_fallback", true);
    model.put("vocab", vocab);
    model.put("merges", merges);
    Map<String, Object> root = new LinkedHashMap<>();
    root.put("version", "1.0");
    root.put("truncation", null);
    root.put("padding", null);
    root.put("added_tokens", added);
    root.put("normalizer", Map.of("type", "Sequence", "normalizers", List.of(Map.of("type", "Prepend", "prepend", "\u2581"),
        Map.of("type", "Replace", "pattern", Map.of("String", " "), "content", "\u2581"))));
    root.put("pre_tokenizer", null);
    root.put("post_processor", null);
    root.put("decoder", Map.of("type", "Sequence", "decoders", List.of(
        Map.of("type", "Replace", "pattern", Map.of("String", "\u2581"), "content", " "),
        Map.of("type", "ByteFallback"), Map.of("type", "Fuse"), Map.of("type", "Strip", "content", " ", "start", 1, "stop", 0))));
    root.put("model", model);
    try {
      Files.writeString(file, new GsonBuilder().serializeNulls().create().toJson(root), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return file;
  }
}
