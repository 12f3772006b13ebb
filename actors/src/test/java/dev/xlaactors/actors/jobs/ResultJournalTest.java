package dev.xlaactors.actors.jobs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The output file as a journal: what a reopen finds, cuts, refuses and never writes twice. */
class ResultJournalTest {
  @TempDir Path dir;

  @Test
  void reopeningFindsTheFinishedItemsAndCutsAPartialLastLine() throws Exception {
    Path file = dir.resolve("sub/out.tsv");
    try (ResultJournal journal = ResultJournal.open(file, 1)) {
      assertEquals(0, journal.recovered());
      journal.append(0, "1.0");
      journal.append(2, "3.0");
      journal.append(2, "other"); // already there: ignored
    }
    Files.writeString(file, "5\t6.", java.nio.file.StandardOpenOption.APPEND);
    try (ResultJournal journal = ResultJournal.open(file, 1)) {
      assertEquals(2, journal.recovered());
      assertEquals(4, journal.truncatedBytes());
      assertTrue(journal.isDone(0) && journal.isDone(2));
      assertFalse(journal.isDone(1) || journal.isDone(5));
      journal.append(5, "6.0");
    }
    assertEquals(List.of("0\t1.0", "2\t3.0", "5\t6.0"), Files.readAllLines(file));
    assertEquals(Map.of(0L, "1.0", 2L, "3.0", 5L, "6.0"), ResultJournal.read(file));
  }

  @Test
  void aFileInUseOrNotAJournalIsRefused() throws Exception {
    Path file = dir.resolve("out.tsv");
    try (ResultJournal first = ResultJournal.open(file, 1)) {
      FatalJobException inUse = assertThrows(FatalJobException.class, () -> ResultJournal.open(file, 1));
      assertTrue(inUse.getMessage().endsWith("is being written by another job or process"), inUse.getMessage());
      FatalJobException tab = assertThrows(FatalJobException.class, () -> first.append(1, "a\tb"));
      assertTrue(tab.getMessage().contains("contain a tab or a newline"), tab.getMessage());
    }
    Path foreign = dir.resolve("foreign.tsv");
    Files.writeString(foreign, "0\tok\nhello world\n");
    FatalJobException notOurs = assertThrows(FatalJobException.class, () -> ResultJournal.open(foreign, 1));
    assertTrue(notOurs.getMessage().endsWith("foreign.tsv:2 is not 'index<TAB>values': hello world"), notOurs.getMessage());
  }
}
