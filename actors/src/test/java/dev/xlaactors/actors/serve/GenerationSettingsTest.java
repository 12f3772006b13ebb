package dev.xlaactors.actors.serve;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.XlaException;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** {@code xla-actors.actors.generation}: the defaults, and bad values refused naming the key. */
class GenerationSettingsTest {
  private static Config with(String overrides) {
    return ConfigFactory.parseString(overrides).withFallback(ConfigFactory.defaultReference()).resolve();
  }

  @Test
  void defaults() {
    GenerationSettings s = GenerationSettings.fromConfig(with(""));
    assertEquals(64, s.maxWaiting());
    assertEquals(Duration.ofMinutes(5), s.defaultTimeout());
    // Its own pool: a step waits for its runs on run-dispatcher, which it must never occupy itself.
    assertEquals("xla-actors.actors.generation-dispatcher", s.dispatcher());
    assertTrue(s.promptCache(), "the prompt cache is on by default");
    assertFalse(GenerationSettings.fromConfig(with("xla-actors.actors.generation.prompt-cache = off")).promptCache());
    assertFalse(s.withPromptCache(false).promptCache());
  }

  @Test
  void badValuesAreRefusedNamingTheKey() {
    String[][] cases = {
        {"xla-actors.actors.generation.max-waiting = -1", "xla-actors.actors.generation.max-waiting = -1 is out of range"},
        {"xla-actors.actors.generation.max-waiting = lots", "xla-actors.actors.generation.max-waiting must be a whole number"},
        {"xla-actors.actors.generation.default-timeout = 0s", "xla-actors.actors.generation.default-timeout must be a positive duration"},
        {"xla-actors.actors.generation.dispatcher = nowhere", "xla-actors.actors.generation.dispatcher must be the config path of a dispatcher"},
        {"xla-actors.actors.generation.max-wait = 3", "xla-actors.actors.generation.max-wait"},
        {"xla-actors.actors.generation.prompt-cache = sometimes", "prompt-cache"},
        {"xla-actors.actors.generation.dispatcher = \"xla-actors.actors.run-dispatcher\"",
            "xla-actors.actors.generation.dispatcher = \"xla-actors.actors.run-dispatcher\" is also xla-actors.actors.runs.dispatcher"},
    };
    for (String[] c : cases) {
      XlaException e = assertThrows(XlaException.class, () -> GenerationSettings.fromConfig(with(c[0])), c[0]);
      assertTrue(e.getMessage().contains(c[1]), c[0] + " -> " + e.getMessage());
    }
  }
}
