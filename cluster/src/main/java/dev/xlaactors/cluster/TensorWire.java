package dev.xlaactors.cluster;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The wire form of tensors and strings shared by the cluster module's serializers. Big-endian framing; a
 * tensor is its dtype code ({@link DType#pjrtType()}), its rank and dimensions, the byte count and the raw
 * little-endian element bytes, exactly as {@link HostTensor} holds them. Reading checks every field and
 * refuses a damaged one with an {@link InvalidArgumentException} that starts with {@code refused
 * <message>:} and says what was wrong, so a damaged tensor never reaches a function or XLA.
 */
final class TensorWire {
  /** PJRT arrays have at most this many dimensions in practice; more is a damaged message. */
  private static final int MAX_RANK = 64;

  private TensorWire() {}

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

  /** Reads what {@link #putTensors} wrote; {@code message} names the message in errors. */
  static List<HostTensor> tensors(ByteBuffer in, String message) {
    int count = in.getInt();
    // Each tensor takes at least 10 bytes, which bounds a damaged count before anything is allocated.
    if (count < 0 || count > in.remaining() / 10) {
      throw refused(message, "tensor count " + count + " does not fit the " + in.remaining() + " bytes left");
    }
    List<HostTensor> tensors = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      tensors.add(tensor(in, message, i, count));
    }
    return tensors;
  }

  private static HostTensor tensor(ByteBuffer in, String message, int index, int count) {
    String which = "tensor " + index + " of " + count;
    int code = in.get();
    DType dtype;
    try {
      dtype = DType.fromPjrtType(code);
    } catch (XlaException e) {
      throw refused(message, which + " has dtype code " + code + ", which is no dtype; known codes: " + knownCodes());
    }
    int rank = in.get();
    if (rank < 0 || rank > MAX_RANK) {
      throw refused(message, which + " has rank " + rank + ", expected 0.." + MAX_RANK);
    }
    long[] dims = new long[rank];
    for (int d = 0; d < rank; d++) {
      dims[d] = in.getLong();
      if (dims[d] < 0) {
        throw refused(message, which + " has dimension " + d + " of " + dims[d] + ", expected >= 0");
      }
    }
    TensorType type = TensorType.of(dtype, dims);
    long bytes = in.getLong();
    if (bytes != type.byteSize()) {
      throw refused(message, which + " (" + type + ") carries " + bytes + " bytes, expected " + type.byteSize());
    }
    if (bytes > in.remaining()) {
      throw refused(message, which + " (" + type + ") is truncated: " + bytes + " bytes of data expected, "
          + in.remaining() + " left");
    }
    ByteBuffer data = in.slice().limit((int) bytes);
    in.position(in.position() + (int) bytes);
    return HostTensor.of(type, data);
  }

  /** A length-prefixed UTF-8 string; {@code what} names the field in errors. */
  static String string(ByteBuffer in, String message, String what) {
    int length = in.getInt();
    if (length < 0 || length > in.remaining()) {
      throw refused(message, "the " + what + " claims " + length + " bytes, " + in.remaining() + " left");
    }
    byte[] bytes = new byte[length];
    in.get(bytes);
    return new String(bytes, StandardCharsets.UTF_8);
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  /** A heap buffer of {@code size} bytes for a message named {@code what}; over 2 GiB is refused. */
  static ByteBuffer allocate(long size, String what) {
    if (size > Integer.MAX_VALUE - 16) {
      throw new InvalidArgumentException("a " + what + " of " + size + " bytes is over the 2 GiB a message can take");
    }
    return ByteBuffer.allocate((int) size);
  }

  static InvalidArgumentException refused(String message, String what) {
    return new InvalidArgumentException("refused " + message + ": " + what);
  }

  private static String knownCodes() {
    StringBuilder s = new StringBuilder();
    for (DType t : DType.values()) {
      s.append(s.length() == 0 ? "" : ", ").append(t.pjrtType()).append('=').append(t.shortName());
    }
    return s.toString();
  }
}
