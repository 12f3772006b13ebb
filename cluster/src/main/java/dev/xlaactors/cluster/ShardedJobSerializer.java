package dev.xlaactors.cluster;

import dev.xlaactors.error.InvalidArgumentException;
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.serialization.SerializerWithStringManifest;

/**
 * The binary form of {@link ShardedBatchJobs.Ensure}, the one job message that crosses nodes: no bytes.
 * Registered in the cluster module's reference.conf (never Java serialization).
 */
public final class ShardedJobSerializer extends SerializerWithStringManifest {
  /** Identifier of this serializer (also in reference.conf under serialization-identifiers). */
  public static final int IDENTIFIER = 7402;
  private static final String ENSURE = "E";
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
    }
    throw new IllegalArgumentException("ShardedJobSerializer cannot serialize " + o.getClass().getName());
  }

  @Override
  public byte[] toBinary(Object o) {
    manifest(o);
    return EMPTY;
  }

  @Override
  public Object fromBinary(byte[] bytes, String manifest) {
    if (!ENSURE.equals(manifest) || bytes.length != 0) {
      throw new InvalidArgumentException("refused batch job message: manifest '" + manifest + "' with " + bytes.length
          + " bytes, expected manifest 'E' with none");
    }
    return new ShardedBatchJobs.Ensure();
  }
}
