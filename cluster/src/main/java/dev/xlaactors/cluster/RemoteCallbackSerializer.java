package dev.xlaactors.cluster;

import static dev.xlaactors.cluster.TensorWireFormat.bytes;
import static dev.xlaactors.cluster.TensorWireFormat.errorCode;
import static dev.xlaactors.cluster.TensorWireFormat.putString;
import static dev.xlaactors.cluster.TensorWireFormat.putTensors;
import static dev.xlaactors.cluster.TensorWireFormat.readMessage;
import static dev.xlaactors.cluster.TensorWireFormat.string;
import static dev.xlaactors.cluster.TensorWireFormat.tensors;
import static dev.xlaactors.cluster.TensorWireFormat.tensorsSize;
import static dev.xlaactors.cluster.TensorWireFormat.utf8;

import dev.xlaactors.cluster.RemoteCallbackServer.Refused;
import dev.xlaactors.cluster.RemoteCallbackServer.Reply;
import dev.xlaactors.cluster.RemoteCallbackServer.Request;
import dev.xlaactors.cluster.RemoteCallbackServer.Served;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.function.Function;
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorRefResolver;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.serialization.SerializerWithStringManifest;

/**
 * The binary form of the {@link RemoteCallbackServer} messages, so tensors cross JVMs without Java
 * serialization. Big-endian framing; tensors are written by {@link TensorWireFormat} (a tensor is its
 * dtype code ({@link DType#pjrtType()}), its rank and dimensions, the byte count and the raw little-endian
 * element bytes, exactly as {@link HostTensor} holds them). Decoding checks everything (version, dtype
 * code, rank, dimensions, byte count against the type, no missing and no trailing bytes) and refuses a
 * bad message with an {@link InvalidArgumentException} that says what was wrong, so a damaged tensor
 * never reaches a callback or XLA.
 *
 * <p>Registered in the cluster module's reference.conf. Thread-safe (Pekko shares one instance).
 */
public final class RemoteCallbackSerializer extends SerializerWithStringManifest {
  /** Identifier of this serializer (also in reference.conf under serialization-identifiers). */
  public static final int IDENTIFIER = 7401;

  static final String REQUEST = "Q";
  static final String SERVED = "S";
  static final String REFUSED = "F";
  // 2: requests carry the callback secret (length and bytes) after the reply address.
  private static final byte VERSION = 2;

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
      byte[] secret = r.secret().bytes();
      ByteBuffer out = allocate(1 + 8 + 4 + name.length + 4 + replyTo.length + 4 + secret.length + tensorsSize(r.inputs()));
      out.put(VERSION).putLong(r.callId());
      putString(out, name);
      putString(out, replyTo);
      putString(out, secret);
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
      out.put(VERSION).putLong(f.callId()).putInt(f.code().ordinal());
      putString(out, message);
      return out.array();
    }
    throw new IllegalArgumentException("RemoteCallbackSerializer cannot serialize " + o.getClass().getName());
  }

  @Override
  public Object fromBinary(byte[] bytes, String manifest) {
    String what = what(manifest);
    return readMessage(bytes, VERSION, what, in -> switch (manifest) {
      case REQUEST -> {
        long callId = in.getLong();
        String name = string(in, what, "callback name");
        ActorRef<Reply> replyTo = stringToRef.apply(string(in, what, "reply address"));
        CallbackSecret secret = CallbackSecret.ofBytes(bytes(in, what, "callback secret"));
        yield new Request(callId, name, tensors(in, what), replyTo, secret);
      }
      case SERVED -> {
        long callId = in.getLong();
        yield new Served(callId, tensors(in, what));
      }
      case REFUSED -> {
        long callId = in.getLong();
        ErrorCode code = errorCode(in, what);
        yield new Refused(callId, code, string(in, what, "error message"));
      }
      default -> throw new InvalidArgumentException("remote callback message with unknown manifest '" + manifest
          + "'; known: " + List.of(REQUEST, SERVED, REFUSED));
    });
  }

  /** How errors name a message of {@code manifest}. */
  private static String what(String manifest) {
    return "remote callback message (manifest '" + manifest + "')";
  }

  private static ByteBuffer allocate(long size) {
    return TensorWireFormat.allocate(size, "remote callback message");
  }
}
