package dev.xlaactors.cluster;

import dev.xlaactors.cluster.RemoteCallbackServer.Request;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import java.nio.ByteBuffer;
import java.util.Arrays;
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.serialization.SerializerWithStringManifest;

/**
 * A sender's stand-in for {@link RemoteCallbackSerializer}, under the same identifier (7401), so the
 * receiving node decodes what it writes with the real one: it writes every message as the real
 * serializer does, except a {@link Request} whose first input starts with a marker value, which it
 * damages after encoding. {@link #TRUNCATE}: the last six bytes are cut off; {@link #UNKNOWN_DTYPE}: the
 * first tensor's dtype code is 99; {@link #OTHER_DTYPE}: it is f64's, so the byte count no longer fits.
 *
 * <p>It wraps the real serializer instead of extending it: {@code RemoteCallbackSerializer} is final, and
 * a test has no reason to open it. Selected in a test node's config with {@code
 * pekko.actor.serializers.xla-remote-callback = "dev.xlaactors.cluster.DamagingCallbackSerializer"}.
 */
public final class DamagingCallbackSerializer extends SerializerWithStringManifest {
  static final float TRUNCATE = 1001f;
  static final float UNKNOWN_DTYPE = 1002f;
  static final float OTHER_DTYPE = 1003f;

  private final RemoteCallbackSerializer real;

  /** The constructor Pekko calls. */
  public DamagingCallbackSerializer(ExtendedActorSystem system) {
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
    if (!(o instanceof Request r) || r.inputs().isEmpty() || r.inputs().get(0).dtype() != DType.F32) {
      return bytes;
    }
    HostTensor first = r.inputs().get(0);
    float marker = first.shape().rank() == 1 && first.shape().dims()[0] > 0 ? first.toFloatArray()[0] : 0f;
    if (marker == TRUNCATE) {
      return Arrays.copyOf(bytes, bytes.length - 6);
    }
    if (marker == UNKNOWN_DTYPE || marker == OTHER_DTYPE) {
      bytes[firstDtypeAt(bytes)] = (byte) (marker == UNKNOWN_DTYPE ? 99 : DType.F64.pjrtType());
    }
    return bytes;
  }

  @Override
  public Object fromBinary(byte[] bytes, String manifest) {
    return real.fromBinary(bytes, manifest);
  }

  /** Where a request's first dtype code is: after version, call id, name, reply address, secret and tensor count. */
  private static int firstDtypeAt(byte[] request) {
    ByteBuffer in = ByteBuffer.wrap(request);
    int at = 1 + 8;
    at += 4 + in.getInt(at); // callback name
    at += 4 + in.getInt(at); // reply address
    at += 4 + in.getInt(at); // callback secret
    return at + 4; // tensor count
  }
}
