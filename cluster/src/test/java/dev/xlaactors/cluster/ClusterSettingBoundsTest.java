package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.XlaException;
import org.junit.jupiter.api.Test;

/**
 * The cluster's duration and count settings have ranges: a timeout longer than Pekko's scheduler can time
 * and an absurd count are refused when read, naming the key, the value and the largest accepted.
 */
class ClusterSettingBoundsTest {
  private static Config with(String hocon) {
    return ConfigFactory.parseString(hocon).withFallback(ConfigFactory.defaultReference()).resolve();
  }

  @Test
  void hugeDurationsAndAbsurdCountsAreRefused() {
    XlaException await = assertThrows(XlaException.class,
        () -> ClusterSettings.fromConfig(with("xla-actors.cluster.callbacks.await-timeout = 365d")));
    assertTrue(await.getMessage().contains("xla-actors.cluster.callbacks.await-timeout = 365d is longer than the largest accepted, 21474836s"),
        await.getMessage());
    XlaException record = assertThrows(XlaException.class,
        () -> JobJournalSettings.fromConfig(with("xla-actors.cluster.jobs.record-timeout = 365d")));
    assertTrue(record.getMessage().contains("xla-actors.cluster.jobs.record-timeout = 365d is longer than the largest accepted"),
        record.getMessage());
    XlaException connections = assertThrows(XlaException.class,
        () -> JobJournalSettings.fromConfig(with("xla-actors.cluster.jobs.journal.max-connections = 100000")));
    assertTrue(connections.getMessage().contains(
        "xla-actors.cluster.jobs.journal.max-connections = 100000 is out of range: it must be from 1 to 256"), connections.getMessage());
    XlaException every = assertThrows(XlaException.class,
        () -> JobJournalSettings.fromConfig(with("xla-actors.cluster.jobs.snapshot-every = 2000000000")));
    assertTrue(every.getMessage().contains("xla-actors.cluster.jobs.snapshot-every = 2000000000 is out of range"), every.getMessage());
    XlaException keep = assertThrows(XlaException.class,
        () -> JobJournalSettings.fromConfig(with("xla-actors.cluster.jobs.keep-snapshots = 101")));
    assertTrue(keep.getMessage().contains("xla-actors.cluster.jobs.keep-snapshots = 101 is out of range: it must be from 1 to 100"),
        keep.getMessage());
  }
}
