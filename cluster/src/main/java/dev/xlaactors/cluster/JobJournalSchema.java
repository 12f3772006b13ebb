package dev.xlaactors.cluster;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;

/**
 * Creates the tables pekko-persistence-jdbc writes to (its journal, tags and snapshots, in the layout of
 * its version 1.1), if they are missing. Every statement is {@code IF NOT EXISTS}, so every node runs it
 * at start; two nodes creating the same table at once can still collide in PostgreSQL's catalog, so a
 * failed attempt is repeated.
 */
final class JobJournalSchema {
  private JobJournalSchema() {}

  private static final List<String> H2 = List.of(
      """
      CREATE TABLE IF NOT EXISTS PUBLIC."event_journal" (
        "ordering" BIGINT UNIQUE NOT NULL AUTO_INCREMENT, "deleted" BOOLEAN DEFAULT false NOT NULL,
        "persistence_id" VARCHAR(255) NOT NULL, "sequence_number" BIGINT NOT NULL, "writer" VARCHAR NOT NULL,
        "write_timestamp" BIGINT NOT NULL, "adapter_manifest" VARCHAR NOT NULL, "event_payload" BLOB NOT NULL,
        "event_ser_id" INTEGER NOT NULL, "event_ser_manifest" VARCHAR NOT NULL, "meta_payload" BLOB,
        "meta_ser_id" INTEGER, "meta_ser_manifest" VARCHAR, PRIMARY KEY("persistence_id", "sequence_number"))""",
      """
      CREATE UNIQUE INDEX IF NOT EXISTS "event_journal_ordering_idx" ON PUBLIC."event_journal" ("ordering")""",
      """
      CREATE TABLE IF NOT EXISTS PUBLIC."event_tag" ("event_id" BIGINT NOT NULL, "tag" VARCHAR NOT NULL,
        PRIMARY KEY("event_id", "tag"), CONSTRAINT "fk_event_journal" FOREIGN KEY("event_id")
        REFERENCES "event_journal"("ordering") ON DELETE CASCADE)""",
      """
      CREATE TABLE IF NOT EXISTS PUBLIC."snapshot" ("persistence_id" VARCHAR(255) NOT NULL,
        "sequence_number" BIGINT NOT NULL, "created" BIGINT NOT NULL, "snapshot_ser_id" INTEGER NOT NULL,
        "snapshot_ser_manifest" VARCHAR NOT NULL, "snapshot_payload" BLOB NOT NULL, "meta_ser_id" INTEGER,
        "meta_ser_manifest" VARCHAR, "meta_payload" BLOB, PRIMARY KEY("persistence_id", "sequence_number"))""");

  private static final List<String> POSTGRESQL = List.of(
      """
      CREATE TABLE IF NOT EXISTS public.event_journal (ordering BIGSERIAL, persistence_id VARCHAR(255) NOT NULL,
        sequence_number BIGINT NOT NULL, deleted BOOLEAN DEFAULT FALSE NOT NULL, writer VARCHAR(255) NOT NULL,
        write_timestamp BIGINT, adapter_manifest VARCHAR(255), event_ser_id INTEGER NOT NULL,
        event_ser_manifest VARCHAR(255) NOT NULL, event_payload BYTEA NOT NULL, meta_ser_id INTEGER,
        meta_ser_manifest VARCHAR(255), meta_payload BYTEA, PRIMARY KEY(persistence_id, sequence_number))""",
      "CREATE UNIQUE INDEX IF NOT EXISTS event_journal_ordering_idx ON public.event_journal(ordering)",
      """
      CREATE TABLE IF NOT EXISTS public.event_tag (event_id BIGINT, tag VARCHAR(256), PRIMARY KEY(event_id, tag),
        CONSTRAINT fk_event_journal FOREIGN KEY(event_id) REFERENCES event_journal(ordering) ON DELETE CASCADE)""",
      """
      CREATE TABLE IF NOT EXISTS public.snapshot (persistence_id VARCHAR(255) NOT NULL, sequence_number BIGINT NOT NULL,
        created BIGINT NOT NULL, snapshot_ser_id INTEGER NOT NULL, snapshot_ser_manifest VARCHAR(255) NOT NULL,
        snapshot_payload BYTEA NOT NULL, meta_ser_id INTEGER, meta_ser_manifest VARCHAR(255), meta_payload BYTEA,
        PRIMARY KEY(persistence_id, sequence_number))""");

  private static final int ATTEMPTS = 5;

  /** Creates the missing tables; an {@link XlaException} (UNAVAILABLE) names the URL when it cannot. */
  static void ensure(JobJournalSettings settings) {
    boolean h2 = settings.dialect() == JobJournalSettings.Dialect.H2;
    if (h2 && System.getProperty("h2.bindAddress") == null) {
      // An H2 journal is for the nodes of one machine: the JVM that serves it to the others listens on
      // loopback only (H2 reads this before its first connection).
      System.setProperty("h2.bindAddress", "127.0.0.1");
    }
    settings.h2Directory().ifPresent(JobJournalSchema::createPrivately);
    List<String> statements = h2 ? H2 : POSTGRESQL;
    SQLException last = null;
    for (int attempt = 1; attempt <= ATTEMPTS; attempt++) {
      try (Connection connection = DriverManager.getConnection(settings.url(), settings.user(), settings.password());
          Statement statement = connection.createStatement()) {
        for (String sql : statements) {
          statement.execute(sql);
        }
        return;
      } catch (SQLException e) {
        last = e;
        try {
          Thread.sleep(100L * attempt);
        } catch (InterruptedException interrupted) {
          Thread.currentThread().interrupt();
          break;
        }
      }
    }
    throw new XlaException(ErrorCode.UNAVAILABLE,
        "cannot create the job journal's tables at xla-actors.cluster.jobs.journal.url = " + settings.url()
            + " after " + ATTEMPTS + " attempts: " + last.getMessage() + " (is the database running and reachable?)", last);
  }

  /**
   * Creates {@code directory} (and missing parents) readable by this user only, where the file system has
   * POSIX permissions: H2 would create it with the umask's (usually world-readable), and whoever can read
   * the journal's file can open a copy of it. An existing directory is left as it is.
   */
  private static void createPrivately(Path directory) {
    if (Files.isDirectory(directory)) {
      return;
    }
    try {
      if (directory.getFileSystem().supportedFileAttributeViews().contains("posix")) {
        Files.createDirectories(directory, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
      } else {
        Files.createDirectories(directory);
      }
    } catch (IOException e) {
      throw new XlaException(ErrorCode.UNAVAILABLE, "cannot create the job journal's directory " + directory
          + " (xla-actors.cluster.jobs.journal.url): " + e + "; create it or choose another path", e);
    }
  }
}
