package dev.xlaactors.cluster;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;

/**
 * Deletes what an ended job no longer needs from the journal's tables ({@link JobJournalSchema}'s, in
 * both dialects): every event and snapshot before the snapshot it saved as it ended. Pekko Persistence
 * Typed deletes a running job's old rows itself (its retention criteria), but offers an entity no way to
 * delete the rest, so an ended job's item events and its big snapshots (each with every item's outputs)
 * would stay for ever; this removes them with two statements on the job's primary key.
 *
 * <p>What stays is the job's last event ({@code JobEnded}, which also keeps the journal's highest
 * sequence number) and the small snapshot at it: recovery loads that snapshot and replays nothing, so a
 * later {@code Ensure} finds the job ended. Called off the actor's thread (it blocks on the database).
 */
final class JobJournalRetention {
  private JobJournalRetention() {}

  // Quoted lower-case names: the H2 tables were created quoted, the PostgreSQL ones unquoted (lower case).
  private static final String EVENTS = "DELETE FROM \"event_journal\" WHERE \"persistence_id\" = ? AND \"sequence_number\" < ?";
  private static final String SNAPSHOTS = "DELETE FROM \"snapshot\" WHERE \"persistence_id\" = ? AND \"sequence_number\" < ?";

  /**
   * Deletes {@code persistenceId}'s events and snapshots with a sequence number below {@code sequenceNr}
   * (that of the ended job's snapshot), in one transaction; returns how many rows went.
   */
  static int deleteBefore(JobJournalSettings settings, String persistenceId, long sequenceNr) throws SQLException {
    try (Connection connection = DriverManager.getConnection(settings.url(), settings.user(), settings.password())) {
      connection.setAutoCommit(false);
      try {
        int deleted = delete(connection, EVENTS, persistenceId, sequenceNr) + delete(connection, SNAPSHOTS, persistenceId, sequenceNr);
        connection.commit();
        return deleted;
      } catch (SQLException e) {
        connection.rollback();
        throw e;
      }
    }
  }

  private static int delete(Connection connection, String sql, String persistenceId, long sequenceNr) throws SQLException {
    try (PreparedStatement statement = connection.prepareStatement(sql)) {
      statement.setString(1, persistenceId);
      statement.setLong(2, sequenceNr);
      return statement.executeUpdate();
    }
  }
}
