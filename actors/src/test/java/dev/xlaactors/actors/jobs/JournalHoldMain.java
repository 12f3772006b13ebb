package dev.xlaactors.actors.jobs;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Holds a result journal open in a child JVM for {@link ResultJournalLockTest}: opens {@code args[0]},
 * appends item 0, creates the file {@code args[1]} to say it holds the journal, and sleeps until killed.
 */
public final class JournalHoldMain {
  private JournalHoldMain() {}

  public static void main(String[] args) throws Exception {
    ResultJournal journal = ResultJournal.open(Path.of(args[0]), 1);
    journal.append(0, "holder");
    Files.createFile(Path.of(args[1]));
    Thread.sleep(Long.MAX_VALUE);
  }
}
