package dev.xlaactors.cluster;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;

/**
 * Reads a batch job's events straight from the journal's table with JDBC, decoded by the job serializer,
 * so tests see exactly what was written (not what a node believes). Holding it open also keeps an H2
 * journal served by this JVM.
 */
final class JobJournal implements AutoCloseable {
  private final Connection connection;
  private final ShardedJobSerializer serializer = new ShardedJobSerializer(null);

  JobJournal(String url, String user, String password) throws SQLException {
    if (url.startsWith("jdbc:h2:")) {
      System.setProperty("h2.bindAddress", "127.0.0.1");
    }
    this.connection = DriverManager.getConnection(url, user, password);
    JobJournalSchema.ensure(new JobJournalSettings(url, user, password, 1, 1, java.time.Duration.ofSeconds(1)));
  }

  /** The events of job {@code id} in the order they were written (empty before the job wrote any). */
  List<ShardedBatchJobs.Event> events(String id) throws SQLException {
    List<ShardedBatchJobs.Event> events = new ArrayList<>();
    try (PreparedStatement query = connection.prepareStatement(
        "SELECT \"event_ser_manifest\", \"event_payload\" FROM \"event_journal\""
            + " WHERE \"persistence_id\" = ? ORDER BY \"sequence_number\"")) {
      query.setString(1, ShardedBatchJobs.persistenceIdOf(id).id());
      try (ResultSet rows = query.executeQuery()) {
        while (rows.next()) {
          events.add((ShardedBatchJobs.Event) serializer.fromBinary(rows.getBytes(2), rows.getString(1)));
        }
      }
    }
    return events;
  }

  /**
   * How many items of job {@code id} are in the journal: those of its newest snapshot and of its events
   * (the retention deletes the events a snapshot holds). 0 once the job ended (its state drops them).
   */
  long itemsDone(String id) throws SQLException {
    java.util.Set<Long> items = new java.util.HashSet<>();
    newestSnapshot(id).ifPresent(s -> items.addAll(s.lines().keySet()));
    for (ShardedBatchJobs.Event e : events(id)) {
      if (e instanceof ShardedBatchJobs.ItemScored item) {
        items.add(item.item());
      }
    }
    return items.size();
  }

  /** Job {@code id}'s newest snapshot, if it has one. */
  java.util.Optional<ShardedBatchJobs.JobSnapshot> newestSnapshot(String id) throws SQLException {
    try (PreparedStatement query = connection.prepareStatement(
        "SELECT \"snapshot_ser_manifest\", \"snapshot_payload\" FROM \"snapshot\""
            + " WHERE \"persistence_id\" = ? ORDER BY \"sequence_number\" DESC")) {
      query.setString(1, ShardedBatchJobs.persistenceIdOf(id).id());
      try (ResultSet rows = query.executeQuery()) {
        return rows.next()
            ? java.util.Optional.of((ShardedBatchJobs.JobSnapshot) serializer.fromBinary(rows.getBytes(2), rows.getString(1)))
            : java.util.Optional.empty();
      }
    }
  }

  /** Rows of job {@code id}: its events (deleted-marked ones too) and its snapshots. */
  Rows rows(String id) throws SQLException {
    String persistenceId = ShardedBatchJobs.persistenceIdOf(id).id();
    return new Rows(count("\"event_journal\" WHERE \"persistence_id\" = ?", persistenceId),
        count("\"snapshot\" WHERE \"persistence_id\" = ?", persistenceId));
  }

  /** Rows of the whole journal: every persistence id (jobs and sharding's remembered entities). */
  Rows allRows() throws SQLException {
    return new Rows(count("\"event_journal\"", null), count("\"snapshot\"", null));
  }

  /** Event and snapshot rows. */
  record Rows(long events, long snapshots) {
    long total() {
      return events + snapshots;
    }

    @Override
    public String toString() {
      return total() + " rows (" + events + " events, " + snapshots + " snapshots)";
    }
  }

  private long count(String from, String persistenceId) throws SQLException {
    try (PreparedStatement query = connection.prepareStatement("SELECT COUNT(*) FROM " + from)) {
      if (persistenceId != null) {
        query.setString(1, persistenceId);
      }
      try (ResultSet rows = query.executeQuery()) {
        rows.next();
        return rows.getLong(1);
      }
    }
  }

  @Override
  public void close() throws SQLException {
    connection.close();
  }
}
