package dev.xlaactors.cluster;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.UnrecoverableKeyException;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.apache.pekko.actor.typed.ActorSystem;

/**
 * How the nodes of a cluster keep others out, read once from {@code xla-actors.cluster.security} (see the
 * cluster module's reference.conf and docs/cluster.md, "Secure a cluster"). With {@code tls = on} nodes talk
 * over Pekko's {@code tls-tcp} transport with mutual authentication: a process without a certificate signed
 * by the cluster's CA can neither join nor send a node anything. The key stores are opened here, at start,
 * so a missing file, a wrong password or a key store without a key is an {@link XlaException} naming the
 * key and the file, not a failed TLS handshake later.
 *
 * <p>{@link #toString} hides the passwords and the secret.
 *
 * @param tls whether nodes talk TLS with mutual authentication
 * @param keyStore this node's key store (private key and certificate); null when {@code tls} is off
 * @param keyStorePassword its password
 * @param keyPassword the private key's password (the key store's when the key is empty)
 * @param trustStore the key store of the CA certificate(s) a peer's certificate must be signed by
 * @param trustStorePassword its password
 * @param callbackSecret the secret callback requests carry and servers check
 */
public record ClusterSecuritySettings(
    boolean tls,
    Path keyStore,
    String keyStorePassword,
    String keyPassword,
    Path trustStore,
    String trustStorePassword,
    CallbackSecret callbackSecret) {
  private static final String ROOT = "xla-actors.cluster.security";
  private static final String HOW_TO_MAKE = "tools/cluster-certs.sh makes them (docs/cluster.md, \"Secure a cluster\")";

  /** Settings from the actor system's config. */
  public static ClusterSecuritySettings create(ActorSystem<?> system) {
    return fromConfig(system.settings().config());
  }

  /** Settings from {@code config}; with {@code tls = on} both key stores are opened and checked. */
  public static ClusterSecuritySettings fromConfig(Config config) {
    try {
      Config c = config.getConfig(ROOT);
      CallbackSecret secret = CallbackSecret.of(c.getString("callback-secret"));
      if (!c.getBoolean("tls")) {
        return new ClusterSecuritySettings(false, null, "", "", null, "", secret);
      }
      Path keyStore = file(c, "key-store", "this node's key store (its private key and certificate)");
      String keyStorePassword = c.getString("key-store-password");
      String keyPassword = c.getString("key-password").isEmpty() ? keyStorePassword : c.getString("key-password");
      Path trustStore = file(c, "trust-store", "the trust store holding the cluster CA's certificate");
      String trustStorePassword = c.getString("trust-store-password");
      KeyStore keys = open(keyStore, "key-store", "key-store-password", keyStorePassword);
      checkPrivateKey(keys, keyStore, keyPassword, c.getString("key-password").isEmpty());
      KeyStore trusted = open(trustStore, "trust-store", "trust-store-password", trustStorePassword);
      checkTrusted(trusted, trustStore);
      return new ClusterSecuritySettings(true, keyStore, keyStorePassword, keyPassword, trustStore, trustStorePassword, secret);
    } catch (ConfigException e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, "bad cluster security configuration: " + e.getMessage(), e);
    }
  }

  /**
   * The Pekko settings for these: Artery's {@code tls-tcp} transport with Pekko's config-based SSL engine,
   * mutual authentication required, when {@code tls} is on; nothing otherwise.
   */
  public Config pekkoOverrides() {
    if (!tls) {
      return ConfigFactory.empty();
    }
    String engine = "pekko.remote.artery.ssl.config-ssl-engine.";
    return ConfigFactory.parseMap(Map.of(
            "pekko.remote.artery.transport", "tls-tcp",
            "pekko.remote.artery.ssl.ssl-engine-provider", "org.apache.pekko.remote.artery.tcp.ConfigSSLEngineProvider",
            engine + "key-store", keyStore.toString(),
            engine + "key-store-password", keyStorePassword,
            engine + "key-password", keyPassword,
            engine + "trust-store", trustStore.toString(),
            engine + "trust-store-password", trustStorePassword,
            engine + "require-mutual-authentication", true),
        ROOT);
  }

  @Override
  public String toString() {
    return "ClusterSecuritySettings[tls=" + tls + ", keyStore=" + keyStore + ", trustStore=" + trustStore
        + ", passwords hidden, callbackSecret=" + callbackSecret + "]";
  }

  private static Path file(Config c, String key, String what) {
    String value = c.getString(key);
    if (value.isBlank()) {
      throw invalid(key + " is empty; with " + ROOT + ".tls = on it must name " + what + "; " + HOW_TO_MAKE);
    }
    Path path = Path.of(value).toAbsolutePath().normalize();
    if (!Files.isRegularFile(path) || !Files.isReadable(path)) {
      throw invalid(key + " names " + path + ", which " + (Files.exists(path) ? "is not a readable file" : "does not exist")
          + "; it must name " + what + "; " + HOW_TO_MAKE);
    }
    return path;
  }

  private static KeyStore open(Path file, String key, String passwordKey, String password) {
    try {
      // The type (PKCS12 or JKS) is read from the file, as Pekko's engine does with the JDK's default type.
      return KeyStore.getInstance(file.toFile(), password.toCharArray());
    } catch (IOException e) {
      if (e.getCause() instanceof UnrecoverableKeyException) {
        throw invalid(passwordKey + " does not open " + key + " " + file + " (wrong password)");
      }
      throw invalid(key + " " + file + " could not be read as a key store (PKCS12 or JKS): " + e.getMessage()
          + "; " + HOW_TO_MAKE);
    } catch (GeneralSecurityException e) {
      throw invalid(key + " " + file + " is no key store (PKCS12 or JKS): " + e.getMessage() + "; " + HOW_TO_MAKE);
    }
  }

  private static void checkPrivateKey(KeyStore keys, Path file, String password, boolean sameAsStore) {
    try {
      List<String> aliases = Collections.list(keys.aliases());
      for (String alias : aliases) {
        if (keys.isKeyEntry(alias)) {
          try {
            keys.getKey(alias, password.toCharArray());
          } catch (UnrecoverableKeyException e) {
            throw invalid((sameAsStore ? "key-password is empty and key-store-password" : "key-password")
                + " does not open the private key '" + alias + "' in key-store " + file + " (wrong password)");
          }
          return;
        }
      }
      throw invalid("key-store " + file + " holds no private key (entries: " + aliases + "); it must hold this node's"
          + " private key and certificate; " + HOW_TO_MAKE);
    } catch (GeneralSecurityException e) {
      throw invalid("key-store " + file + " could not be read: " + e);
    }
  }

  private static void checkTrusted(KeyStore trusted, Path file) {
    try {
      for (String alias : Collections.list(trusted.aliases())) {
        if (trusted.isCertificateEntry(alias)) {
          return;
        }
      }
      throw invalid("trust-store " + file + " holds no trusted certificate; it must hold the cluster CA's certificate; "
          + HOW_TO_MAKE);
    } catch (GeneralSecurityException e) {
      throw invalid("trust-store " + file + " could not be read: " + e);
    }
  }

  private static XlaException invalid(String message) {
    return new XlaException(ErrorCode.INVALID_ARGUMENT, ROOT + "." + message);
  }
}
