package dev.xlaactors.cluster;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import java.io.NotSerializableException;
import org.apache.pekko.actor.ExtendedActorSystem;
import org.apache.pekko.serialization.JSerializer;
import org.apache.pekko.serialization.JavaSerializer;
import org.apache.pekko.serialization.Serializer;

/**
 * Pekko's Java serializer slot (serializer id 1, bound as {@code pekko.actor.serializers.java} in the
 * cluster module's reference.conf), so that a Java-serialized message from a peer costs one log event
 * naming the peer. With {@code pekko.actor.allow-java-serialization = off} (Pekko's default and this
 * project's) Pekko's own stand-in logs a warning that does not name the peer, then Artery logs an error
 * naming it; this serializer logs nothing and refuses with an exception that has no stack trace and says
 * why, so Artery's one ERROR event names the peer, and its cause (one line: class and message) the reason.
 * The message is dropped.
 *
 * <p>With {@code allow-java-serialization = on} it is Pekko's {@link JavaSerializer}, unchanged.
 * Thread-safe.
 */
public final class RefusingJavaSerializer extends JSerializer {
  /** Pekko's identifier of Java serialization. */
  public static final int IDENTIFIER = 1;

  private final Serializer allowed;

  /** The constructor Pekko calls. */
  public RefusingJavaSerializer(ExtendedActorSystem system) {
    this.allowed = system.settings().AllowJavaSerialization() ? new JavaSerializer(system) : null;
  }

  @Override
  public int identifier() {
    return IDENTIFIER;
  }

  @Override
  public boolean includeManifest() {
    return allowed != null && allowed.includeManifest();
  }

  @Override
  public byte[] toBinary(Object o) {
    if (allowed != null) {
      return allowed.toBinary(o);
    }
    throw new Refused("refused to send a " + o.getClass().getName() + " with Java serialization, which is off"
        + " (pekko.actor.allow-java-serialization = off): bind a serializer to its class");
  }

  @Override
  public Object fromBinaryJava(byte[] bytes, Class<?> manifest) {
    if (allowed != null) {
      try {
        return allowed.fromBinary(bytes, manifest);
      } catch (NotSerializableException e) {
        throw new XlaException(ErrorCode.INVALID_ARGUMENT, "a Java-serialized message could not be read: " + e.getMessage(), e);
      }
    }
    throw new Refused("refused a Java-serialized message of " + bytes.length + " bytes: Java serialization is off"
        + " (pekko.actor.allow-java-serialization = off); the message was dropped");
  }

  /** The refusal: its message says it all, so it carries no stack trace into the log. */
  static final class Refused extends InvalidArgumentException {
    Refused(String message) {
      super(message);
    }

    @Override
    public synchronized Throwable fillInStackTrace() {
      return this;
    }
  }
}
