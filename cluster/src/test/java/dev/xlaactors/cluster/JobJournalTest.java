package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Optional;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The job journal's settings (one URL chooses the database), its tables created on an empty database
 * and again on a complete one, and the binary form of what it stores, damaged bytes included.
 */
class JobJournalTest {
  private static Config with(String hocon) {
    return ConfigFactory.parseString(hocon).withFallback(ConfigFactory.load()).resolve();
  }

  @Test
  void aServedH2FileWithAnEmptyPasswordWarnsNamingTheSettings() {
    String served = JobJournalSettings.h2File(java.nio.file.Path.of("/tmp/xla-journal-test/journal"));
    JobJournalSettings open = JobJournalSettings.fromConfig(with(
        "xla-actors.cluster.jobs.journal { url = \"" + served + "\", user = \"sa\", password = \"\" }"));
    String warning = open.exposure().orElseThrow(() -> new AssertionError("no warning for " + served + " with an empty password"));
    assertTrue(warning.contains("xla-actors.cluster.jobs.journal.password") && warning.contains("AUTO_SERVER=TRUE")
        && warning.contains(served), warning);
    // A password, or one JVM on the file (no AUTO_SERVER), or PostgreSQL: nothing to warn about.
    assertTrue(JobJournalSettings.fromConfig(with("xla-actors.cluster.jobs.journal { url = \"" + served
        + "\", password = \"s3cret\" }")).exposure().isEmpty());
    assertTrue(JobJournalSettings.fromConfig(with("xla-actors.cluster.jobs.journal { url = \"" + served.replace("AUTO_SERVER=TRUE;", "")
        + "\", password = \"\" }")).exposure().isEmpty());
    assertTrue(JobJournalSettings.fromConfig(with("xla-actors.cluster.jobs.journal.url = \"jdbc:postgresql://10.0.0.9:5432/jobs\""))
        .exposure().isEmpty());
  }

  @Test
  void theUrlChoosesTheDatabaseAndItsSlickProfile() {
    JobJournalSettings h2 = JobJournalSettings.fromConfig(ConfigFactory.load());
    // One JVM opens the default file: no AUTO_SERVER port that other local users could connect to.
    assertTrue(h2.url().startsWith("jdbc:h2:file:") && h2.url().endsWith("/.cache/xla-actors/jobs/journal;WRITE_DELAY=0"), h2.url());
    assertTrue(h2.exposure().isEmpty() && h2.h2Directory().orElseThrow().endsWith(".cache/xla-actors/jobs"), h2.url());
    Config pekko = h2.pekkoOverrides();
    String db = "pekko-persistence-jdbc.shared-databases." + JobJournalSettings.SHARED_DATABASE;
    assertEquals("slick.jdbc.H2Profile$", pekko.getString(db + ".profile"));
    assertEquals(JobJournalSettings.SHARED_DATABASE, pekko.getString("jdbc-journal.use-shared-db"));
    assertEquals(JobJournalSettings.SHARED_DATABASE, pekko.getString("jdbc-snapshot-store.use-shared-db"));

    JobJournalSettings pg = JobJournalSettings.fromConfig(with("""
        xla-actors.cluster.jobs.journal { url = "jdbc:postgresql://10.0.0.9:5432/jobs", user = "xla", max-connections = 8 }
        """));
    Config pgPekko = pg.pekkoOverrides();
    assertEquals("slick.jdbc.PostgresProfile$", pgPekko.getString(db + ".profile"));
    assertEquals("org.postgresql.Driver", pgPekko.getString(db + ".db.driver"));
    assertEquals("xla", pgPekko.getString(db + ".db.user"));
    assertEquals(8, pgPekko.getInt(db + ".db.maxConnections"));
  }

  @Test
  void badSettingsAreRefusedNamingTheKeyAndTheValue() {
    XlaException url = assertThrows(XlaException.class,
        () -> JobJournalSettings.fromConfig(with("xla-actors.cluster.jobs.journal.url = \"jdbc:mysql://h/db\"")));
    assertEquals(ErrorCode.INVALID_ARGUMENT, url.code());
    assertTrue(url.getMessage().contains("xla-actors.cluster.jobs.journal.url") && url.getMessage().contains("jdbc:mysql://h/db")
        && url.getMessage().contains("jdbc:postgresql://"), url.getMessage());
    XlaException every = assertThrows(XlaException.class,
        () -> JobJournalSettings.fromConfig(with("xla-actors.cluster.jobs.snapshot-every = 0")));
    assertTrue(every.getMessage().contains("xla-actors.cluster.jobs.snapshot-every must be at least 1"), every.getMessage());
    XlaException keep = assertThrows(XlaException.class,
        () -> JobJournalSettings.fromConfig(with("xla-actors.cluster.jobs.keep-snapshots = 0")));
    assertTrue(keep.getMessage().contains("xla-actors.cluster.jobs.keep-snapshots must be at least 1"), keep.getMessage());
    XlaException timeout = assertThrows(XlaException.class,
        () -> JobJournalSettings.fromConfig(with("xla-actors.cluster.jobs.record-timeout = 0s")));
    assertTrue(timeout.getMessage().contains("record-timeout"), timeout.getMessage());
    // And XlaCluster refuses to start on them.
    assertThrows(XlaException.class, () -> XlaCluster.start(with("xla-actors.cluster.jobs.journal.max-connections = 0")));
  }

  @Test
  void everyH2UrlWritesEachCommitBeforeAcknowledgingIt(@TempDir Path dir) throws Exception {
    String h2File = JobJournalSettings.h2File(dir.resolve("journal"));
    assertEquals("jdbc:h2:file:" + dir.resolve("journal").toAbsolutePath() + ";AUTO_SERVER=TRUE;WRITE_DELAY=0", h2File);
    // A URL without a write delay gets WRITE_DELAY=0; one that says 0 (in any case) is kept as it is.
    String plain = "jdbc:h2:file:" + dir.resolve("plain").toAbsolutePath() + ";AUTO_SERVER=TRUE";
    JobJournalSettings added = JobJournalSettings.fromConfig(with("xla-actors.cluster.jobs.journal.url = \"" + plain + "\""));
    assertEquals(plain + ";WRITE_DELAY=0", added.url());
    String lower = plain + ";write_delay=0";
    assertEquals(lower, new JobJournalSettings(lower, "sa", "", 1, 1, Duration.ofSeconds(1)).url());
    // And H2 really runs with it: the database opened through that URL reports a write delay of 0 ms
    // (H2's default is 500 ms, within which a killed JVM lost acknowledged commits).
    try (java.sql.Connection c = java.sql.DriverManager.getConnection(added.url(), "sa", "");
        java.sql.ResultSet r = c.createStatement().executeQuery(
            "SELECT SETTING_VALUE FROM INFORMATION_SCHEMA.SETTINGS WHERE SETTING_NAME = 'WRITE_DELAY'")) {
      assertTrue(r.next(), "H2 reports no WRITE_DELAY setting");
      assertEquals("0", r.getString(1));
    }
    assertTrue(!added.inMemory() && new JobJournalSettings("jdbc:h2:mem:jobs", "sa", "", 1, 1, Duration.ofSeconds(1)).inMemory()
        && new JobJournalSettings("jdbc:h2:tcp://localhost/mem:jobs", "sa", "", 1, 1, Duration.ofSeconds(1)).inMemory()
        && new JobJournalSettings("jdbc:h2:memFS:jobs", "sa", "", 1, 1, Duration.ofSeconds(1)).inMemory());
  }

  @Test
  void aUrlThatWouldLoseAcknowledgedWritesIsRefusedSayingWhyAndTheFix() {
    XlaException delay = assertThrows(XlaException.class, () -> JobJournalSettings.fromConfig(
        with("xla-actors.cluster.jobs.journal.url = \"jdbc:h2:file:/tmp/jobs;AUTO_SERVER=TRUE;WRITE_DELAY=500\"")));
    assertEquals(ErrorCode.INVALID_ARGUMENT, delay.code());
    assertTrue(delay.getMessage().contains("xla-actors.cluster.jobs.journal.url sets WRITE_DELAY=500")
        && delay.getMessage().contains("a killed JVM loses items the journal acknowledged")
        && delay.getMessage().contains("set WRITE_DELAY=0") && delay.getMessage().contains("jdbc:h2:file:/tmp/jobs"), delay.getMessage());
    XlaException lock = assertThrows(XlaException.class,
        () -> new JobJournalSettings("jdbc:h2:file:/tmp/jobs;file_lock=no", "sa", "", 1, 1, Duration.ofSeconds(1)));
    assertTrue(lock.getMessage().contains("FILE_LOCK=NO"), lock.getMessage());
    XlaException async = assertThrows(XlaException.class, () -> JobJournalSettings.fromConfig(with(
        "xla-actors.cluster.jobs.journal.url = \"jdbc:postgresql://db:5432/jobs?options=-c%20synchronous_commit%3Doff\"")));
    assertTrue(async.getMessage().contains("synchronous_commit=off") && async.getMessage().contains("remove it"), async.getMessage());
    // XlaCluster refuses to start on it too.
    assertThrows(XlaException.class,
        () -> XlaCluster.start(with("xla-actors.cluster.jobs.journal.url = \"jdbc:h2:mem:x;WRITE_DELAY=1\"")));
  }

  @Test
  void tablesAreCreatedOnAnEmptyDatabaseAndCreatingThemAgainChangesNothing(@TempDir Path dir) throws Exception {
    String url = TestNodes.h2Journal(dir);
    try (JobJournal journal = new JobJournal(url, "sa", "")) {
      assertEquals(0, journal.events("nothing").size());
      JobJournalSchema.ensure(new JobJournalSettings(url, "sa", "", 1, 1, Duration.ofSeconds(1)));
      assertEquals(0, journal.events("nothing").size());
    }
  }

  @Test
  void anUnreachableDatabaseIsUnavailableNamingTheUrl() {
    String url = "jdbc:postgresql://127.0.0.1:" + TestNodes.freePort() + "/nowhere";
    XlaException e = assertThrows(XlaException.class,
        () -> JobJournalSchema.ensure(new JobJournalSettings(url, "postgres", "", 1, 1, Duration.ofSeconds(1))));
    assertEquals(ErrorCode.UNAVAILABLE, e.code());
    assertTrue(e.getMessage().contains(url) && e.getMessage().contains("xla-actors.cluster.jobs.journal.url"), e.getMessage());
  }

  @Test
  void eventsAndSnapshotsRoundTrip() {
    ShardedJobSerializer s = new ShardedJobSerializer(null);
    TreeMap<Long, String> lines = new TreeMap<>();
    lines.put(0L, "1.0,3.0");
    lines.put(7L, "ünïcode;2");
    Object[] messages = {
      new ShardedBatchJobs.Ensure(),
      new ShardedBatchJobs.ItemScored(41, "83.0,85.0,87.0,89.0"),
      new ShardedBatchJobs.JobEnded(true, "Completed[done=200]"),
      new ShardedBatchJobs.JobSnapshot(lines, Optional.empty()),
      new ShardedBatchJobs.JobSnapshot(new TreeMap<>(), Optional.of(new ShardedBatchJobs.JobEnded(false, "Failed"))),
    };
    for (Object m : messages) {
      assertEquals(m, s.fromBinary(s.toBinary(m), s.manifest(m)), m.toString());
    }
  }

  @Test
  void damagedBytesAreRefusedSayingWhatWasExpected() {
    ShardedJobSerializer s = new ShardedJobSerializer(null);
    byte[] item = s.toBinary(new ShardedBatchJobs.ItemScored(3, "7.0"));
    assertRefused(s, Arrays.copyOf(item, 5), "I", "truncated at 5 bytes");
    assertRefused(s, Arrays.copyOf(item, item.length - 1), "I", "a string of 3 bytes, expected 0 to 2");
    assertRefused(s, Arrays.copyOf(item, item.length + 2), "I", "2 bytes after its end");
    byte[] longLength = item.clone();
    longLength[11] = 99; // the line's length claims more bytes than there are
    assertRefused(s, longLength, "I", "a string of 99 bytes");
    byte[] ended = s.toBinary(new ShardedBatchJobs.JobEnded(true, "ok"));
    ended[0] = 5;
    assertRefused(s, ended, "J", "completed flag is 5, expected 0 or 1");
    byte[] badUtf8 = s.toBinary(new ShardedBatchJobs.ItemScored(3, "ab"));
    badUtf8[12] = (byte) 0xC3;
    badUtf8[13] = (byte) 0x28;
    assertRefused(s, badUtf8, "I", "not valid UTF-8");
    assertRefused(s, "x".getBytes(StandardCharsets.UTF_8), "Q", "unknown manifest 'Q'");
    assertRefused(s, new byte[] {0, -1, -1, -1, -1}, "S", "-1 lines");
  }

  private static void assertRefused(ShardedJobSerializer s, byte[] bytes, String manifest, String expected) {
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> s.fromBinary(bytes, manifest));
    assertTrue(e.getMessage().contains(expected), () -> "expected '" + expected + "' in: " + e.getMessage());
  }
}
