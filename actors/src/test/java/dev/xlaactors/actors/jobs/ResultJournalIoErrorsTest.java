package dev.xlaactors.actors.jobs;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A journal that cannot be read or created fails with a FatalJobException naming the file, not a raw IOException. */
class ResultJournalIoErrorsTest {
  @TempDir Path dir;

  @Test
  void ioFailuresAreFatalJobExceptionsNamingTheFile() throws Exception {
    Path directory = Files.createDirectory(dir.resolve("a-directory"));
    FatalJobException read = assertThrows(FatalJobException.class, () -> ResultJournal.read(directory));
    assertTrue(read.getMessage().startsWith(directory + " cannot be read as a result journal: "), read.getMessage());

    Path notADirectory = Files.writeString(dir.resolve("plain-file"), "x");
    Path under = notADirectory.resolve("out.tsv");
    FatalJobException open = assertThrows(FatalJobException.class, () -> ResultJournal.open(under, 1));
    assertTrue(open.getMessage().startsWith(under + " cannot be opened as a result journal: "), open.getMessage());
    assertTrue(open.getMessage().contains("give the job a file it can read and write"), open.getMessage());
  }
}
