package dev.xlaactors.actors.jobs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The journal's lock is held for the journal's whole life: another JVM (a child process) and another job
 * of this JVM are refused while it is open, whatever else this JVM does with the file meanwhile (reading it,
 * a refused second open), and the refusal names the file and the holder's pid.
 */
class ResultJournalLockTest {
  @TempDir Path dir;

  private static final long PID = ProcessHandle.current().pid();

  @Test
  void anotherJvmIsRefusedWhileTheJournalIsOpenNamingTheFileAndThePid() throws Exception {
    Path file = dir.resolve("out.tsv");
    try (ResultJournal journal = ResultJournal.open(file, 1)) {
      journal.append(0, "parent");
      Child child = openInChild(file, 1);
      assertEquals(3, child.exit(), child.output());
      assertTrue(child.output().contains("REFUSED " + file), child.output());
      assertTrue(child.output().contains("pid " + PID), child.output());

      // Reading the file in this JVM (a second descriptor, closed again) must not release the lock.
      assertEquals(Map.of(0L, "parent"), ResultJournal.read(file));
      // Nor may a refused second open of this JVM.
      FatalJobException inJvm = assertThrows(FatalJobException.class, () -> ResultJournal.open(file, 1));
      assertTrue(inJvm.getMessage().startsWith(file + " is being written by another job of this JVM (pid " + PID + ")"),
          inJvm.getMessage());
      Child again = openInChild(file, 2);
      assertEquals(3, again.exit(), again.output());
      journal.append(3, "parent");
    }
    assertEquals(Map.of(0L, "parent", 3L, "parent"), ResultJournal.read(file), "the child wrote nothing");
    Child after = openInChild(file, 4);
    assertEquals(0, after.exit(), after.output());
    assertEquals(Map.of(0L, "parent", 3L, "parent", 4L, "child"), ResultJournal.read(file));
  }

  @Test
  void aJvmHoldingTheFileRefusesThisOneNamingItsPid() throws Exception {
    Path file = dir.resolve("held.tsv");
    Path ready = dir.resolve("ready");
    List<String> command = List.of(javaBin(), "-cp", System.getProperty("java.class.path"),
        JournalHoldMain.class.getName(), file.toString(), ready.toString());
    Process holder = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(dir.resolve("holder.log").toFile()).start();
    try {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (!Files.exists(ready) && holder.isAlive() && System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
      assertTrue(Files.exists(ready), "holder did not open the journal: " + Files.readString(dir.resolve("holder.log")));
      FatalJobException e = assertThrows(FatalJobException.class, () -> ResultJournal.open(file, 1));
      assertTrue(e.getMessage().startsWith(file + " is being written by another process (pid " + holder.pid() + ")"), e.getMessage());
      assertEquals(Map.of(0L, "holder"), ResultJournal.read(file));
    } finally {
      holder.destroyForcibly();
      holder.waitFor(30, TimeUnit.SECONDS);
    }
    try (ResultJournal journal = ResultJournal.open(file, 1)) {
      assertEquals(1, journal.recovered(), "the holder's line survived; its lock died with it");
    }
  }

  private record Child(int exit, String output) {}

  private static String javaBin() {
    return Path.of(System.getProperty("java.home"), "bin", "java").toString();
  }

  private static Child openInChild(Path file, long index) throws Exception {
    Process p = new ProcessBuilder(javaBin(), "-cp", System.getProperty("java.class.path"), JournalOpenMain.class.getName(),
        file.toString(), Long.toString(index)).redirectErrorStream(true).start();
    String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS), "child did not finish");
    return new Child(p.exitValue(), output);
  }
}
