package dev.xlaactors.actors.jobs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.XlaException;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The defaults of reference.conf, and bad values failing at creation with a message naming the key. */
class JobSettingsTest {

  private static Config with(String override) {
    return ConfigFactory.parseString(override).withFallback(ConfigFactory.defaultReference()).resolve();
  }

  @Test
  void defaultsFromReferenceConf() {
    JobSettings s = JobSettings.fromConfig(ConfigFactory.defaultReference());
    assertEquals(4, s.poolSize());
    assertEquals(1000, s.queueCapacity());
    assertEquals(3, s.maxRetries());
    assertEquals(Duration.ofMillis(200), s.backoffMin());
    assertEquals(Duration.ofSeconds(10), s.backoffMax());
    assertEquals(Duration.ofHours(24), s.timeout());
    assertEquals(Duration.ofSeconds(1), s.progressInterval());
    assertEquals(1, s.syncEvery());
  }

  @Test
  void backoffDoublesUpToItsMaximum() {
    JobSettings s = JobSettings.fromConfig(with("xla-actors.actors.jobs { backoff-min = 100ms, backoff-max = 1s }"));
    assertEquals(Duration.ofMillis(100), s.backoff(1));
    assertEquals(Duration.ofMillis(200), s.backoff(2));
    assertEquals(Duration.ofMillis(400), s.backoff(3));
    assertEquals(Duration.ofMillis(800), s.backoff(4));
    assertEquals(Duration.ofSeconds(1), s.backoff(5));
    assertEquals(Duration.ofSeconds(1), s.backoff(60));
  }

  @Test
  void badValuesNameTheirKey() {
    assertBad("xla-actors.actors.jobs.timeout = 0s", "xla-actors.actors.jobs.timeout must be a positive duration (e.g. 30s), got 0s");
    assertBad("xla-actors.actors.jobs.backoff-min = -1s", "xla-actors.actors.jobs.backoff-min must be a positive duration");
    assertBad("xla-actors.actors.jobs.progress-interval = 0ms", "xla-actors.actors.jobs.progress-interval must be a positive duration");
    assertBad("xla-actors.actors.jobs.max-retries = -1", "xla-actors.actors.jobs.max-retries must be at least 0, got -1");
    assertBad("xla-actors.actors.jobs.sync-every = 0", "xla-actors.actors.jobs.sync-every must be at least 1, got 0");
    assertBad("xla-actors.actors.computations.pool-size = 0", "xla-actors.actors.computations.pool-size must be at least 1, got 0");
    assertBad("xla-actors.actors.computations.queue-capacity = -5", "xla-actors.actors.computations.queue-capacity must be at least 1");
    assertBad("xla-actors.actors.jobs { backoff-min = 2s, backoff-max = 1s }", "xla-actors.actors.jobs.backoff-max (PT1S) must not be shorter than");
    assertBad("xla-actors.actors.jobs.timeout = soon", "jobs.timeout");
  }

  private static void assertBad(String override, String expected) {
    XlaException e = assertThrows(XlaException.class, () -> JobSettings.fromConfig(with(override)));
    assertTrue(e.getMessage().contains(expected), () -> "expected '" + expected + "' in: " + e.getMessage());
  }
}
