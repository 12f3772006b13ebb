package dev.xlaactors.cluster;

import dev.xlaactors.cluster.RemoteCallbackServer.Request;
import dev.xlaactors.runtime.DType;
import java.nio.ByteBuffer;
import java.util.Arrays;
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.serialization.SerializerWithStringManifest;

/**
 * A test stand-in for {@link RemoteCallbackSerializer} under its identifier, so the receiving node decodes
 * with the real one: it damages the requests whose first input element is {@link #TRUNCATE} (the last 3
 * bytes cut off) or {@link #BAD_DTYPE} (the first tensor's dtype code set to 99), and passes every other
 * message through unchanged.
 */
public final class CorruptingCallbackSerializer extends SerializerWithStringManifest {
  static final float TRUNCATE = 77f;
  static final float BAD_DTYPE = 78f;

  private final RemoteCallbackSerializer real;

  public CorruptingCallbackSerializer(ExtendedActorSystem system) {
    this.real = new RemoteCallbackSerializer(system);
  }

  @Override
  public int identifier() {
    return RemoteCallbackSerializer.IDENTIFIER;
  }

  @Override
  public String manifest(Object o) {
    return real.manifest(o);
  }

  @Override
  public byte[] toBinary(Object o) {
    byte[] bytes = real.toBinary(o);
    if (o instanceof Request r && !r.inputs().isEmpty() && r.inputs().get(0).dtype() == DType.F32) {
      float first = r.inputs().get(0).toFloatArray()[0];
      if (first == TRUNCATE) {
        return Arrays.copyOf(bytes, bytes.length - 3);
      }
      if (first == BAD_DTYPE) {
        ByteBuffer in = ByteBuffer.wrap(bytes);
        int at = 1 + 8; // version, call id
        at += 4 + in.getInt(at); // callback name
        at += 4 + in.getInt(at); // reply address
        at += 4; // tensor count: the first tensor's dtype code follows
        bytes[at] = 99;
      }
    }
    return bytes;
  }

  @Override
  public Object fromBinary(byte[] bytes, String manifest) {
    return real.fromBinary(bytes, manifest);
  }
}
