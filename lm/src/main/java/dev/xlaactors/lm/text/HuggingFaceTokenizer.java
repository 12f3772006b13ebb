package dev.xlaactors.lm.text;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import com.google.gson.JsonParser;
import com.google.gson.stream.JsonReader;
import com.google.gson.stream.JsonToken;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A Hugging Face {@code tokenizer.json} run by the Rust {@code tokenizers} library through DJL (whose
 * jar carries the native library: nothing is downloaded).
 *
 * <p>DJL's defaults are not ours: it truncates to 512 tokens and pads unless told otherwise, and its
 * one-argument {@code encode}/{@code decode} add special tokens and then skip them. So truncation and
 * padding are switched off when the tokenizer is built, and every call passes
 * {@code addSpecialTokens}/{@code skipSpecialTokens} explicitly. The vocabulary size and the special
 * tokens' ids (which DJL does not expose) are read from the same file's {@code model.vocab} and
 * {@code added_tokens}.
 *
 * <p>On first use DJL copies its native library out of the jar into its cache folder
 * ({@code ~/.djl.ai/tokenizers}, or {@code DJL_CACHE_DIR}); a host without a writable home sets that.
 *
 * <p>Thread-safe (the Rust tokenizer is immutable once built); {@link #close()} frees the native
 * tokenizer once, and any call after it fails with {@link IllegalStateException}.
 */
public final class HuggingFaceTokenizer implements Tokenizer {
  private final Path file;
  private final ai.djl.huggingface.tokenizers.HuggingFaceTokenizer tokenizer;
  private final Map<String, Integer> wholeTokens;
  /**
   * Each id's own bytes, for a byte-level vocabulary (GPT-2's spelling of bytes) or a SentencePiece-style one
   * ("▁" for a space, {@code <0xNN>} pieces for bytes); else null.
   */
  private final byte[][] tokenBytes;
  private final int vocabularySize;
  private final AtomicBoolean closed = new AtomicBoolean();

  private HuggingFaceTokenizer(Path file, ai.djl.huggingface.tokenizers.HuggingFaceTokenizer tokenizer,
      Map<String, Integer> wholeTokens, byte[][] tokenBytes, int vocabularySize) {
    this.file = file;
    this.tokenizer = tokenizer;
    this.wholeTokens = wholeTokens;
    this.tokenBytes = tokenBytes;
    this.vocabularySize = vocabularySize;
  }

  /**
   * The tokenizer in {@code tokenizerJson} (a {@code tokenizer.json} file, or a folder holding one).
   *
   * @throws XlaException {@link ErrorCode#NOT_FOUND} when the file is missing or unreadable
   * @throws InvalidArgumentException when it is not a tokenizer the library can build
   */
  public static HuggingFaceTokenizer open(Path tokenizerJson) {
    Path file = Files.isDirectory(tokenizerJson) ? tokenizerJson.resolve("tokenizer.json") : tokenizerJson;
    JsonObject root = parse(file);
    Map<String, Integer> wholeTokens = new HashMap<>();
    int maxId = readVocabulary(file, root, wholeTokens);
    if (maxId < 0) {
      throw invalid(file, "its model has no vocabulary", null);
    }
    ai.djl.huggingface.tokenizers.HuggingFaceTokenizer djl = build(file);
    byte[][] bytes = byteLevelTokens(root, wholeTokens, maxId + 1);
    if (bytes == null) {
      bytes = sentencePieceTokens(root, wholeTokens, maxId + 1);
    }
    return new HuggingFaceTokenizer(file, djl, Map.copyOf(wholeTokens), bytes, maxId + 1);
  }

  /**
   * The file's top-level object, read as a stream and without {@code model.merges}: BPE's merge list, half of
   * a GPT-2 tokenizer.json, which only the tokenizers library reads. A whole tree of the file (and the file as
   * one string beside it) made opening GPT-2's tokenizer touch about 40 MB of heap more than this does.
   */
  private static JsonObject parse(Path file) {
    try (JsonReader reader = new JsonReader(Files.newBufferedReader(file, StandardCharsets.UTF_8))) {
      if (reader.peek() != JsonToken.BEGIN_OBJECT) {
        throw invalid(file, "its top level is not a JSON object", null);
      }
      JsonObject root = new JsonObject();
      reader.beginObject();
      while (reader.hasNext()) {
        String name = reader.nextName();
        if (name.equals("model") && reader.peek() == JsonToken.BEGIN_OBJECT) {
          JsonObject model = new JsonObject();
          reader.beginObject();
          while (reader.hasNext()) {
            String key = reader.nextName();
            if (key.equals("merges")) {
              reader.skipValue();
            } else {
              model.add(key, JsonParser.parseReader(reader));
            }
          }
          reader.endObject();
          root.add(name, model);
        } else {
          root.add(name, JsonParser.parseReader(reader));
        }
      }
      reader.endObject();
      reader.peek(); // the reader is strict: anything after the object fails here as malformed JSON
      return root;
    } catch (NoSuchFileException e) {
      throw new XlaException(ErrorCode.NOT_FOUND, "tokenizer file " + file.toAbsolutePath()
          + " does not exist: expected a Hugging Face tokenizer.json (the model package's tokenizer entry)", e);
    } catch (JsonParseException | IllegalStateException | java.io.EOFException
        | com.google.gson.stream.MalformedJsonException e) { // gson's malformed-JSON failures
      throw invalid(file, "it is not valid JSON (" + e.getMessage() + ")", e);
    } catch (IOException e) {
      throw new XlaException(ErrorCode.NOT_FOUND, "tokenizer file " + file.toAbsolutePath()
          + " cannot be read (" + e + "): expected a readable Hugging Face tokenizer.json", e);
    }
  }

  /**
   * Fills {@code ids} with the model's vocabulary (an object {@code token -> id} for BPE, WordPiece and
   * WordLevel; a list of {@code [piece, score]} for Unigram) and then the added tokens, which win; returns
   * the highest id.
   */
  private static int readVocabulary(Path file, JsonObject root, Map<String, Integer> ids) {
    int maxId = -1;
    try {
      JsonElement model = root.get("model");
      JsonElement vocab = model != null && model.isJsonObject() ? model.getAsJsonObject().get("vocab") : null;
      if (vocab != null && vocab.isJsonObject()) {
        for (Map.Entry<String, JsonElement> e : vocab.getAsJsonObject().entrySet()) {
          int id = e.getValue().getAsInt();
          ids.put(e.getKey(), id);
          maxId = Math.max(maxId, id);
        }
      } else if (vocab != null && vocab.isJsonArray()) {
        JsonArray pieces = vocab.getAsJsonArray();
        for (int id = 0; id < pieces.size(); id++) {
          ids.put(pieces.get(id).getAsJsonArray().get(0).getAsString(), id);
        }
        maxId = pieces.size() - 1;
      }
      JsonElement added = root.get("added_tokens");
      if (added != null && added.isJsonArray()) {
        for (JsonElement token : added.getAsJsonArray()) {
          JsonObject t = token.getAsJsonObject();
          int id = t.get("id").getAsInt();
          ids.put(t.get("content").getAsString(), id);
          maxId = Math.max(maxId, id);
        }
      }
    } catch (RuntimeException e) { // gson's IllegalStateException/ClassCastException/NumberFormatException
      throw invalid(file, "its model.vocab or added_tokens is malformed (" + e.getMessage() + ")", e);
    }
    return maxId;
  }

  /**
   * Each id's bytes when the decoder is {@code ByteLevel} (GPT-2's byte-level BPE: every byte spelled as
   * one printable character), so {@link #decodeBytes} can give part of a character; null otherwise, or
   * when a vocabulary entry is not spelled that way. Added tokens are their text in UTF-8.
   */
  private static byte[][] byteLevelTokens(JsonObject root, Map<String, Integer> ids, int size) {
    JsonElement decoder = root.get("decoder");
    if (decoder == null || !decoder.isJsonObject() || decoder.getAsJsonObject().get("type") == null
        || !"ByteLevel".equals(decoder.getAsJsonObject().get("type").getAsString())) {
      return null;
    }
    Map<Character, Byte> byteOf = new HashMap<>();
    int extra = 0;
    for (int b = 0; b < 256; b++) { // GPT-2's bytes_to_unicode
      boolean printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      byteOf.put((char) (printable ? b : 256 + extra++), (byte) b);
    }
    java.util.Set<String> added = addedTokens(root);
    byte[][] out = new byte[size][];
    for (Map.Entry<String, Integer> e : ids.entrySet()) {
      String token = e.getKey();
      byte[] bytes = new byte[token.length()];
      for (int i = 0; i < token.length() && !added.contains(token); i++) {
        Byte b = byteOf.get(token.charAt(i));
        if (b == null) {
          return null; // not a byte-level spelling: decode's text is all there is
        }
        bytes[i] = b;
      }
      out[e.getValue()] = added.contains(token) ? token.getBytes(StandardCharsets.UTF_8) : bytes;
    }
    return out;
  }

  /**
   * Each id's bytes when the decoder is SentencePiece's (Llama 2, Gemma, Mistral: a {@code Replace} of "▁" by
   * a space or a {@code Metaspace}, with {@code ByteFallback} when the vocabulary has {@code <0xNN>} pieces):
   * a piece is its text with "▁" as a space, a byte piece its byte; so {@link #decodeBytes} gives a byte
   * piece that holds part of a character, which decode alone turns into U+FFFD, and a piece's leading space,
   * which decode drops at the start of a text. Added tokens are their text in UTF-8. Null for other decoders.
   */
  private static byte[][] sentencePieceTokens(JsonObject root, Map<String, Integer> ids, int size) {
    JsonElement decoder = root.get("decoder");
    if (decoder == null || !decoder.isJsonObject()) {
      return null;
    }
    List<JsonObject> steps = new ArrayList<>();
    JsonObject d = decoder.getAsJsonObject();
    if ("Sequence".equals(type(d)) && d.get("decoders") != null && d.get("decoders").isJsonArray()) {
      d.getAsJsonArray("decoders").forEach(e -> steps.add(e.isJsonObject() ? e.getAsJsonObject() : new JsonObject()));
    } else {
      steps.add(d);
    }
    boolean metaspace = false;
    boolean byteFallback = false;
    for (JsonObject step : steps) {
      String type = type(step);
      if ("Metaspace".equals(type)) {
        metaspace = true;
      } else if ("ByteFallback".equals(type)) {
        byteFallback = true;
      } else if ("Replace".equals(type) && step.get("pattern") != null && step.get("pattern").isJsonObject()) {
        JsonElement pattern = step.getAsJsonObject("pattern").get("String");
        JsonElement content = step.get("content");
        metaspace |= pattern != null && "\u2581".equals(pattern.getAsString()) && content != null && " ".equals(content.getAsString());
      }
    }
    if (!metaspace) {
      return null;
    }
    java.util.Set<String> added = addedTokens(root);
    byte[][] out = new byte[size][];
    for (Map.Entry<String, Integer> e : ids.entrySet()) {
      String token = e.getKey();
      if (added.contains(token)) {
        out[e.getValue()] = token.getBytes(StandardCharsets.UTF_8);
      } else if (byteFallback && token.length() == 6 && token.startsWith("<0x") && token.endsWith(">")) {
        try {
          out[e.getValue()] = new byte[] {(byte) Integer.parseInt(token.substring(3, 5), 16)};
        } catch (NumberFormatException notAByte) {
          out[e.getValue()] = token.getBytes(StandardCharsets.UTF_8);
        }
      } else {
        out[e.getValue()] = token.replace('\u2581', ' ').getBytes(StandardCharsets.UTF_8);
      }
    }
    return out;
  }

  private static String type(JsonObject o) {
    JsonElement t = o.get("type");
    return t != null && t.isJsonPrimitive() ? t.getAsString() : null;
  }

  private static java.util.Set<String> addedTokens(JsonObject root) {
    java.util.Set<String> added = new java.util.HashSet<>();
    JsonElement addedTokens = root.get("added_tokens");
    if (addedTokens != null && addedTokens.isJsonArray()) {
      addedTokens.getAsJsonArray().forEach(t -> added.add(t.getAsJsonObject().get("content").getAsString()));
    }
    return added;
  }

  private static ai.djl.huggingface.tokenizers.HuggingFaceTokenizer build(Path file) {
    optOutOfDjlTelemetry();
    Map<String, String> options = Map.of(
        "addSpecialTokens", "false",
        "truncation", "false",
        "padding", "false");
    try (java.io.InputStream json = Files.newInputStream(file)) {
      return ai.djl.huggingface.tokenizers.HuggingFaceTokenizer.newInstance(json, options);
    } catch (IOException | RuntimeException e) {
      throw invalid(file, "the tokenizers library refused it (" + e.getMessage() + ")", e);
    }
  }

  /**
   * DJL probes the EC2 metadata service on the first tokenizer it builds (telemetry; up to three
   * one-second HTTP attempts). This library makes no network calls, so it opts out unless the
   * application has said otherwise through the same switch.
   */
  private static void optOutOfDjlTelemetry() {
    if (System.getenv("OPT_OUT_TRACKING") == null && System.getProperty("OPT_OUT_TRACKING") == null) {
      System.setProperty("OPT_OUT_TRACKING", "true");
    }
  }

  private static InvalidArgumentException invalid(Path file, String what, Throwable cause) {
    InvalidArgumentException e = new InvalidArgumentException("tokenizer file " + file.toAbsolutePath()
        + " is not a usable Hugging Face tokenizer.json: " + what
        + "; expected the tokenizer.json saved by tokenizers/transformers (save_pretrained)");
    if (cause != null) {
      e.initCause(cause);
    }
    return e;
  }

  /** The file this tokenizer was read from. */
  public Path file() {
    return file;
  }

  @Override
  public int[] encode(String text, boolean addSpecialTokens) {
    checkOpen();
    if (text == null) {
      throw new InvalidArgumentException("text to encode is null: pass \"\" for no text");
    }
    long[] ids = tokenizer.encode(text, addSpecialTokens, false).getIds();
    int[] out = new int[ids.length];
    for (int i = 0; i < ids.length; i++) {
      out[i] = (int) ids[i];
    }
    return out;
  }

  @Override
  public String decode(int[] ids, boolean skipSpecialTokens) {
    checkOpen();
    if (ids == null) {
      throw new InvalidArgumentException("ids to decode are null: pass new int[0] for no tokens");
    }
    long[] wide = new long[ids.length];
    for (int i = 0; i < ids.length; i++) {
      if (ids[i] < 0 || ids[i] >= vocabularySize) {
        throw new InvalidArgumentException("token id " + ids[i] + " at index " + i + " is outside the vocabulary [0, "
            + vocabularySize + ") of " + file + ": decode only ids this tokenizer produced");
      }
      wide[i] = ids[i];
    }
    return tokenizer.decode(wide, skipSpecialTokens);
  }

  /**
   * For a byte-level or SentencePiece-style vocabulary the tokens' own bytes (part of a character too, a
   * piece's leading space too); else {@link #decode}'s text in UTF-8.
   */
  @Override
  public byte[] decodeBytes(int[] ids) {
    if (tokenBytes == null) {
      return Tokenizer.super.decodeBytes(ids);
    }
    decode(ids, false); // checks the ids, as decode does
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    for (int id : ids) {
      byte[] b = tokenBytes[id];
      out.writeBytes(b != null ? b : decode(new int[] {id}, false).getBytes(StandardCharsets.UTF_8));
    }
    return out.toByteArray();
  }

  @Override
  public int vocabularySize() {
    return vocabularySize;
  }

  @Override
  public OptionalInt tokenId(String token) {
    Integer id = wholeTokens.get(token);
    return id == null ? OptionalInt.empty() : OptionalInt.of(id);
  }

  @Override
  public void close() {
    if (closed.compareAndSet(false, true)) {
      tokenizer.close();
    }
  }

  private void checkOpen() {
    if (closed.get()) {
      throw new IllegalStateException("the tokenizer of " + file + " is closed");
    }
  }

  @Override
  public String toString() {
    return "HuggingFaceTokenizer[" + file + ", " + vocabularySize + " ids]";
  }
}
