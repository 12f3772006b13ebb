package dev.xlaactors.cluster;

import dev.xlaactors.cluster.ShardedComputations.Failed;
import dev.xlaactors.cluster.ShardedComputations.Outputs;
import dev.xlaactors.cluster.ShardedComputations.Reply;
import dev.xlaactors.cluster.ShardedComputations.Run;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.util.function.Function;
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorRefResolver;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.serialization.SerializerWithStringManifest;

/**
 * The binary form of the {@link ShardedComputations} messages: a version byte, then for {@code Run} the
 * reply address and the input tensors, for {@code Outputs} the output tensors, for {@code Failed} the
 * error code and message. Tensors are framed and checked by {@link TensorWire}; a damaged message (bad
 * version, truncated, unknown dtype code, wrong byte count, trailing bytes) is refused with an {@link
 * InvalidArgumentException} saying what was wrong, so it never reaches XLA.
 *
 * <p>Registered in the cluster module's reference.conf. Thread-safe (Pekko shares one instance).
 */
public final class ShardedComputationSerializer extends SerializerWithStringManifest {
  /** Identifier of this serializer (also in reference.conf under serialization-identifiers). */
  public static final int IDENTIFIER = 7403;

  static final String RUN = "R";
  static final String OUTPUTS = "O";
  static final String FAILED = "X";
  private static final byte VERSION = 1;

  private final Function<ActorRef<?>, String> refToString;
  private final Function<String, ActorRef<Reply>> stringToRef;

  /** The constructor Pekko calls. */
  public ShardedComputationSerializer(ExtendedActorSystem system) {
    // The resolver is looked up on first use: the system is still starting when serializers are made.
    this(ref -> ActorRefResolver.get(Adapter.toTyped(system)).toSerializationFormat(ref),
        text -> ActorRefResolver.get(Adapter.toTyped(system)).resolveActorRef(text));
  }

  /** A serializer that writes and reads actor refs with the given functions (for unit tests). */
  ShardedComputationSerializer(Function<ActorRef<?>, String> refToString, Function<String, ActorRef<Reply>> stringToRef) {
    this.refToString = refToString;
    this.stringToRef = stringToRef;
  }

  @Override
  public int identifier() {
    return IDENTIFIER;
  }

  @Override
  public String manifest(Object o) {
    if (o instanceof Run) {
      return RUN;
    }
    if (o instanceof Outputs) {
      return OUTPUTS;
    }
    if (o instanceof Failed) {
      return FAILED;
    }
    throw new IllegalArgumentException("ShardedComputationSerializer cannot serialize " + o.getClass().getName());
  }

  @Override
  public byte[] toBinary(Object o) {
    if (o instanceof Run r) {
      byte[] replyTo = TensorWire.utf8(refToString.apply(r.replyTo()));
      ByteBuffer out = TensorWire.allocate(1 + 4 + replyTo.length + TensorWire.tensorsSize(r.inputs()), "computation run");
      out.put(VERSION).putInt(replyTo.length).put(replyTo);
      TensorWire.putTensors(out, r.inputs());
      return out.array();
    }
    if (o instanceof Outputs s) {
      ByteBuffer out = TensorWire.allocate(1 + TensorWire.tensorsSize(s.outputs()), "computation outputs");
      out.put(VERSION);
      TensorWire.putTensors(out, s.outputs());
      return out.array();
    }
    if (o instanceof Failed f) {
      byte[] message = TensorWire.utf8(f.message());
      ByteBuffer out = ByteBuffer.allocate(1 + 4 + 4 + message.length);
      out.put(VERSION).putInt(f.code().ordinal()).putInt(message.length).put(message);
      return out.array();
    }
    throw new IllegalArgumentException("ShardedComputationSerializer cannot serialize " + o.getClass().getName());
  }

  @Override
  public Object fromBinary(byte[] bytes, String manifest) {
    String what = "sharded computation message (manifest '" + manifest + "')";
    ByteBuffer in = ByteBuffer.wrap(bytes);
    try {
      byte version = in.get();
      if (version != VERSION) {
        throw TensorWire.refused(what, "version " + version + ", expected " + VERSION);
      }
      Object message = switch (manifest) {
        case RUN -> {
          ActorRef<Reply> replyTo = stringToRef.apply(TensorWire.string(in, what, "reply address"));
          yield new Run(TensorWire.tensors(in, what), replyTo);
        }
        case OUTPUTS -> new Outputs(TensorWire.tensors(in, what));
        case FAILED -> {
          int code = in.getInt();
          if (code < 0 || code >= ErrorCode.values().length) {
            throw TensorWire.refused(what, "error code " + code + " is not one of 0.." + (ErrorCode.values().length - 1));
          }
          yield new Failed(ErrorCode.values()[code], TensorWire.string(in, what, "error message"));
        }
        default -> throw new InvalidArgumentException(
            "sharded computation message with unknown manifest '" + manifest + "', expected R, O or X");
      };
      if (in.hasRemaining()) {
        throw TensorWire.refused(what, in.remaining() + " trailing bytes after the message");
      }
      return message;
    } catch (BufferUnderflowException e) {
      throw TensorWire.refused(what, "truncated: it ends after " + bytes.length + " bytes, in the middle of a field");
    }
  }
}
