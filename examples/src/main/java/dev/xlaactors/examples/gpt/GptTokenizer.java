package dev.xlaactors.examples.gpt;

import com.knuddels.jtokkit.Encodings;
import com.knuddels.jtokkit.api.Encoding;
import com.knuddels.jtokkit.api.EncodingType;
import com.knuddels.jtokkit.api.IntArrayList;
import dev.xlaactors.error.InvalidArgumentException;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;

/**
 * GPT-2's byte-pair encoding ({@code r50k_base}, 50,257 tokens) from JTokkit, whose jar holds the merge
 * table: nothing is downloaded. Thread-safe; {@link Decoder} is one stream's and is not.
 */
public final class GptTokenizer {
  /** GPT-2's end-of-text token. */
  public static final int END_OF_TEXT = 50256;

  private final Encoding encoding = Encodings.newLazyEncodingRegistry().getEncoding(EncodingType.R50K_BASE);

  /** The tokens of {@code text}; a clear error for empty text. */
  public int[] encode(String text) {
    if (text == null || text.isEmpty()) {
      throw new InvalidArgumentException("the prompt is empty: give some text to continue");
    }
    return encoding.encodeOrdinary(text).toArray();
  }

  /** The text of {@code tokens}. */
  public String decode(int[] tokens) {
    return new String(bytes(tokens), StandardCharsets.UTF_8);
  }

  /** The UTF-8 bytes of {@code tokens} (a token may hold part of a character). */
  byte[] bytes(int[] tokens) {
    IntArrayList list = new IntArrayList(tokens.length);
    for (int t : tokens) {
      list.add(t);
    }
    return encoding.decodeBytes(list);
  }

  /** A decoder for a token stream: a character split over two tokens is printed once it is whole. */
  public Decoder decoder() {
    return new Decoder();
  }

  /** Turns streamed tokens into text, holding back the bytes of an incomplete UTF-8 character. */
  public final class Decoder {
    private final ByteArrayOutputStream pending = new ByteArrayOutputStream();

    private Decoder() {}

    /** The text that {@code token} completes (possibly empty). */
    public String next(int token) {
      pending.writeBytes(bytes(new int[] {token}));
      byte[] all = pending.toByteArray();
      int whole = completePrefix(all);
      pending.reset();
      pending.write(all, whole, all.length - whole);
      return new String(all, 0, whole, StandardCharsets.UTF_8);
    }

    private static int completePrefix(byte[] b) {
      // Walk back over at most 3 continuation bytes to the last lead byte; keep it back if its character is short.
      int i = b.length - 1;
      int back = 0;
      while (i >= 0 && back < 3 && (b[i] & 0xC0) == 0x80) {
        i--;
        back++;
      }
      if (i < 0) {
        return b.length;
      }
      int lead = b[i] & 0xFF;
      int need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
      return b.length - i >= need ? b.length : i;
    }
  }

  static void checkVocabulary(int vocab) {
    if (vocab < END_OF_TEXT + 1) {
      throw new InvalidArgumentException("the model's vocabulary has " + vocab + " tokens, GPT-2's tokenizer needs 50257");
    }
  }
}
