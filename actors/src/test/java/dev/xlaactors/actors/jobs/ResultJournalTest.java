package dev.xlaactors.actors.jobs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.zip.CRC32;
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
    Files.writeString(file, "5\t6.", StandardOpenOption.APPEND);
    try (ResultJournal journal = ResultJournal.open(file, 1)) {
      assertEquals(2, journal.recovered());
      assertEquals(4, journal.truncatedBytes());
      assertTrue(journal.isDone(0) && journal.isDone(2));
      assertFalse(journal.isDone(1) || journal.isDone(5));
      journal.append(5, "6.0");
    }
    assertEquals(ResultJournal.line(0, "1.0") + ResultJournal.line(2, "3.0") + ResultJournal.line(5, "6.0"), Files.readString(file));
    assertEquals("0\t1.0\t" + crc32("0\t1.0") + "\n", ResultJournal.line(0, "1.0"));
    assertEquals(Map.of(0L, "1.0", 2L, "3.0", 5L, "6.0"), ResultJournal.read(file));
  }

  @Test
  void aFileInUseOrNotAJournalIsRefused() throws Exception {
    Path file = dir.resolve("out.tsv");
    try (ResultJournal first = ResultJournal.open(file, 1)) {
      FatalJobException inUse = assertThrows(FatalJobException.class, () -> ResultJournal.open(file, 1));
      assertTrue(inUse.getMessage().startsWith(file + " is being written by another job of this JVM"), inUse.getMessage());
      FatalJobException tab = assertThrows(FatalJobException.class, () -> first.append(1, "a\tb"));
      assertTrue(tab.getMessage().contains("contain a tab or a newline"), tab.getMessage());
    }
    Path foreign = dir.resolve("foreign.tsv");
    Files.writeString(foreign, ResultJournal.line(0, "ok") + "hello world\n" + ResultJournal.line(1, "ok"));
    FatalJobException notOurs = assertThrows(FatalJobException.class, () -> ResultJournal.open(foreign, 1));
    assertTrue(notOurs.getMessage().startsWith(foreign + ":2 is not a result journal line: 'hello world'; a journal line is 'index<TAB>values<TAB>crc32'"),
        notOurs.getMessage());
  }

  @Test
  void aFileThatIsNotAJournalIsRefusedAndLeftExactlyAsItWas() throws Exception {
    for (String csv : List.of("id,score\n1,0.5\n2,0.7", "1,0.5\n", "1,0.5", "0\t1.0\n1\t2.0\n")) {
      Path file = dir.resolve("data.csv");
      Files.writeString(file, csv);
      FatalJobException e = assertThrows(FatalJobException.class, () -> ResultJournal.open(file, 1), csv);
      assertTrue(e.getMessage().startsWith(file + ":1 is not a result journal line"), e.getMessage());
      assertTrue(e.getMessage().contains("nothing in it was changed"), e.getMessage());
      assertEquals(csv, Files.readString(file), "a refused file is not changed");
      assertThrows(FatalJobException.class, () -> ResultJournal.read(file));
    }
  }

  @Test
  void aTornOrNulFilledLastLineIsCutByItsCrcButABadLineInTheMiddleIsRefused() throws Exception {
    String good = ResultJournal.line(0, "1.0") + ResultJournal.line(1, "2.0");
    String wrongCrc = "2\t3.0\t00000000\n";
    for (String tail : List.of(wrongCrc, "\0\0\0\0\0\0\0\0\0\0", "2\t3.0\t1c\0\0\0\0\0\0\n", "2\t3.0\t")) {
      Path file = dir.resolve("torn.tsv");
      Files.writeString(file, good + tail);
      try (ResultJournal journal = ResultJournal.open(file, 1)) {
        assertEquals(2, journal.recovered());
        assertEquals(tail.getBytes(StandardCharsets.UTF_8).length, journal.truncatedBytes());
        assertFalse(journal.isDone(2));
        journal.append(2, "3.0");
      }
      assertEquals(good + ResultJournal.line(2, "3.0"), Files.readString(file));
    }
    Path middle = dir.resolve("middle.tsv");
    Files.writeString(middle, ResultJournal.line(0, "1.0") + wrongCrc + ResultJournal.line(1, "2.0"));
    FatalJobException e = assertThrows(FatalJobException.class, () -> ResultJournal.open(middle, 1));
    assertTrue(e.getMessage().startsWith(middle + ":2 is not a result journal line"), e.getMessage());
  }

  @Test
  void aNewJournalIsOwnerOnlyAndADirectoryIsRefusedByName() throws Exception {
    Path file = dir.resolve("new.tsv");
    try (ResultJournal journal = ResultJournal.open(file, 1)) {
      journal.append(0, "1.0");
    }
    assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(file)));
    FatalJobException e = assertThrows(FatalJobException.class, () -> ResultJournal.open(dir, 1));
    assertTrue(e.getMessage().equals(dir + " is a directory; give the job a file to write its results to"), e.getMessage());
  }

  private static String crc32(String s) {
    CRC32 crc = new CRC32();
    crc.update(s.getBytes(StandardCharsets.UTF_8));
    return String.format("%08x", crc.getValue());
  }
}
