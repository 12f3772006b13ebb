package dev.xlaactors.cluster;

import dev.xlaactors.cluster.RemoteCallbackServer.Refused;
import dev.xlaactors.cluster.RemoteCallbackServer.Reply;
import dev.xlaactors.cluster.RemoteCallbackServer.Request;
import dev.xlaactors.cluster.RemoteCallbackServer.Served;
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
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorRefResolver;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.serialization.SerializerWithStringManifest;

/**
 * The binary form of the {@link RemoteCallbackServer} messages, so tensors cross JVMs without Java
 * serialization. Big-endian framing; a tensor is its dtype code ({@link DType#pjrtType()}), its rank and
 * dimensions, the byte count and the raw little-endian element bytes, exactly as {@link HostTensor} holds
 * them. Decoding checks everything (version, dtype code, rank, dimensions, byte count against the type,
 * no missing and no trailing bytes) and refuses a bad message with an {@link InvalidArgumentException}
 * that says what was wrong, so a damaged tensor never reaches a callback or XLA.
 *
 * <p>Registered in the cluster module's reference.conf. Thread-safe (Pekko shares one instance).
 */
public final class RemoteCallbackSerializer extends SerializerWithStringManifest {
  /** Identifier of this serializer (also in reference.conf under serialization-identifiers). */
  public static final int IDENTIFIER = 7401;

  static final String REQUEST = "Q";
  static final String SERVED = "S";
  static final String REFUSED = "F";
  private static final byte VERSION = 1;
  /** PJRT arrays have at most this many dimensions in practice; more is a damaged message. */
  private static final int MAX_RANK = 64;

  private final Function<ActorRef<?>, String> refToString;
  private final Function<String, ActorRef<Reply>> stringToRef;

  /** The constructor Pekko calls. */
  public RemoteCallbackSerializer(ExtendedActorSystem system) {
    // The resolver is looked up on first use: the system is still starting when serializers are made.
    this(ref -> ActorRefResolver.get(Adapter.toTyped(system)).toSerializationFormat(ref),
        text -> ActorRefResolver.get(Adapter.toTyped(system)).resolveActorRef(text));
  }

  /** A serializer that writes and reads actor refs with the given functions (for unit tests). */
  RemoteCallbackSerializer(Function<ActorRef<?>, String> refToString, Function<String, ActorRef<Reply>> stringToRef) {
    this.refToString = refToString;
    this.stringToRef = stringToRef;
  }

  @Override
  public int identifier() {
    return IDENTIFIER;
  }

  @Override
  public String manifest(Object o) {
    if (o instanceof Request) {
      return REQUEST;
    }
    if (o instanceof Served) {
      return SERVED;
    }
    if (o instanceof Refused) {
      return REFUSED;
    }
    throw new IllegalArgumentException("RemoteCallbackSerializer cannot serialize " + o.getClass().getName());
  }

  @Override
  public byte[] toBinary(Object o) {
    if (o instanceof Request r) {
      byte[] name = utf8(r.callbackName());
      byte[] replyTo = utf8(refToString.apply(r.replyTo()));
      ByteBuffer out = allocate(1 + 8 + 4 + name.length + 4 + replyTo.length + tensorsSize(r.inputs()));
      out.put(VERSION).putLong(r.callId());
      out.putInt(name.length).put(name).putInt(replyTo.length).put(replyTo);
      putTensors(out, r.inputs());
      return out.array();
    }
    if (o instanceof Served s) {
      ByteBuffer out = allocate(1 + 8 + tensorsSize(s.outputs()));
      out.put(VERSION).putLong(s.callId());
      putTensors(out, s.outputs());
      return out.array();
    }
    if (o instanceof Refused f) {
      byte[] message = utf8(f.message());
      ByteBuffer out = allocate(1 + 8 + 4 + 4 + message.length);
      out.put(VERSION).putLong(f.callId()).putInt(f.code().ordinal()).putInt(message.length).put(message);
      return out.array();
    }
    throw new IllegalArgumentException("RemoteCallbackSerializer cannot serialize " + o.getClass().getName());
  }

  @Override
  public Object fromBinary(byte[] bytes, String manifest) {
    ByteBuffer in = ByteBuffer.wrap(bytes);
    try {
      byte version = in.get();
      if (version != VERSION) {
        throw refused(manifest, "version " + version + ", expected " + VERSION);
      }
      Object message = switch (manifest) {
        case REQUEST -> {
          long callId = in.getLong();
          String name = string(in, manifest, "callback name");
          ActorRef<Reply> replyTo = stringToRef.apply(string(in, manifest, "reply address"));
          yield new Request(callId, name, tensors(in, manifest), replyTo);
        }
        case SERVED -> {
          long callId = in.getLong();
          yield new Served(callId, tensors(in, manifest));
        }
        case REFUSED -> refusedReply(in, manifest);
        default -> throw new InvalidArgumentException("remote callback message with unknown manifest '" + manifest
            + "'; known: " + List.of(REQUEST, SERVED, REFUSED));
      };
      if (in.hasRemaining()) {
        throw refused(manifest, in.remaining() + " trailing bytes after the message");
      }
      return message;
    } catch (BufferUnderflowException e) {
      throw refused(manifest, "truncated: it ends after " + bytes.length + " bytes, in the middle of a field");
    }
  }

  private static Refused refusedReply(ByteBuffer in, String manifest) {
    long callId = in.getLong();
    int code = in.getInt();
    if (code < 0 || code >= ErrorCode.values().length) {
      throw refused(manifest, "error code " + code + " is not one of 0.." + (ErrorCode.values().length - 1));
    }
    return new Refused(callId, ErrorCode.values()[code], string(in, manifest, "error message"));
  }

  private static long tensorsSize(List<HostTensor> tensors) {
    long size = 4;
    for (HostTensor t : tensors) {
      size += 1 + 1 + 8L * t.shape().rank() + 8 + t.type().byteSize();
    }
    return size;
  }

  private static void putTensors(ByteBuffer out, List<HostTensor> tensors) {
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

  private static List<HostTensor> tensors(ByteBuffer in, String manifest) {
    int count = in.getInt();
    // Each tensor takes at least 10 bytes, which bounds a damaged count before anything is allocated.
    if (count < 0 || count > in.remaining() / 10) {
      throw refused(manifest, "tensor count " + count + " does not fit the " + in.remaining() + " bytes left");
    }
    List<HostTensor> tensors = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      tensors.add(tensor(in, manifest, i, count));
    }
    return tensors;
  }

  private static HostTensor tensor(ByteBuffer in, String manifest, int index, int count) {
    String which = "tensor " + index + " of " + count;
    int code = in.get();
    DType dtype;
    try {
      dtype = DType.fromPjrtType(code);
    } catch (XlaException e) {
      throw refused(manifest, which + " has dtype code " + code + ", which is no dtype; known codes: " + knownCodes());
    }
    int rank = in.get();
    if (rank < 0 || rank > MAX_RANK) {
      throw refused(manifest, which + " has rank " + rank + ", expected 0.." + MAX_RANK);
    }
    long[] dims = new long[rank];
    for (int d = 0; d < rank; d++) {
      dims[d] = in.getLong();
      if (dims[d] < 0) {
        throw refused(manifest, which + " has dimension " + d + " of " + dims[d] + ", expected >= 0");
      }
    }
    TensorType type = TensorType.of(dtype, dims);
    long bytes = in.getLong();
    if (bytes != type.byteSize()) {
      throw refused(manifest, which + " (" + type + ") carries " + bytes + " bytes, expected " + type.byteSize());
    }
    if (bytes > in.remaining()) {
      throw refused(manifest, which + " (" + type + ") is truncated: " + bytes + " bytes of data expected, "
          + in.remaining() + " left");
    }
    ByteBuffer data = in.slice().limit((int) bytes);
    in.position(in.position() + (int) bytes);
    return HostTensor.of(type, data);
  }

  private static String string(ByteBuffer in, String manifest, String what) {
    int length = in.getInt();
    if (length < 0 || length > in.remaining()) {
      throw refused(manifest, "the " + what + " claims " + length + " bytes, " + in.remaining() + " left");
    }
    byte[] bytes = new byte[length];
    in.get(bytes);
    return new String(bytes, StandardCharsets.UTF_8);
  }

  private static String knownCodes() {
    StringBuilder s = new StringBuilder();
    for (DType t : DType.values()) {
      s.append(s.length() == 0 ? "" : ", ").append(t.pjrtType()).append('=').append(t.shortName());
    }
    return s.toString();
  }

  private static InvalidArgumentException refused(String manifest, String what) {
    return new InvalidArgumentException("refused remote callback message (manifest '" + manifest + "'): " + what);
  }

  private static ByteBuffer allocate(long size) {
    if (size > Integer.MAX_VALUE - 16) {
      throw new InvalidArgumentException("a remote callback message of " + size + " bytes is over the 2 GiB a message can take");
    }
    return ByteBuffer.allocate((int) size);
  }

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
