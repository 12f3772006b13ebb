package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.XlaException;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** Settings come from HOCON, layered reference < application < system properties, and bad values fail naming the key. */
class ActorsSettingsTest {
  private static Config with(String hocon) {
    return ConfigFactory.parseString(hocon).withFallback(ConfigFactory.defaultReference()).resolve();
  }

  @Test
  void defaultsComeFromReferenceConf() {
    ActorsSettings s = ActorsSettings.fromConfig(ConfigFactory.defaultReference());
    assertEquals(Duration.ofSeconds(30), s.defaultCallbackTimeout());
    assertEquals(Duration.ofMinutes(10), s.runTimeout());
    assertEquals(new ActorsSettings.Timeout(Duration.ofSeconds(30), "xla-actors.actors.callbacks.default-timeout"),
        s.callbackTimeout("anything"));
  }

  @Test
  void perCallbackOverridesByName() {
    ActorsSettings s = ActorsSettings.fromConfig(with("xla-actors.actors.callbacks.timeouts { tokenize = 2s, \"slow.model\" = 2m }"));
    assertEquals(new ActorsSettings.Timeout(Duration.ofSeconds(2), "xla-actors.actors.callbacks.timeouts.tokenize"),
        s.callbackTimeout("tokenize"));
    assertEquals(Duration.ofMinutes(2), s.callbackTimeout("slow.model").duration());
  }

  @Test
  void systemPropertiesOverrideApplicationConfig() {
    String key = "xla-actors.actors.runs.timeout";
    System.setProperty(key, "42s");
    try {
      ConfigFactory.invalidateCaches();
      Config layered = ConfigFactory.systemProperties()
          .withFallback(ConfigFactory.parseString(key + " = 7s"))
          .withFallback(ConfigFactory.defaultReference())
          .resolve();
      assertEquals(Duration.ofSeconds(42), ActorsSettings.fromConfig(layered).runTimeout());
      assertEquals(Duration.ofSeconds(42), ActorsSettings.fromConfig(ConfigFactory.load()).runTimeout());
    } finally {
      System.clearProperty(key);
      ConfigFactory.invalidateCaches();
    }
  }

  @Test
  void negativeTimeoutNamesTheKey() {
    XlaException e = assertThrows(XlaException.class, () -> ActorsSettings.fromConfig(with("xla-actors.actors.callbacks.default-timeout = -5s")));
    assertTrue(e.getMessage().contains("xla-actors.actors.callbacks.default-timeout must be a positive duration"), e.getMessage());
    assertTrue(e.getMessage().endsWith("got -5s"), "echoed as written: " + e.getMessage());
  }

  @Test
  void aMisspeltKeyGivenAsASystemPropertyIsCaughtWithTheNearestKey() {
    String key = "xla-actors.actors.callbacks.default-timout";
    System.setProperty(key, "5s");
    try {
      ConfigFactory.invalidateCaches();
      XlaException e = assertThrows(XlaException.class, () -> ActorsSettings.fromConfig(ConfigFactory.load()));
      assertTrue(e.getMessage().startsWith("unknown configuration key " + key + " (system properties)"), e.getMessage());
      assertTrue(e.getMessage().contains("did you mean xla-actors.actors.callbacks.default-timeout?"), e.getMessage());
    } finally {
      System.clearProperty(key);
      ConfigFactory.invalidateCaches();
    }
  }

  @Test
  void badDispatchersFailAtStartNamingTheKey() {
    String key = "xla-actors.actors.run-dispatcher.thread-pool-executor.fixed-pool-size";
    System.setProperty(key, "0"); // as -D gives it: a string
    try {
      ConfigFactory.invalidateCaches();
      XlaException fromProperty = assertThrows(XlaException.class, () -> ActorsSettings.fromConfig(ConfigFactory.load()));
      assertTrue(fromProperty.getMessage().startsWith(key + " (the dispatcher named by xla-actors.actors.runs.dispatcher)"), fromProperty.getMessage());
    } finally {
      System.clearProperty(key);
      ConfigFactory.invalidateCaches();
    }
    XlaException unknown = assertThrows(XlaException.class, () -> ActorsSettings.fromConfig(
        with("xla-actors.actors.runs.dispatcher = \"my-dispatcher\"")));
    assertTrue(unknown.getMessage().startsWith("xla-actors.actors.runs.dispatcher must be the config path of a dispatcher"
        + " section (with type = Dispatcher), got \"my-dispatcher\", which is not a section of the configuration"), unknown.getMessage());
    XlaException run = assertThrows(XlaException.class, () -> ActorsSettings.fromConfig(
        with("xla-actors.actors.runs.dispatcher = \"xla-actors.actors.runs\"")));
    assertTrue(run.getMessage().contains("which has no type key"), run.getMessage());
    ActorsSettings.fromConfig(with("xla-actors.actors.runs.dispatcher = \"pekko.actor.default-blocking-io-dispatcher\""));
  }

  @Test
  void badCountsFailAtStartNamingTheKey() {
    XlaException threads = assertThrows(XlaException.class, () -> ActorsSettings.fromConfig(with("xla-actors.actors.callbacks.threads = 0")));
    assertEquals("xla-actors.actors.callbacks.threads must be a count >= 1, got 0", threads.getMessage());
    XlaException stuck = assertThrows(XlaException.class, () -> ActorsSettings.fromConfig(with("xla-actors.actors.callbacks.max-stuck-threads = -1")));
    assertEquals("xla-actors.actors.callbacks.max-stuck-threads must be a count >= 0, got -1", stuck.getMessage());
    XlaException queue = assertThrows(XlaException.class, () -> ActorsSettings.fromConfig(with("xla-actors.actors.runs.queue-capacity = many")));
    assertEquals("xla-actors.actors.runs.queue-capacity must be a count >= 1, got many", queue.getMessage());
    XlaException old = assertThrows(XlaException.class, () -> ActorsSettings.fromConfig(with("xla-actors.actors.callbacks.dispatcher = \"x\"")));
    assertTrue(old.getMessage().contains("unknown configuration key xla-actors.actors.callbacks.dispatcher"), old.getMessage());
  }

  @Test
  void negativeOverrideNamesItsKey() {
    XlaException e = assertThrows(XlaException.class, () -> ActorsSettings.fromConfig(with("xla-actors.actors.callbacks.timeouts.tokenize = 0s")));
    assertTrue(e.getMessage().contains("xla-actors.actors.callbacks.timeouts.tokenize"), e.getMessage());
  }

  @Test
  void wrongUnitNamesTheKey() {
    XlaException e = assertThrows(XlaException.class, () -> ActorsSettings.fromConfig(with("xla-actors.actors.runs.timeout = 10 parsecs")));
    assertTrue(e.getMessage().contains("runs.timeout"), e.getMessage());
  }

  @Test
  void unknownKeyUnderOurNamespaceNamesTheKey() {
    XlaException e = assertThrows(XlaException.class, () -> ActorsSettings.fromConfig(with("xla-actors.actors.callbacks.default-timout = 5s")));
    assertTrue(e.getMessage().contains("unknown configuration key xla-actors.actors.callbacks.default-timout"), e.getMessage());
    assertTrue(e.getMessage().contains("did you mean xla-actors.actors.callbacks.default-timeout?"), e.getMessage());
    assertThrows(XlaException.class, () -> ActorsSettings.fromConfig(with("xla-actors.actorz.runs.timeout = 5s")));
  }

  @Test
  void dispatcherSectionsTakePekkosOwnKeys() {
    ActorsSettings.fromConfig(with("xla-actors.actors.run-dispatcher.thread-pool-executor.keep-alive-time = 30s"));
  }
}
