package dev.xlaactors.cluster;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.SettingRanges;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * Where sharded batch jobs keep their event-sourced state, read once from {@code
 * xla-actors.cluster.jobs} (see the cluster module's reference.conf): a JDBC database used through
 * pekko-persistence-jdbc, an embedded H2 file by default and PostgreSQL for a cluster of several hosts.
 * The database kind follows from the URL; a URL of any other kind is refused naming the key.
 *
 * <p><b>Acknowledged means written.</b> An item of a job counts once the journal acknowledged its event,
 * so the journal must not acknowledge a commit it has not written. H2 by default does (it writes commits
 * in the background, up to {@code WRITE_DELAY} = 500 ms later: a killed JVM lost acknowledged items), so
 * every H2 URL gets {@code WRITE_DELAY=0}, with which H2 writes each commit to its file before the commit
 * returns (its {@code MVStore.commit()}), and a URL that sets another write delay, or turns off H2's
 * file lock ({@code FILE_LOCK=NO}), is refused. H2 does not force the file to the disk on a commit: a
 * killed JVM loses nothing acknowledged, a machine that loses power may lose the last commits; for that,
 * and for several hosts, use PostgreSQL (it forces its log on every commit unless {@code
 * synchronous_commit} is off, which a URL may not ask for). An in-memory H2 URL ({@code jdbc:h2:mem:})
 * is accepted for tests, with a warning when jobs start: it keeps nothing once its JVM ends.
 *
 * @param url JDBC URL, {@code jdbc:h2:...} or {@code jdbc:postgresql://...}; an H2 URL as given plus
 *     {@code ;WRITE_DELAY=0} when it does not say so already
 * @param user database user
 * @param password database password
 * @param maxConnections connections each node keeps open to the database
 * @param snapshotEvery a job's state is saved whole every this many finished items; saving it deletes the
 *     job's events before the oldest of its kept snapshots
 * @param keepSnapshots how many of a running job's newest snapshots are kept (with the events after the
 *     oldest of them); older ones are deleted
 * @param recordTimeout how long recording one finished item in the journal may take before the item's
 *     attempt fails (and is retried like a failed step)
 */
public record JobJournalSettings(
    String url, String user, String password, int maxConnections, int snapshotEvery, int keepSnapshots,
    Duration recordTimeout) {
  private static final String ROOT = "xla-actors.cluster.jobs";

  /** The most snapshots of one running job that may be kept. */
  static final int MAX_KEEP_SNAPSHOTS = 100;

  /** Every H2 journal URL has this setting: each commit is written to the file before it returns. */
  static final String H2_DURABLE = "WRITE_DELAY=0";

  public JobJournalSettings {
    url = durable(url);
  }

  /** Settings keeping the default two snapshots of a running job. */
  public JobJournalSettings(
      String url, String user, String password, int maxConnections, int snapshotEvery, Duration recordTimeout) {
    this(url, user, password, maxConnections, snapshotEvery, 2, recordTimeout);
  }

  /**
   * The URL of an H2 journal in the file {@code base} (H2 adds {@code .mv.db}): shared by the JVMs of one
   * machine (the first that opens it serves it to the others over loopback, {@code AUTO_SERVER}), each
   * commit written before it is acknowledged. Give it a password ({@code journal.password}): with an empty one
   * any local user can connect ({@link #exposure}). The default journal is {@code
   * ~/.cache/xla-actors/jobs/journal} without {@code AUTO_SERVER}: one JVM opens it.
   */
  public static String h2File(Path base) {
    return "jdbc:h2:file:" + base.toAbsolutePath() + ";AUTO_SERVER=TRUE;" + H2_DURABLE;
  }

  /**
   * The warning for an H2 journal that other processes can open without a password: one served to them
   * ({@code AUTO_SERVER=TRUE}, a TCP port on loopback) under an empty password lets any local user connect as
   * its admin, and an admin can run Java code in the serving JVM ({@code CREATE ALIAS}). Empty otherwise.
   */
  Optional<String> exposure() {
    if (dialect() != Dialect.H2 || !password.isEmpty()) {
      return Optional.empty();
    }
    String autoServer = h2Settings(url).get("AUTO_SERVER");
    if (autoServer == null || !autoServer.trim().equalsIgnoreCase("TRUE")) {
      return Optional.empty();
    }
    return Optional.of("the job journal " + url + " is served to the other processes of this machine (AUTO_SERVER=TRUE) with an"
        + " empty password: any local user can connect as its admin and run Java code in the JVM serving it (CREATE ALIAS); set "
        + ROOT + ".journal.password (the same on every node; a new file is created with it), or drop AUTO_SERVER=TRUE from "
        + ROOT + ".journal.url when one JVM uses the file (the default), or use PostgreSQL");
  }

  /**
   * The directory of an H2 journal file in this machine's file system ({@code jdbc:h2:file:/dir/journal},
   * {@code jdbc:h2:~/dir/journal}); empty for PostgreSQL, in-memory and TCP URLs.
   */
  Optional<Path> h2Directory() {
    if (dialect() != Dialect.H2 || inMemory()) {
      return Optional.empty();
    }
    String path = h2Path(url);
    if (path.startsWith("file:")) {
      path = path.substring("file:".length());
    }
    if (path.matches("^[A-Za-z][A-Za-z0-9]+:.*")) { // tcp:, ssl:, split:, nio:, ...: not a plain file here
      return Optional.empty();
    }
    if (path.startsWith("~")) {
      path = System.getProperty("user.home") + path.substring(1);
    }
    Path parent = Path.of(path).toAbsolutePath().getParent();
    return Optional.ofNullable(parent);
  }

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
      int keepSnapshots = c.getInt("keep-snapshots");
      if (keepSnapshots < 1) {
        throw invalid("keep-snapshots", "must be at least 1 (the newest snapshot of a running job is always kept)",
            Integer.toString(keepSnapshots));
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
      SettingRanges.check(keepSnapshots, ROOT + ".keep-snapshots", Integer.toString(keepSnapshots), 1, MAX_KEEP_SNAPSHOTS,
          "snapshots kept per running job");
      return new JobJournalSettings(url, c.getString("journal.user"), c.getString("journal.password"), maxConnections,
          snapshotEvery, keepSnapshots, recordTimeout);
    } catch (ConfigException e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, "bad job journal configuration: " + e.getMessage(), e);
    }
  }

  /** The database kind of this URL. */
  Dialect dialect() {
    return dialectOf(url);
  }

  /** Whether the journal lives in the memory of one JVM (an H2 {@code mem:} database): gone when it ends. */
  boolean inMemory() {
    if (dialect() != Dialect.H2) {
      return false;
    }
    String path = h2Path(url).toLowerCase(Locale.ROOT);
    // tcp://host/mem:x and ssl://host/mem:x are in the memory of the server's JVM; so are H2's
    // in-memory file systems (memFS:, memLZF:, nioMemFS:, nioMemLZF:).
    String database = path.replaceFirst("^(tcp|ssl)://[^/]*/", "");
    return database.startsWith("mem:") || database.matches("^(nio)?mem(fs|lzf):.*");
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
        "must be an H2 URL (jdbc:h2:file:/path/jobs;WRITE_DELAY=0, the single-JVM default) or a PostgreSQL one"
            + " (jdbc:postgresql://host:5432/database)", url);
  }

  /**
   * {@code url} with what makes its commits durable, or refused when it asks for the opposite: for H2,
   * {@code WRITE_DELAY=0} added when no write delay is given, another delay or {@code FILE_LOCK=NO}
   * refused; for PostgreSQL, {@code synchronous_commit=off} refused.
   */
  private static String durable(String url) {
    if (url == null) {
      throw invalid("journal.url", "must be set", "null");
    }
    Dialect dialect = dialectOf(url);
    if (dialect == Dialect.POSTGRESQL) {
      if (ASYNC_COMMIT.matcher(url).find()) {
        throw invalid("journal.url", "asks PostgreSQL for synchronous_commit=off, which acknowledges a commit before it is"
            + " on disk (a crashed database server loses acknowledged items); remove it from the URL", url);
      }
      return url;
    }
    Map<String, String> settings = h2Settings(url);
    String fileLock = settings.get("FILE_LOCK");
    if (fileLock != null && fileLock.equalsIgnoreCase("NO")) {
      throw invalid("journal.url", "sets FILE_LOCK=NO, with which two JVMs can open the same H2 file at once and"
          + " corrupt it; remove it (H2's default lock lets one JVM serve the file to the others)", url);
    }
    String writeDelay = settings.get("WRITE_DELAY");
    if (writeDelay == null) {
      return url + ";" + H2_DURABLE;
    }
    if (!writeDelay.trim().equals("0")) {
      throw invalid("journal.url", "sets WRITE_DELAY=" + writeDelay + ": H2 then acknowledges a commit up to that many"
          + " milliseconds before it writes it, so a killed JVM loses items the journal acknowledged; remove"
          + " WRITE_DELAY (WRITE_DELAY=0 is added) or set WRITE_DELAY=0", url);
    }
    return url;
  }

  /** {@code synchronous_commit=off} in a PostgreSQL URL's {@code options} (plain or URL-encoded). */
  private static final Pattern ASYNC_COMMIT =
      Pattern.compile("synchronous_commit\\s*(=|%3d)\\s*(off|false|no|0)\\b", Pattern.CASE_INSENSITIVE);

  /** The database part of an H2 URL: after {@code jdbc:h2:}, before the first {@code ;}. */
  private static String h2Path(String url) {
    String rest = url.substring(Dialect.H2.urlPrefix.length());
    int semicolon = rest.indexOf(';');
    return semicolon < 0 ? rest : rest.substring(0, semicolon);
  }

  /** The {@code ;KEY=VALUE} settings of an H2 URL, keys upper-cased as H2 reads them. */
  private static Map<String, String> h2Settings(String url) {
    Map<String, String> settings = new HashMap<>();
    String[] parts = url.split(";");
    for (int i = 1; i < parts.length; i++) {
      int eq = parts[i].indexOf('=');
      if (eq > 0) {
        settings.put(parts[i].substring(0, eq).trim().toUpperCase(Locale.ROOT), parts[i].substring(eq + 1));
      }
    }
    return settings;
  }

  private static XlaException invalid(String key, String what, String got) {
    return new XlaException(ErrorCode.INVALID_ARGUMENT, ROOT + "." + key + " " + what + ", got " + got);
  }
}
