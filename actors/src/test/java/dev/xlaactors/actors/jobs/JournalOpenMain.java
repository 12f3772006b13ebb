package dev.xlaactors.actors.jobs;

import java.nio.file.Path;

/**
 * Opens a result journal in a child JVM for {@link ResultJournalLockTest}: prints {@code OPENED} and exits 0
 * when the open succeeded (appending item {@code args[1]} if given), or prints the refusal and exits 3.
 * Usage: {@code JournalOpenMain <file> [index]}.
 */
public final class JournalOpenMain {
  private JournalOpenMain() {}

  public static void main(String[] args) throws Exception {
    try (ResultJournal journal = ResultJournal.open(Path.of(args[0]), 1)) {
      if (args.length > 1) {
        journal.append(Long.parseLong(args[1]), "child");
      }
      System.out.println("OPENED");
    } catch (FatalJobException refused) {
      System.out.println("REFUSED " + refused.getMessage());
      System.exit(3);
    }
  }
}
