package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code xla-actors.cluster.security}: key stores made by tools/cluster-certs.sh are accepted and become
 * Pekko's tls-tcp settings; every way of getting them wrong fails at start with a message naming the key
 * and the file; passwords and the secret never show in toString.
 */
class ClusterSecuritySettingsTest {
  private static final String PASSWORD = "unit-test-password";
  private static final String ROOT = "xla-actors.cluster.security.";

  @TempDir static Path dir;
  private static Path keyStore;
  private static Path trustStore;

  @BeforeAll
  static void makeCertificates() throws Exception {
    Path script = Path.of("..", "tools", "cluster-certs.sh").toAbsolutePath().normalize();
    ProcessBuilder pb = new ProcessBuilder("bash", script.toString(), dir.resolve("certs").toString(), "10.0.0.5")
        .redirectErrorStream(true).redirectOutput(dir.resolve("certs.log").toFile());
    pb.environment().put("CLUSTER_CERTS_PASSWORD", PASSWORD);
    Process p = pb.start();
    assertTrue(p.waitFor(120, TimeUnit.SECONDS) && p.exitValue() == 0, () -> read(dir.resolve("certs.log")));
    keyStore = dir.resolve("certs/10.0.0.5.p12");
    trustStore = dir.resolve("certs/truststore.p12");
    assertEquals(keyStore + "\n" + trustStore + "\n", read(dir.resolve("certs.log")));
    assertFalse(Files.exists(dir.resolve("certs/password")), "no password file when the password is given");
  }

  @Test
  void offByDefaultWithNoSecret() {
    ClusterSecuritySettings s = ClusterSecuritySettings.fromConfig(ConfigFactory.load());
    assertFalse(s.tls());
    assertTrue(s.callbackSecret().isNone());
    assertTrue(s.pekkoOverrides().isEmpty());
  }

  @Test
  void keyStoresOfTheScriptBecomePekkosTlsSettingsAndPasswordsStayHidden() {
    ClusterSecuritySettings s = ClusterSecuritySettings.fromConfig(tls(""));
    Config pekko = s.pekkoOverrides();
    assertEquals("tls-tcp", pekko.getString("pekko.remote.artery.transport"));
    assertEquals("org.apache.pekko.remote.artery.tcp.ConfigSSLEngineProvider", pekko.getString("pekko.remote.artery.ssl.ssl-engine-provider"));
    Config engine = pekko.getConfig("pekko.remote.artery.ssl.config-ssl-engine");
    assertEquals(keyStore.toString(), engine.getString("key-store"));
    assertEquals(trustStore.toString(), engine.getString("trust-store"));
    assertEquals(PASSWORD, engine.getString("key-password"), "an empty key-password is the key store's");
    assertTrue(engine.getBoolean("require-mutual-authentication"));
    ClusterSecuritySettings withSecret = ClusterSecuritySettings.fromConfig(
        ConfigFactory.parseString(ROOT + "callback-secret = \"very-secret\"").withFallback(tls("")));
    assertFalse(withSecret.toString().contains(PASSWORD), withSecret::toString);
    assertFalse(withSecret.toString().contains("very-secret"), withSecret::toString);
    assertTrue(withSecret.callbackSecret().matches(CallbackSecret.of("very-secret")));
  }

  @Test
  void aMissingKeyStoreOrTrustStoreIsNamed() {
    assertRefused(ConfigFactory.parseString(ROOT + "tls = on").withFallback(ConfigFactory.load()), ROOT + "key-store is empty; with " + ROOT
        + "tls = on it must name this node's key store (its private key and certificate); tools/cluster-certs.sh makes them");
    assertRefused(ConfigFactory.parseString(ROOT + "trust-store = \"\"").withFallback(tls("")),
        ROOT + "trust-store is empty; with " + ROOT + "tls = on it must name the trust store holding the cluster CA's certificate");
    Path nowhere = dir.resolve("no-such.p12");
    assertRefused(ConfigFactory.parseString(ROOT + "key-store = \"" + nowhere + "\"").withFallback(tls("")),
        ROOT + "key-store names " + nowhere + ", which does not exist; it must name this node's key store");
    assertRefused(ConfigFactory.parseString(ROOT + "trust-store = \"" + dir + "\"").withFallback(tls("")),
        ROOT + "trust-store names " + dir + ", which is not a readable file");
  }

  @Test
  void aWrongPasswordIsNamedWithItsFile() {
    assertRefused(ConfigFactory.parseString(ROOT + "key-store-password = \"wrong-one\"").withFallback(tls("")),
        ROOT + "key-store-password does not open key-store " + keyStore + " (wrong password)");
    assertRefused(ConfigFactory.parseString(ROOT + "trust-store-password = \"wrong-one\"").withFallback(tls("")),
        ROOT + "trust-store-password does not open trust-store " + trustStore + " (wrong password)");
    assertRefused(tls("wrong-key-password"),
        ROOT + "key-password does not open the private key 'node' in key-store " + keyStore + " (wrong password)");
  }

  @Test
  void storesWithTheWrongContentAreRefused() throws Exception {
    // The trust store as key store: it holds no private key.
    assertRefused(ConfigFactory.parseString(ROOT + "key-store = \"" + trustStore + "\"").withFallback(tls("")),
        ROOT + "key-store " + trustStore + " holds no private key (entries: [ca]); it must hold this node's private key");
    Path empty = dir.resolve("empty.p12");
    KeyStore none = KeyStore.getInstance("PKCS12");
    none.load(null, null);
    try (OutputStream out = Files.newOutputStream(empty)) {
      none.store(out, PASSWORD.toCharArray());
    }
    assertRefused(ConfigFactory.parseString(ROOT + "trust-store = \"" + empty + "\"").withFallback(tls("")),
        ROOT + "trust-store " + empty + " holds no trusted certificate; it must hold the cluster CA's certificate");
    Path text = Files.writeString(dir.resolve("not-a-store.p12"), "-----BEGIN CERTIFICATE-----\nnot really\n");
    assertRefused(ConfigFactory.parseString(ROOT + "trust-store = \"" + text + "\"").withFallback(tls("")),
        ROOT + "trust-store " + text + " ");
  }

  @Test
  void aClusterNodeWithABadKeyStoreFailsAtStartNamingIt() {
    Config node = ConfigFactory.parseString(ROOT + "key-store-password = \"wrong-one\"").withFallback(tls(""))
        .withFallback(TestNodes.config(TestNodes.freePort(), 0, "compute"));
    XlaException e = assertThrows(XlaException.class, () -> XlaCluster.start(node));
    assertEquals(ROOT + "key-store-password does not open key-store " + keyStore + " (wrong password)", e.getMessage());
  }

  @Test
  void callbackSecretsCompareByContentAndNeverPrint() {
    assertTrue(CallbackSecret.of("abc").matches(CallbackSecret.of("abc")));
    assertFalse(CallbackSecret.of("abc").matches(CallbackSecret.of("abd")));
    assertFalse(CallbackSecret.of("abc").matches(CallbackSecret.NONE));
    assertTrue(CallbackSecret.NONE.matches(CallbackSecret.of("")));
    assertEquals("CallbackSecret(hidden)", CallbackSecret.of("abc").toString());
  }

  @Test
  void aNodeOtherMachinesReachWithoutTlsIsWarnedAboutNamingTheSetting() {
    ClusterSecuritySettings plain = ClusterSecuritySettings.fromConfig(ConfigFactory.load());
    assertTrue(XlaCluster.exposure(ClusterSettings.fromConfig(ConfigFactory.parseString(
        "xla-actors.cluster.hostname = \"127.0.0.1\"").withFallback(ConfigFactory.load())), plain).isEmpty());
    ClusterSettings reachable = ClusterSettings.fromConfig(ConfigFactory.parseString(
        "xla-actors.cluster { seed-nodes = [\"10.0.0.5:25520\"], hostname = \"10.0.0.5\" }").withFallback(ConfigFactory.load()));
    String warning = XlaCluster.exposure(reachable, plain).orElseThrow();
    assertTrue(warning.contains("10.0.0.5:25520") && warning.contains("xla-actors.cluster.security.tls = off")
        && warning.contains("set xla-actors.cluster.security.tls = on"), warning);
    // With TLS only nodes holding a certificate of the cluster's CA get in: nothing to warn about.
    assertTrue(XlaCluster.exposure(reachable, ClusterSecuritySettings.fromConfig(tls(""))).isEmpty());
  }

  private static Config tls(String keyPassword) {
    return ConfigFactory.parseString("""
        xla-actors.cluster.security {
          tls = on
          key-store = "%s"
          key-store-password = "%s"
          key-password = "%s"
          trust-store = "%s"
          trust-store-password = "%s"
        }
        """.formatted(keyStore, PASSWORD, keyPassword, trustStore, PASSWORD)).withFallback(ConfigFactory.load());
  }

  private static void assertRefused(Config config, String messageStart) {
    XlaException e = assertThrows(XlaException.class, () -> ClusterSecuritySettings.fromConfig(config));
    assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    assertTrue(e.getMessage().startsWith(messageStart), () -> "expected a message starting with\n  " + messageStart
        + "\ngot\n  " + e.getMessage());
  }

  private static String read(Path p) {
    try {
      return Files.readString(p);
    } catch (IOException e) {
      return e.toString();
    }
  }
}
