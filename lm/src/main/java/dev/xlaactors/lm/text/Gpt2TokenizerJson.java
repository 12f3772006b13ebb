package dev.xlaactors.lm.text;

import com.google.gson.stream.JsonWriter;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Writes GPT-2's Hugging Face {@code tokenizer.json} from JTokkit's own {@code r50k_base} ranks, so a
 * GPT-2 model package needs no download to get its tokenizer.
 *
 * <p>The file is the byte-level BPE that {@code transformers} ships for GPT-2: a ByteLevel pre-tokenizer
 * (GPT-2's regex, no prefix space), a BPE model whose vocabulary is spelled in GPT-2's byte-to-unicode
 * alphabet (byte {@code 0x20} is {@code Ġ}), the merges, a ByteLevel decoder and
 * {@code <|endoftext|>} (id 50256) as an added special token. tiktoken keeps only ranks, so the merges
 * are derived as tiktoken's converters do: a token's merge is the last step of running BPE on its bytes
 * with only lower ranks allowed, which leaves exactly two parts.
 */
public final class Gpt2TokenizerJson {
  /** GPT-2's end-of-text token, its only special token. */
  public static final String END_OF_TEXT = "<|endoftext|>";

  /** {@link #END_OF_TEXT}'s id: one past the last rank. */
  public static final int END_OF_TEXT_ID = 50256;

  private static final String RANKS_RESOURCE = "/com/knuddels/jtokkit/r50k_base.tiktoken";

  private Gpt2TokenizerJson() {}

  /**
   * Writes the tokenizer to {@code target} (replacing it) and returns {@code target}.
   *
   * @throws XlaException {@link ErrorCode#DATA_LOSS} when the ranks cannot be read or the file written
   */
  public static Path write(Path target) {
    try {
      Files.writeString(target, json(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new XlaException(ErrorCode.DATA_LOSS, "GPT-2 tokenizer.json cannot be written to "
          + target.toAbsolutePath() + " (" + e + "): give a writable path", e);
    }
    return target;
  }

  /** The tokenizer as JSON text (about 2 MB). */
  public static String json() {
    List<byte[]> tokens = readRanks();
    StringWriter out = new StringWriter(2_200_000);
    try {
      writeJson(out, tokens, merges(tokens));
    } catch (IOException e) {
      throw new UncheckedIOException(e); // a StringWriter does not fail
    }
    return out.toString();
  }

  /** The r50k_base tokens' bytes, indexed by rank (ranks are 0..50255 without gaps). */
  static List<byte[]> readRanks() {
    List<byte[]> tokens = new ArrayList<>(END_OF_TEXT_ID);
    try (InputStream in = Gpt2TokenizerJson.class.getResourceAsStream(RANKS_RESOURCE)) {
      if (in == null) {
        throw new XlaException(ErrorCode.DATA_LOSS, "JTokkit's " + RANKS_RESOURCE + " is not on the class path:"
            + " expected the jtokkit jar (com.knuddels:jtokkit) that the lm module depends on");
      }
      BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.US_ASCII));
      String line;
      while ((line = reader.readLine()) != null) {
        if (line.isBlank()) {
          continue;
        }
        int space = line.indexOf(' ');
        int rank = Integer.parseInt(line.substring(space + 1).trim());
        if (rank != tokens.size()) {
          throw new XlaException(ErrorCode.DATA_LOSS, RANKS_RESOURCE + " has rank " + rank + " where rank "
              + tokens.size() + " was expected: the ranks must run from 0 without gaps");
        }
        tokens.add(Base64.getDecoder().decode(line.substring(0, space)));
      }
    } catch (IOException | RuntimeException e) {
      if (e instanceof XlaException x) {
        throw x;
      }
      throw new XlaException(ErrorCode.DATA_LOSS, RANKS_RESOURCE + " cannot be read (" + e + ")", e);
    }
    if (tokens.size() != END_OF_TEXT_ID) {
      throw new XlaException(ErrorCode.DATA_LOSS, RANKS_RESOURCE + " holds " + tokens.size() + " ranks, expected "
          + END_OF_TEXT_ID + " (GPT-2's r50k_base)");
    }
    return tokens;
  }

  /**
   * Each multi-byte token's merge as its two parts, in rank order (the BPE merge priority): the parts
   * left by BPE over the token's bytes with merges below the token's own rank.
   */
  static List<byte[][]> merges(List<byte[]> tokens) {
    Map<String, Integer> ranks = new HashMap<>(tokens.size() * 2);
    for (int rank = 0; rank < tokens.size(); rank++) {
      ranks.put(latin1(tokens.get(rank)), rank);
    }
    List<byte[][]> merges = new ArrayList<>(tokens.size());
    for (int rank = 0; rank < tokens.size(); rank++) {
      byte[] token = tokens.get(rank);
      if (token.length < 2) {
        continue;
      }
      List<String> parts = bytePairMerge(ranks, latin1(token), rank);
      if (parts.size() != 2) {
        throw new XlaException(ErrorCode.DATA_LOSS, "r50k_base token " + rank + " does not split into two lower-ranked"
            + " parts (got " + parts.size() + "): the ranks are not a byte-pair encoding");
      }
      merges.add(new byte[][] {parts.get(0).getBytes(StandardCharsets.ISO_8859_1),
          parts.get(1).getBytes(StandardCharsets.ISO_8859_1)});
    }
    return merges;
  }

  /** BPE on {@code piece} (one char per byte), merging the lowest-ranked pair while its rank is below {@code maxRank}. */
  private static List<String> bytePairMerge(Map<String, Integer> ranks, String piece, int maxRank) {
    List<String> parts = new ArrayList<>(piece.length());
    for (int i = 0; i < piece.length(); i++) {
      parts.add(piece.substring(i, i + 1));
    }
    while (true) {
      int bestAt = -1;
      int bestRank = Integer.MAX_VALUE;
      for (int i = 0; i + 1 < parts.size(); i++) {
        Integer rank = ranks.get(parts.get(i) + parts.get(i + 1));
        if (rank != null && rank < bestRank) {
          bestRank = rank;
          bestAt = i;
        }
      }
      if (bestAt < 0 || bestRank >= maxRank) {
        return parts;
      }
      parts.set(bestAt, parts.get(bestAt) + parts.get(bestAt + 1));
      parts.remove(bestAt + 1);
    }
  }

  /**
   * GPT-2's {@code bytes_to_unicode}: printable bytes ({@code !}..{@code ~}, {@code ¡}..{@code ¬},
   * {@code ®}..{@code ÿ}) stand for themselves, the other 68 map in order to U+0100 onwards, so every
   * byte is a visible, non-space character.
   */
  static char[] byteToUnicode() {
    char[] map = new char[256];
    int next = 0;
    for (int b = 0; b < 256; b++) {
      boolean printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      map[b] = printable ? (char) b : (char) (256 + next++);
    }
    return map;
  }

  private static String spell(byte[] bytes, char[] alphabet) {
    char[] chars = new char[bytes.length];
    for (int i = 0; i < bytes.length; i++) {
      chars[i] = alphabet[bytes[i] & 0xFF];
    }
    return new String(chars);
  }

  private static String latin1(byte[] bytes) {
    return new String(bytes, StandardCharsets.ISO_8859_1);
  }

  private static void writeJson(Writer target, List<byte[]> tokens, List<byte[][]> merges) throws IOException {
    char[] alphabet = byteToUnicode();
    JsonWriter json = new JsonWriter(target);
    json.beginObject();
    json.name("version").value("1.0");
    json.name("truncation").nullValue();
    json.name("padding").nullValue();
    json.name("added_tokens").beginArray().beginObject()
        .name("id").value(END_OF_TEXT_ID)
        .name("content").value(END_OF_TEXT)
        .name("single_word").value(false)
        .name("lstrip").value(false)
        .name("rstrip").value(false)
        .name("normalized").value(false)
        .name("special").value(true)
        .endObject().endArray();
    json.name("normalizer").nullValue();
    json.name("pre_tokenizer");
    byteLevel(json, false, true);
    json.name("post_processor");
    byteLevel(json, true, false);
    json.name("decoder");
    byteLevel(json, true, true);
    json.name("model").beginObject();
    json.name("type").value("BPE");
    json.name("dropout").nullValue();
    json.name("unk_token").nullValue();
    json.name("continuing_subword_prefix").value("");
    json.name("end_of_word_suffix").value("");
    json.name("fuse_unk").value(false);
    json.name("byte_fallback").value(false);
    json.name("ignore_merges").value(false);
    json.name("vocab").beginObject();
    for (int rank = 0; rank < tokens.size(); rank++) {
      json.name(spell(tokens.get(rank), alphabet)).value(rank);
    }
    json.name(END_OF_TEXT).value(END_OF_TEXT_ID);
    json.endObject();
    json.name("merges").beginArray();
    for (byte[][] merge : merges) {
      json.value(spell(merge[0], alphabet) + " " + spell(merge[1], alphabet));
    }
    json.endArray();
    json.endObject();
    json.endObject();
    json.flush();
  }

  /** A ByteLevel component as GPT-2's file has it (add_prefix_space only matters to the pre-tokenizer). */
  private static void byteLevel(JsonWriter json, boolean addPrefixSpace, boolean trimOffsets) throws IOException {
    json.beginObject()
        .name("type").value("ByteLevel")
        .name("add_prefix_space").value(addPrefixSpace)
        .name("trim_offsets").value(trimOffsets)
        .name("use_regex").value(true)
        .endObject();
  }
}
