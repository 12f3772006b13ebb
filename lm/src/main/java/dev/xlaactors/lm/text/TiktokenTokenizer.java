package dev.xlaactors.lm.text;

import com.knuddels.jtokkit.Encodings;
import com.knuddels.jtokkit.api.Encoding;
import com.knuddels.jtokkit.api.EncodingRegistry;
import com.knuddels.jtokkit.api.EncodingType;
import com.knuddels.jtokkit.api.IntArrayList;
import dev.xlaactors.error.InvalidArgumentException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;

/**
 * OpenAI's tiktoken byte-pair encodings ({@code r50k_base} = GPT-2, {@code cl100k_base},
 * {@code o200k_base}) through JTokkit, whose jar holds the ranks: nothing is read from disk or the
 * network.
 *
 * <p>tiktoken has no template, so {@code addSpecialTokens} changes nothing. Special-token text in the
 * input becomes the special token (JTokkit refuses such text in {@code encode}, so the text is split at
 * special tokens here and the pieces are encoded as ordinary text). Thread-safe; {@link #close()} does
 * nothing.
 */
public final class TiktokenTokenizer implements Tokenizer {
  /** The encodings offered, by name, with their special tokens (tiktoken's tables). */
  private static final Map<String, Map<String, Integer>> SPECIAL_TOKENS = Map.of(
      "r50k_base", Map.of("<|endoftext|>", 50256),
      "cl100k_base", Map.of(
          "<|endoftext|>", 100257,
          "<|fim_prefix|>", 100258,
          "<|fim_middle|>", 100259,
          "<|fim_suffix|>", 100260,
          "<|endofprompt|>", 100276),
      "o200k_base", Map.of("<|endoftext|>", 199999, "<|endofprompt|>", 200018));

  /** One lazy registry: an encoding's ranks are read from the jar the first time it is asked for. */
  private static final EncodingRegistry REGISTRY = Encodings.newLazyEncodingRegistry();

  private final String name;
  private final Encoding encoding;
  private final Map<String, Integer> specialTokens;
  private final Map<Integer, String> specialTokenText = new LinkedHashMap<>();
  private final int vocabularySize;

  private TiktokenTokenizer(String name, Encoding encoding, Map<String, Integer> specialTokens) {
    this.name = name;
    this.encoding = encoding;
    this.specialTokens = specialTokens;
    specialTokens.forEach((text, id) -> specialTokenText.put(id, text));
    // tiktoken's n_vocab: the special tokens have the highest ids.
    this.vocabularySize = specialTokens.values().stream().mapToInt(Integer::intValue).max().orElseThrow() + 1;
  }

  /**
   * The encoding named {@code encodingName}: {@code r50k_base}, {@code cl100k_base} or {@code o200k_base}.
   *
   * @throws InvalidArgumentException for any other name
   */
  public static TiktokenTokenizer of(String encodingName) {
    Map<String, Integer> special = SPECIAL_TOKENS.get(encodingName);
    if (special == null) {
      throw new InvalidArgumentException("unknown tiktoken encoding '" + encodingName + "': expected one of "
          + knownEncodings() + " (for another vocabulary, open its tokenizer.json with HuggingFaceTokenizer)");
    }
    EncodingType type = EncodingType.fromName(encodingName).orElseThrow();
    return new TiktokenTokenizer(encodingName, REGISTRY.getEncoding(type), special);
  }

  /** The encoding names {@link #of(String)} accepts, sorted. */
  public static List<String> knownEncodings() {
    return SPECIAL_TOKENS.keySet().stream().sorted().toList();
  }

  /** The encoding's name, e.g. {@code r50k_base}. */
  public String encodingName() {
    return name;
  }

  @Override
  public int[] encode(String text, boolean addSpecialTokens) {
    if (text == null) {
      throw new InvalidArgumentException("text to encode is null: pass \"\" for no text");
    }
    IntArrayList ids = new IntArrayList();
    int start = 0;
    while (start < text.length()) {
      int bestAt = -1;
      String best = null;
      for (String special : specialTokens.keySet()) {
        int at = text.indexOf(special, start);
        if (at >= 0 && (bestAt < 0 || at < bestAt)) {
          bestAt = at;
          best = special;
        }
      }
      int end = bestAt < 0 ? text.length() : bestAt;
      if (end > start) {
        IntArrayList piece = encoding.encodeOrdinary(text.substring(start, end));
        for (int i = 0; i < piece.size(); i++) {
          ids.add(piece.get(i));
        }
      }
      if (best == null) {
        break;
      }
      ids.add(specialTokens.get(best));
      start = bestAt + best.length();
    }
    return ids.toArray();
  }

  @Override
  public String decode(int[] ids, boolean skipSpecialTokens) {
    return new String(bytes(ids, skipSpecialTokens), StandardCharsets.UTF_8);
  }

  /** The tokens' own bytes: tiktoken's tokens are byte sequences, not always whole characters. */
  @Override
  public byte[] decodeBytes(int[] ids) {
    return bytes(ids, false);
  }

  private byte[] bytes(int[] ids, boolean skipSpecialTokens) {
    if (ids == null) {
      throw new InvalidArgumentException("ids to decode are null: pass new int[0] for no tokens");
    }
    IntArrayList list = new IntArrayList(ids.length);
    for (int i = 0; i < ids.length; i++) {
      int id = ids[i];
      if (id < 0 || id >= vocabularySize) {
        throw new InvalidArgumentException("token id " + id + " at index " + i + " is outside " + name
            + "'s vocabulary [0, " + vocabularySize + "): decode only ids this tokenizer produced");
      }
      if (!(skipSpecialTokens && specialTokenText.containsKey(id))) {
        list.add(id);
      }
    }
    try {
      return encoding.decodeBytes(list);
    } catch (NullPointerException e) {
      // JTokkit's way of saying an id inside the range has no token (the ranks have gaps).
      throw new InvalidArgumentException(name + " has no token for an id in " + Arrays.toString(ids)
          + " (" + e.getMessage() + "): decode only ids this tokenizer produced");
    }
  }

  @Override
  public int vocabularySize() {
    return vocabularySize;
  }

  @Override
  public OptionalInt tokenId(String token) {
    Integer special = specialTokens.get(token);
    if (special != null) {
      return OptionalInt.of(special);
    }
    if (token == null || token.isEmpty()) {
      return OptionalInt.empty();
    }
    IntArrayList ids = encoding.encodeOrdinary(token);
    return ids.size() == 1 ? OptionalInt.of(ids.get(0)) : OptionalInt.empty();
  }

  /** Nothing to release: the ranks live on the heap, shared by every instance. */
  @Override
  public void close() {}

  @Override
  public String toString() {
    return "TiktokenTokenizer[" + name + ", " + vocabularySize + " ids]";
  }
}
