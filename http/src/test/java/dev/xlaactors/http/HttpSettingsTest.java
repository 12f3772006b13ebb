package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.XlaException;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** {@code xla-actors.http}: the defaults, and bad values refused naming the key. */
class HttpSettingsTest {
  private static Config with(String overrides) {
    return ConfigFactory.parseString(overrides).withFallback(ConfigFactory.defaultReference()).resolve();
  }

  @Test
  void defaults() {
    HttpSettings s = HttpSettings.fromConfig(with(""));
    assertEquals(new HttpSettings("127.0.0.1", 8080, 8L << 20, Duration.ofSeconds(2), 1L << 20, Duration.ofSeconds(5),
        Duration.ofMinutes(10), Duration.ofSeconds(15)), s);
  }

  @Test
  void badValuesAreRefusedNamingTheKey() {
    String[][] cases = {
        {"xla-actors.http.port = 70000", "xla-actors.http.port = 70000 is out of range"},
        {"xla-actors.http.max-body-bytes = 10", "xla-actors.http.max-body-bytes = 10 is out of range"},
        {"xla-actors.http.max-body-bytes = huge", "xla-actors.http.max-body-bytes must be a size"},
        {"xla-actors.http.max-generate-body-bytes = 10", "xla-actors.http.max-generate-body-bytes = 10 is out of range"},
        {"xla-actors.http.ready-timeout = 2m", "xla-actors.http.ready-timeout = 2m is longer than the largest accepted, 1m"},
        {"xla-actors.http.host = \"\"", "xla-actors.http.host must be an address"},
        {"xla-actors.http.request-timeout-margin = 2h", "xla-actors.http.request-timeout-margin = 2h is longer than the largest accepted, 1h"},
        {"xla-actors.http.prot = 1", "xla-actors.http.prot"},
    };
    for (String[] c : cases) {
      XlaException e = assertThrows(XlaException.class, () -> HttpSettings.fromConfig(with(c[0])), c[0]);
      assertTrue(e.getMessage().contains(c[1]), c[0] + " -> " + e.getMessage());
    }
  }
}
