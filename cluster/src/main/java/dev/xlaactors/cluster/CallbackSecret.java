package dev.xlaactors.cluster;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Objects;

/**
 * The shared secret that callback requests carry ({@code xla-actors.cluster.security.callback-secret}):
 * a {@link RemoteCallbackServer} whose node has one serves only requests that carry the same. Compared in
 * constant time (SHA-256 digests of both, so neither the content nor the length leaks through timing);
 * never printed ({@link #toString} hides it, so a logged or dead-lettered request does not show it).
 *
 * <p>It crosses the network inside each request: over plain TCP anyone on the path can read it, so use
 * it with TLS ({@code security.tls = on}). Immutable and thread-safe.
 */
public final class CallbackSecret {
  /** No secret: requests carry none, and a server without one serves them. */
  public static final CallbackSecret NONE = new CallbackSecret(new byte[0]);

  private final byte[] bytes;

  private CallbackSecret(byte[] bytes) {
    this.bytes = bytes;
  }

  /** The secret {@code text} (its UTF-8 bytes); the empty string is {@link #NONE}. */
  public static CallbackSecret of(String text) {
    Objects.requireNonNull(text, "text");
    return text.isEmpty() ? NONE : new CallbackSecret(text.getBytes(StandardCharsets.UTF_8));
  }

  /** The secret read off the wire. */
  static CallbackSecret ofBytes(byte[] bytes) {
    return bytes.length == 0 ? NONE : new CallbackSecret(bytes.clone());
  }

  /** Whether this is {@link #NONE}. */
  public boolean isNone() {
    return bytes.length == 0;
  }

  /** Whether {@code other} is the same secret, compared in constant time. */
  public boolean matches(CallbackSecret other) {
    return MessageDigest.isEqual(sha256(bytes), sha256(other.bytes));
  }

  /** The bytes to put on the wire. */
  byte[] bytes() {
    return bytes.clone();
  }

  @Override
  public String toString() {
    return isNone() ? "CallbackSecret(none)" : "CallbackSecret(hidden)";
  }

  private static byte[] sha256(byte[] b) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(b);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java platform has SHA-256", e);
    }
  }
}
