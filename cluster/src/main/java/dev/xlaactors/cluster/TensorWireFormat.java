package dev.xlaactors.cluster;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/**
 * How the cluster module's serializers write tensors and strings into a message, and read them back
 * strictly. Big-endian framing; a list of tensors is its count (int32), then per tensor its dtype code
 * ({@link DType#pjrtType()}, one byte), its rank (one byte), its dimensions (int64 each), its byte count
 * (int64) and the raw little-endian element bytes, exactly as {@link HostTensor} holds them. A string is
 * its UTF-8 length (int32) and bytes.
 *
 * <p>Reading checks everything (dtype code, rank, dimensions, byte count against the type, no missing
 * bytes) and refuses bad bytes with an {@link InvalidArgumentException} {@code "refused <what>: <what was
 * wrong>"}, where {@code what} names the message being read; a {@link BufferUnderflowException} from a
 * field cut short is left to {@link #readMessage}, which knows the whole message's length. Stateless.
 */
final class TensorWireFormat {
  private TensorWireFormat() {}

  /** PJRT arrays have at most this many dimensions in practice; more is a damaged message. */
  static final int MAX_RANK = 64;

  /** The bytes {@link #putTensors} writes for {@code tensors}. */
  static long tensorsSize(List<HostTensor> tensors) {
    long size = 4;
    for (HostTensor t : tensors) {
      size += 1 + 1 + 8L * t.shape().rank() + 8 + t.type().byteSize();
    }
    return size;
  }

  static void putTensors(ByteBuffer out, List<HostTensor> tensors) {
    out.putInt(tensors.size());
    for (HostTensor t : tensors) {
      long[] dims = t.shape().dims();
      out.put((byte) t.dtype().pjrtType()).put((byte) dims.length);
      for (long d : dims) {
        out.putLong(d);
      }
      out.putLong(t.type().byteSize());
      out.put(t.data().duplicate());
    }
  }

  /** Reads a list of tensors written by {@link #putTensors}; {@code what} names the message in errors. */
  static List<HostTensor> tensors(ByteBuffer in, String what) {
    int count = in.getInt();
    // Each tensor takes at least 10 bytes, which bounds a damaged count before anything is allocated.
    if (count < 0 || count > in.remaining() / 10) {
      throw refused(what, "tensor count " + count + " does not fit the " + in.remaining() + " bytes left");
    }
    List<HostTensor> tensors = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      tensors.add(tensor(in, what, i, count));
    }
    return tensors;
  }

  private static HostTensor tensor(ByteBuffer in, String what, int index, int count) {
    String which = "tensor " + index + " of " + count;
    int code = in.get();
    DType dtype;
    try {
      dtype = DType.fromPjrtType(code);
    } catch (XlaException e) {
      throw refused(what, which + " has dtype code " + code + ", which is no dtype; known codes: " + knownCodes());
    }
    int rank = in.get();
    if (rank < 0 || rank > MAX_RANK) {
      throw refused(what, which + " has rank " + rank + ", expected 0.." + MAX_RANK);
    }
    long[] dims = new long[rank];
    for (int d = 0; d < rank; d++) {
      dims[d] = in.getLong();
      if (dims[d] < 0) {
        throw refused(what, which + " has dimension " + d + " of " + dims[d] + ", expected >= 0");
      }
    }
    TensorType type = TensorType.of(dtype, dims);
    long bytes = in.getLong();
    if (bytes != type.byteSize()) {
      throw refused(what, which + " (" + type + ") carries " + bytes + " bytes, expected " + type.byteSize());
    }
    if (bytes > in.remaining()) {
      throw refused(what, which + " (" + type + ") is truncated: " + bytes + " bytes of data expected, "
          + in.remaining() + " left");
    }
    ByteBuffer data = in.slice().limit((int) bytes);
    in.position(in.position() + (int) bytes);
    return HostTensor.of(type, data);
  }

  /** Writes a string, given as its UTF-8 bytes, as their length and the bytes. */
  static void putString(ByteBuffer out, byte[] utf8) {
    out.putInt(utf8.length).put(utf8);
  }

  /** Reads a string written by {@link #putString}; {@code field} names it in errors. */
  static String string(ByteBuffer in, String what, String field) {
    return new String(bytes(in, what, field), StandardCharsets.UTF_8);
  }

  /** Reads the bytes of a field written by {@link #putString}; {@code field} names it in errors. */
  static byte[] bytes(ByteBuffer in, String what, String field) {
    int length = in.getInt();
    if (length < 0 || length > in.remaining()) {
      throw refused(what, "the " + field + " claims " + length + " bytes, " + in.remaining() + " left");
    }
    byte[] bytes = new byte[length];
    in.get(bytes);
    return bytes;
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  /** A buffer of {@code size} bytes for a message, refused when a message cannot be that big. */
  static ByteBuffer allocate(long size, String what) {
    if (size > Integer.MAX_VALUE - 16) {
      throw new InvalidArgumentException("a " + what + " of " + size + " bytes is over the 2 GiB a message can take");
    }
    return ByteBuffer.allocate((int) size);
  }

  /**
   * Reads a whole message of {@code bytes}: its version byte (refused unless it is {@code version}), the
   * rest with {@code body}, then nothing more (trailing bytes are refused); a field cut short is refused
   * as truncated.
   */
  static Object readMessage(byte[] bytes, byte version, String what, Function<ByteBuffer, Object> body) {
    ByteBuffer in = ByteBuffer.wrap(bytes);
    try {
      byte got = in.get();
      if (got != version) {
        throw refused(what, "version " + got + ", expected " + version);
      }
      Object message = body.apply(in);
      if (in.hasRemaining()) {
        throw refused(what, in.remaining() + " trailing bytes after the message");
      }
      return message;
    } catch (BufferUnderflowException e) {
      throw refused(what, "truncated: it ends after " + bytes.length + " bytes, in the middle of a field");
    }
  }

  /** Reads an {@link ErrorCode} written as its ordinal (int32), refusing a number that is none. */
  static ErrorCode errorCode(ByteBuffer in, String what) {
    int code = in.getInt();
    if (code < 0 || code >= ErrorCode.values().length) {
      throw refused(what, "error code " + code + " is not one of 0.." + (ErrorCode.values().length - 1));
    }
    return ErrorCode.values()[code];
  }

  static InvalidArgumentException refused(String what, String wrong) {
    return new InvalidArgumentException("refused " + what + ": " + wrong);
  }

  private static String knownCodes() {
    StringBuilder s = new StringBuilder();
    for (DType t : DType.values()) {
      s.append(s.length() == 0 ? "" : ", ").append(t.pjrtType()).append('=').append(t.shortName());
    }
    return s.toString();
  }
}
