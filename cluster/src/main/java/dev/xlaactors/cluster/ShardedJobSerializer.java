package dev.xlaactors.cluster;

import dev.xlaactors.error.InvalidArgumentException;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.TreeMap;
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.serialization.SerializerWithStringManifest;

/**
 * The binary form of the batch job messages that leave a JVM: {@link ShardedBatchJobs.Ensure} (sent
 * between nodes; no bytes) and what the job journal stores ({@link ShardedBatchJobs.ItemScored}, {@link
 * ShardedBatchJobs.JobEnded}, {@link ShardedBatchJobs.JobSnapshot}). Registered in the cluster module's
 * reference.conf (never Java serialization).
 *
 * <p>Layout, big-endian: ItemScored is the item (int64) and the line (int32 length, UTF-8); JobEnded is a
 * completed flag (one byte, 0 or 1) and the summary (length, UTF-8); JobSnapshot is an ended flag (0, or 1
 * followed by a JobEnded), the line count (int32) and that many (item, line) pairs in item order. Bytes
 * that do not parse exactly (truncated, trailing, a negative length, invalid UTF-8, unknown manifest) are
 * refused with an {@link InvalidArgumentException} saying what was expected.
 */
public final class ShardedJobSerializer extends SerializerWithStringManifest {
  /** Identifier of this serializer (also in reference.conf under serialization-identifiers). */
  public static final int IDENTIFIER = 7402;
  private static final String ENSURE = "E";
  private static final String ITEM_SCORED = "I";
  private static final String JOB_ENDED = "J";
  private static final String SNAPSHOT = "S";
  private static final byte[] EMPTY = new byte[0];

  /** The constructor Pekko calls. */
  public ShardedJobSerializer(ExtendedActorSystem system) {}

  @Override
  public int identifier() {
    return IDENTIFIER;
  }

  @Override
  public String manifest(Object o) {
    if (o instanceof ShardedBatchJobs.Ensure) {
      return ENSURE;
    } else if (o instanceof ShardedBatchJobs.ItemScored) {
      return ITEM_SCORED;
    } else if (o instanceof ShardedBatchJobs.JobEnded) {
      return JOB_ENDED;
    } else if (o instanceof ShardedBatchJobs.JobSnapshot) {
      return SNAPSHOT;
    }
    throw new IllegalArgumentException("ShardedJobSerializer cannot serialize " + o.getClass().getName());
  }

  @Override
  public byte[] toBinary(Object o) {
    if (o instanceof ShardedBatchJobs.Ensure) {
      return EMPTY;
    }
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (DataOutputStream out = new DataOutputStream(bytes)) {
      if (o instanceof ShardedBatchJobs.ItemScored e) {
        out.writeLong(e.item());
        writeString(out, e.line());
      } else if (o instanceof ShardedBatchJobs.JobEnded e) {
        writeEnded(out, e);
      } else if (o instanceof ShardedBatchJobs.JobSnapshot s) {
        out.writeByte(s.ended().isPresent() ? 1 : 0);
        if (s.ended().isPresent()) {
          writeEnded(out, s.ended().get());
        }
        out.writeInt(s.lines().size());
        for (var line : s.lines().entrySet()) {
          out.writeLong(line.getKey());
          writeString(out, line.getValue());
        }
      } else {
        manifest(o); // throws: not ours
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return bytes.toByteArray();
  }

  @Override
  public Object fromBinary(byte[] bytes, String manifest) {
    ByteBuffer in = ByteBuffer.wrap(bytes);
    try {
      Object message = switch (manifest) {
        case ENSURE -> new ShardedBatchJobs.Ensure();
        case ITEM_SCORED -> new ShardedBatchJobs.ItemScored(readIndex(in), readString(in));
        case JOB_ENDED -> readEnded(in);
        case SNAPSHOT -> {
          Optional<ShardedBatchJobs.JobEnded> ended = readFlag(in, "ended flag") ? Optional.of(readEnded(in)) : Optional.empty();
          int count = in.getInt();
          if (count < 0) {
            throw new InvalidArgumentException("refused batch job snapshot: " + count + " lines, expected a count >= 0");
          }
          if (count > in.remaining() / 12) { // each line is at least an index and a length
            throw new InvalidArgumentException("refused batch job snapshot: " + count + " lines, but only " + in.remaining()
                + " bytes follow (at least 12 per line)");
          }
          TreeMap<Long, String> lines = new TreeMap<>();
          for (int i = 0; i < count; i++) {
            long index = readIndex(in);
            if (lines.put(index, readString(in)) != null) {
              throw new InvalidArgumentException("refused batch job snapshot: item " + index + " appears twice; a snapshot holds each item once");
            }
          }
          yield new ShardedBatchJobs.JobSnapshot(lines, ended);
        }
        default -> throw new InvalidArgumentException("refused batch job message: unknown manifest '" + manifest
            + "', expected one of E (Ensure), I (ItemScored), J (JobEnded), S (JobSnapshot)");
      };
      if (in.hasRemaining()) {
        throw new InvalidArgumentException("refused batch job message '" + manifest + "': " + in.remaining()
            + " bytes after its end, expected " + in.position() + " bytes in all");
      }
      return message;
    } catch (BufferUnderflowException e) {
      throw new InvalidArgumentException("refused batch job message '" + manifest + "': truncated at " + bytes.length
          + " bytes");
    }
  }

  private static void writeEnded(DataOutputStream out, ShardedBatchJobs.JobEnded e) throws IOException {
    out.writeByte(e.completed() ? 1 : 0);
    writeString(out, e.summary());
  }

  private static ShardedBatchJobs.JobEnded readEnded(ByteBuffer in) {
    return new ShardedBatchJobs.JobEnded(readFlag(in, "completed flag"), readString(in));
  }

  private static long readIndex(ByteBuffer in) {
    long index = in.getLong();
    if (index < 0) {
      throw new InvalidArgumentException("refused batch job message: item index " + index + ", expected an index >= 0");
    }
    return index;
  }

  private static boolean readFlag(ByteBuffer in, String what) {
    byte b = in.get();
    if (b != 0 && b != 1) {
      throw new InvalidArgumentException("refused batch job message: " + what + " is " + b + ", expected 0 or 1");
    }
    return b == 1;
  }

  private static void writeString(DataOutputStream out, String s) throws IOException {
    byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
    out.writeInt(utf8.length);
    out.write(utf8);
  }

  private static String readString(ByteBuffer in) {
    int length = in.getInt();
    if (length < 0 || length > in.remaining()) {
      throw new InvalidArgumentException("refused batch job message: a string of " + length + " bytes, expected 0 to "
          + in.remaining() + " (the bytes left)");
    }
    ByteBuffer utf8 = in.slice().limit(length);
    in.position(in.position() + length);
    try {
      return StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(utf8)
          .toString();
    } catch (CharacterCodingException e) {
      throw new InvalidArgumentException("refused batch job message: a string that is not valid UTF-8");
    }
  }
}
