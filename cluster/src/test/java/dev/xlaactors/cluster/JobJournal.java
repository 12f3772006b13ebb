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

  /** How many items of job {@code id} are in the journal. */
  long itemsDone(String id) throws SQLException {
    return events(id).stream().filter(e -> e instanceof ShardedBatchJobs.ItemScored).count();
  }

  @Override
  public void close() throws SQLException {
    connection.close();
  }
}
