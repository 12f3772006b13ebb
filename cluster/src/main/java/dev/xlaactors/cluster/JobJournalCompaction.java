package dev.xlaactors.cluster;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.SettingRanges;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.pekko.actor.Cancellable;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.h2.engine.Session;
import org.h2.engine.SessionLocal;
import org.h2.jdbc.JdbcConnection;
import org.h2.mvstore.MVStore;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps an H2 job journal's file small while nodes run. With {@code WRITE_DELAY=0} (every H2 journal has it:
 * a commit is written before it is acknowledged) H2 writes a new chunk per commit and never runs its
 * background housekeeping, which is what reuses the space of dead chunks; so the file only grew (600 MB in the
 * 100,000-run soak, 0.08 MB once compacted). Every {@code compact-interval} this compacts it in place, as
 * {@code SHUTDOWN COMPACT} does at the end, for at most about {@code compact-time}: H2's {@link
 * MVStore#compactFile} rewrites the live pages of sparse chunks into new ones, forces the file to the disk, then
 * moves chunks down and truncates the file. It runs in the JVM that has the file open ({@code
 * AUTO_SERVER}: the one serving it; the others connect over TCP and do nothing here), on the blocking
 * dispatcher, under H2's store lock, so commits wait for it (milliseconds).
 *
 * <p>{@code compactFile} overwrites dead chunks at once (it sets the store's retention time to 0); the
 * retention time is restored after it, so between compactions H2 keeps its default of not reusing a chunk for
 * 45 s. Uses H2's engine classes ({@code SessionLocal}, {@code Store}), not only JDBC: pinned to H2 2.2.224 by
 * the build. Thread-safe.
 */
final class JobJournalCompaction implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(JobJournalCompaction.class);
  private static final String ROOT = "xla-actors.cluster.jobs.journal";

  /**
   * How often and how long the journal is compacted.
   *
   * @param interval time between compactions; zero: never
   * @param time how long one compaction may take (it stops after the step that passes it)
   */
  record Settings(Duration interval, Duration time) {
    /** From {@code xla-actors.cluster.jobs.journal.compact-interval} and {@code compact-time}. */
    static Settings fromConfig(Config config) {
      try {
        Config c = config.getConfig(ROOT);
        Duration interval = SettingRanges.duration(c, "compact-interval", ROOT + ".compact-interval", true, Duration.ofHours(24), "24h");
        Duration time = SettingRanges.duration(c, "compact-time", ROOT + ".compact-time", false, Duration.ofMinutes(1), "1m");
        return new Settings(interval, time);
      } catch (ConfigException e) {
        throw new XlaException(ErrorCode.INVALID_ARGUMENT, "bad job journal configuration: " + e.getMessage(), e);
      }
    }
  }

  private final JobJournalSettings journal;
  private final Settings settings;
  private final AtomicBoolean stopped = new AtomicBoolean();
  private final AtomicLong compactions = new AtomicLong();
  private volatile Cancellable timer;

  private JobJournalCompaction(JobJournalSettings journal, Settings settings) {
    this.journal = journal;
    this.settings = settings;
  }

  /**
   * Compacts {@code journal} every {@code settings.interval()} on {@code system}'s blocking dispatcher until
   * {@link #close()} or the system ends; empty for a journal that is not an H2 file (PostgreSQL keeps its own
   * files compact; an in-memory one has none) or when the interval is zero.
   */
  static Optional<JobJournalCompaction> start(ActorSystem<?> system, JobJournalSettings journal, Settings settings) {
    if (journal.dialect() != JobJournalSettings.Dialect.H2 || journal.inMemory() || settings.interval().isZero()) {
      return Optional.empty();
    }
    JobJournalCompaction compaction = new JobJournalCompaction(journal, settings);
    compaction.timer = system.scheduler().scheduleWithFixedDelay(settings.interval(), settings.interval(), compaction::compactLogged,
        system.dispatchers().lookup(DispatcherSelector.blocking()));
    system.getWhenTerminated().whenComplete((done, failure) -> compaction.close());
    return Optional.of(compaction);
  }

  private void compactLogged() {
    try {
      if (!compact()) {
        LOG.info("the job journal {} is served by another JVM (AUTO_SERVER): that one compacts it", journal.url());
        close();
      }
    } catch (SQLException | RuntimeException e) {
      if (!stopped.get()) {
        // The next interval tries again; the file only grows meanwhile.
        LOG.warn("compacting the job journal {} failed: {}", journal.url(), e.toString());
      }
    }
  }

  /**
   * Compacts the file once; false when this JVM does not hold it (it reaches the journal over TCP). Also what
   * the timer runs.
   */
  boolean compact() throws SQLException {
    if (stopped.get()) {
      return true;
    }
    try (Connection connection = DriverManager.getConnection(journal.url(), journal.user(), journal.password())) {
      Session session = connection.unwrap(JdbcConnection.class).getSession();
      if (!(session instanceof SessionLocal local)) {
        return false;
      }
      MVStore store = local.getDatabase().getStore().getMvStore();
      int retention = store.getRetentionTime();
      try {
        store.compactFile((int) Math.min(Integer.MAX_VALUE, settings.time().toMillis()));
      } finally {
        store.setRetentionTime(retention);
      }
      compactions.incrementAndGet();
      return true;
    }
  }

  /** How many compactions have ended since {@link #start}, by the timer or {@link #compact()}. */
  long compactions() {
    return compactions.get();
  }

  /** Stops compacting (a compaction under way finishes). */
  @Override
  public void close() {
    if (stopped.compareAndSet(false, true) && timer != null) {
      timer.cancel();
    }
  }
}
