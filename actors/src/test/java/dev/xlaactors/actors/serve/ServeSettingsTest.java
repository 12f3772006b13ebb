package dev.xlaactors.actors.serve;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.XlaException;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The serve settings: defaults from reference.conf, per-model overrides, and every bad value named. */
class ServeSettingsTest {
  @Test
  void defaultsComeFromReferenceConf() {
    ServeSettings s = ServeSettings.parse("");
    assertEquals(new ServeSettings.Model(32, Duration.ofMillis(2), 1024, Duration.ofSeconds(30), 1), s.defaults());
    assertEquals(s.defaults(), s.forModel("anything"));
  }

  @Test
  void aModelsOverridesFallBackToTheDefaults() {
    ServeSettings s = ServeSettings.parse("xla-actors.actors.serve.models.scoring { max-delay = 5ms, queue-capacity = 16 }\n"
        + "xla-actors.actors.serve.defaults.max-batch-size = 8");
    ServeSettings.Model scoring = s.forModel("scoring");
    assertEquals(Duration.ofMillis(5), scoring.maxDelay());
    assertEquals(16, scoring.queueCapacity());
    assertEquals(8, scoring.maxBatchSize(), "the model takes the (overridden) defaults for keys it does not set");
    assertEquals(1024, s.forModel("other").queueCapacity());
  }

  @Test
  void outOfRangeValuesAreRefusedNamingTheKey() {
    String[][] cases = {
      {"xla-actors.actors.serve.defaults.max-batch-size = 0", "xla-actors.actors.serve.defaults.max-batch-size = 0 is out of range"},
      {"xla-actors.actors.serve.defaults.max-batch-size = 5000", "from 1 to 4096"},
      {"xla-actors.actors.serve.defaults.queue-capacity = -1", "xla-actors.actors.serve.defaults.queue-capacity"},
      {"xla-actors.actors.serve.defaults.max-delay = 2m", "xla-actors.actors.serve.defaults.max-delay = 2m is longer than the largest"},
      {"xla-actors.actors.serve.defaults.max-delay = -1ms", "must be a duration >= 0"},
      {"xla-actors.actors.serve.defaults.default-timeout = 0s", "xla-actors.actors.serve.defaults.default-timeout must be a positive"},
      {"xla-actors.actors.serve.defaults.default-timeout = 300d", "longer than the largest accepted"},
      {"xla-actors.actors.serve.defaults.max-batches-in-flight = 65", "from 1 to 64"},
      {"xla-actors.actors.serve.models.scoring.queue-capacity = 0", "xla-actors.actors.serve.models.scoring.queue-capacity = 0"},
      {"xla-actors.actors.serve.models.scoring.max-dealy = 5ms", "did you mean max-delay?"},
      {"xla-actors.actors.serve.models.scoring = 5", "must be an object of settings"},
      {"xla-actors.actors.serve.defaults.max-batch-size = many", "must be a whole number"},
    };
    for (String[] c : cases) {
      XlaException e = assertThrows(XlaException.class, () -> ServeSettings.parse(c[0]), c[0]);
      assertTrue(e.getMessage().contains(c[1]), c[0] + " -> " + e.getMessage());
    }
  }

  @Test
  void settingsBuiltInCodeAreCheckedToo() {
    XlaException e = assertThrows(XlaException.class, () -> ServeSettings.parse("").defaults().withMaxBatchSize(0));
    assertTrue(e.getMessage().contains("max-batch-size = 0"), e.getMessage());
    e = assertThrows(XlaException.class, () -> ServeSettings.parse("").defaults().withMaxDelay(Duration.ofMinutes(5)));
    assertTrue(e.getMessage().contains("max-delay"), e.getMessage());
  }
}
