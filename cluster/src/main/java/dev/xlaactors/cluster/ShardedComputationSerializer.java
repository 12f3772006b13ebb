package dev.xlaactors.cluster;

import static dev.xlaactors.cluster.TensorWireFormat.errorCode;
import static dev.xlaactors.cluster.TensorWireFormat.putString;
import static dev.xlaactors.cluster.TensorWireFormat.putTensors;
import static dev.xlaactors.cluster.TensorWireFormat.readMessage;
import static dev.xlaactors.cluster.TensorWireFormat.string;
import static dev.xlaactors.cluster.TensorWireFormat.tensors;
import static dev.xlaactors.cluster.TensorWireFormat.tensorsSize;
import static dev.xlaactors.cluster.TensorWireFormat.utf8;

import dev.xlaactors.cluster.ShardedComputations.Accepted;
import dev.xlaactors.cluster.ShardedComputations.Failed;
import dev.xlaactors.cluster.ShardedComputations.Outputs;
import dev.xlaactors.cluster.ShardedComputations.Reply;
import dev.xlaactors.cluster.ShardedComputations.Run;
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
 * The binary form of the {@link ShardedComputations} messages that cross nodes ({@link Run} inside
 * sharding's envelope, and the {@link Reply} messages), never Java serialization. Big-endian; every
 * message starts with a version byte and the request id (int64); tensors and strings are written by
 * {@link TensorWireFormat}, the same framing as {@link RemoteCallbackSerializer}'s.
 *
 * <ul>
 *   <li>{@code R} Run: the reply address (string), the inputs (tensors).
 *   <li>{@code A} Accepted: the node's address (string).
 *   <li>{@code O} Outputs: the outputs (tensors).
 *   <li>{@code F} Failed: the error code (int32, an {@link ErrorCode} ordinal), the message (string).
 * </ul>
 *
 * <p>Decoding is strict: a truncated message, an unknown dtype code, a byte count that does not fit the
 * type, an unknown error code or trailing bytes are refused with an {@link InvalidArgumentException}
 * saying what was wrong, so a damaged tensor never reaches XLA. Registered in the cluster module's
 * reference.conf. Thread-safe (Pekko shares one instance).
 */
public final class ShardedComputationSerializer extends SerializerWithStringManifest {
  /** Identifier of this serializer (also in reference.conf under serialization-identifiers). */
  public static final int IDENTIFIER = 7403;

  static final String RUN = "R";
  static final String ACCEPTED = "A";
  static final String OUTPUTS = "O";
  static final String FAILED = "F";
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
    } else if (o instanceof Accepted) {
      return ACCEPTED;
    } else if (o instanceof Outputs) {
      return OUTPUTS;
    } else if (o instanceof Failed) {
      return FAILED;
    }
    throw new IllegalArgumentException("ShardedComputationSerializer cannot serialize " + o.getClass().getName());
  }

  @Override
  public byte[] toBinary(Object o) {
    if (o instanceof Run r) {
      byte[] replyTo = utf8(refToString.apply(r.replyTo()));
      ByteBuffer out = allocate(1 + 8 + 4 + replyTo.length + tensorsSize(r.inputs()));
      out.put(VERSION).putLong(r.requestId());
      putString(out, replyTo);
      putTensors(out, r.inputs());
      return out.array();
    } else if (o instanceof Accepted a) {
      byte[] node = utf8(a.node());
      ByteBuffer out = allocate(1 + 8 + 4 + node.length);
      out.put(VERSION).putLong(a.requestId());
      putString(out, node);
      return out.array();
    } else if (o instanceof Outputs outputs) {
      ByteBuffer out = allocate(1 + 8 + tensorsSize(outputs.outputs()));
      out.put(VERSION).putLong(outputs.requestId());
      putTensors(out, outputs.outputs());
      return out.array();
    } else if (o instanceof Failed f) {
      byte[] message = utf8(f.message());
      ByteBuffer out = allocate(1 + 8 + 4 + 4 + message.length);
      out.put(VERSION).putLong(f.requestId()).putInt(f.code().ordinal());
      putString(out, message);
      return out.array();
    }
    throw new IllegalArgumentException("ShardedComputationSerializer cannot serialize " + o.getClass().getName());
  }

  @Override
  public Object fromBinary(byte[] bytes, String manifest) {
    String what = "sharded computation message (manifest '" + manifest + "')";
    return readMessage(bytes, VERSION, what, in -> switch (manifest) {
      case RUN -> {
        long requestId = in.getLong();
        ActorRef<Reply> replyTo = stringToRef.apply(string(in, what, "reply address"));
        yield new Run(requestId, tensors(in, what), replyTo);
      }
      case ACCEPTED -> new Accepted(in.getLong(), string(in, what, "node address"));
      case OUTPUTS -> {
        long requestId = in.getLong();
        yield new Outputs(requestId, tensors(in, what));
      }
      case FAILED -> {
        long requestId = in.getLong();
        ErrorCode code = errorCode(in, what);
        yield new Failed(requestId, code, string(in, what, "error message"));
      }
      default -> throw new InvalidArgumentException("sharded computation message with unknown manifest '" + manifest
          + "'; known: " + List.of(RUN, ACCEPTED, OUTPUTS, FAILED));
    });
  }

  private static ByteBuffer allocate(long size) {
    return TensorWireFormat.allocate(size, "sharded computation message");
  }
}
