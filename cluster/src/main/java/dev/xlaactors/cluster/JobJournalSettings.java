package dev.xlaactors.cluster;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.SettingRanges;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

/**
 * Where sharded batch jobs keep their event-sourced state, read once from {@code
 * xla-actors.cluster.jobs} (see the cluster module's reference.conf): a JDBC database used through
 * pekko-persistence-jdbc, an embedded H2 file by default and PostgreSQL for a cluster of several hosts.
 * The database kind follows from the URL; a URL of any other kind is refused naming the key.
 *
 * @param url JDBC URL, {@code jdbc:h2:...} or {@code jdbc:postgresql://...}
 * @param user database user
 * @param password database password
 * @param maxConnections connections each node keeps open to the database
 * @param snapshotEvery a job's state is saved whole every this many finished items
 * @param recordTimeout how long recording one finished item in the journal may take before the item's
 *     attempt fails (and is retried like a failed step)
 */
public record JobJournalSettings(
    String url, String user, String password, int maxConnections, int snapshotEvery, Duration recordTimeout) {
  private static final String ROOT = "xla-actors.cluster.jobs";

  /** The name of the database that the journal, the snapshot store and the read journal share. */
  static final String SHARED_DATABASE = "xla-actors-jobs";

  /** The kinds of database the journal runs on, told apart by the JDBC URL's prefix. */
  enum Dialect {
    H2("jdbc:h2:", "slick.jdbc.H2Profile$", "org.h2.Driver"),
    POSTGRESQL("jdbc:postgresql:", "slick.jdbc.PostgresProfile$", "org.postgresql.Driver");

    final String urlPrefix;
    final String slickProfile;
    final String driver;

    Dialect(String urlPrefix, String slickProfile, String driver) {
      this.urlPrefix = urlPrefix;
      this.slickProfile = slickProfile;
      this.driver = driver;
    }
  }

  /** The most database connections one JVM's journal may hold. */
  static final int MAX_CONNECTIONS = 256;

  /** Settings from {@code config} (an application config with the modules' reference.conf beneath). */
  public static JobJournalSettings fromConfig(Config config) {
    try {
      Config c = config.getConfig(ROOT);
      String url = c.getString("journal.url");
      dialectOf(url);
      int maxConnections = c.getInt("journal.max-connections");
      if (maxConnections < 1) {
        throw invalid("journal.max-connections", "must be at least 1", Integer.toString(maxConnections));
      }
      int snapshotEvery = c.getInt("snapshot-every");
      if (snapshotEvery < 1) {
        throw invalid("snapshot-every", "must be at least 1 (items between snapshots)", Integer.toString(snapshotEvery));
      }
      Duration recordTimeout = c.getDuration("record-timeout");
      if (recordTimeout.isNegative() || recordTimeout.isZero()) {
        throw invalid("record-timeout", "must be a positive duration", c.getValue("record-timeout").render());
      }
      SettingRanges.timed(config, c, "record-timeout", ROOT + ".record-timeout");
      SettingRanges.check(maxConnections, ROOT + ".journal.max-connections", Integer.toString(maxConnections), 1, MAX_CONNECTIONS,
          "database connections");
      SettingRanges.check(snapshotEvery, ROOT + ".snapshot-every", Integer.toString(snapshotEvery), 1, SettingRanges.MAX_QUEUE,
          "items between snapshots");
      return new JobJournalSettings(url, c.getString("journal.user"), c.getString("journal.password"), maxConnections,
          snapshotEvery, recordTimeout);
    } catch (ConfigException e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, "bad job journal configuration: " + e.getMessage(), e);
    }
  }

  /** The database kind of this URL. */
  Dialect dialect() {
    return dialectOf(url);
  }

  /**
   * The pekko-persistence-jdbc settings these stand for: one shared database (a Slick profile, the
   * driver, URL and pool) used by the journal, the snapshot store and the read journal.
   */
  Config pekkoOverrides() {
    Dialect dialect = dialect();
    String db = "pekko-persistence-jdbc.shared-databases." + SHARED_DATABASE;
    Map<String, Object> map = new HashMap<>();
    map.put(db + ".profile", dialect.slickProfile);
    map.put(db + ".db.url", url);
    map.put(db + ".db.user", user);
    map.put(db + ".db.password", password);
    map.put(db + ".db.driver", dialect.driver);
    map.put(db + ".db.numThreads", maxConnections);
    map.put(db + ".db.maxConnections", maxConnections);
    map.put(db + ".db.minConnections", 1);
    // Fail a write promptly when the database is gone, rather than after Slick's default of 3 minutes.
    map.put(db + ".db.connectionTimeout", 10_000);
    for (String plugin : new String[] {"jdbc-journal", "jdbc-snapshot-store", "jdbc-read-journal"}) {
      map.put(plugin + ".use-shared-db", SHARED_DATABASE);
    }
    return ConfigFactory.parseMap(map, ROOT + ".journal");
  }

  private static Dialect dialectOf(String url) {
    for (Dialect d : Dialect.values()) {
      if (url.startsWith(d.urlPrefix)) {
        return d;
      }
    }
    throw invalid("journal.url",
        "must be an H2 URL (jdbc:h2:file:/path/jobs;AUTO_SERVER=TRUE, the single-machine default) or a PostgreSQL one"
            + " (jdbc:postgresql://host:5432/database)", url);
  }

  private static XlaException invalid(String key, String what, String got) {
    return new XlaException(ErrorCode.INVALID_ARGUMENT, ROOT + "." + key + " " + what + ", got " + got);
  }
}
