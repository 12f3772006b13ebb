package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A run that runs out of direct memory fails with a clear error and the runtime keeps serving (issue 24,
 * critical 2): before, the OutOfMemoryError of the output download escaped into Pekko and the JVM exited
 * with status 255. The child JVM ({@link DirectMemoryChild}) runs with {@code -XX:MaxDirectMemorySize=64m}
 * and Pekko's default exit on fatal errors.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class DirectMemoryTest {
  @Test
  void aRunThatNeedsMoreDirectMemoryThanTheLimitFailsClearlyAndTheNextRunsSucceed(@TempDir Path dir) throws Exception {
    Path log = dir.resolve("child.log");
    Process child = new ProcessBuilder(
        Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-XX:MaxDirectMemorySize=64m", "-Xmx512m",
        "-cp", System.getProperty("java.class.path"), DirectMemoryChild.class.getName())
        .redirectErrorStream(true).redirectOutput(log.toFile()).start();
    boolean ended = child.waitFor(240, TimeUnit.SECONDS);
    if (!ended) {
      child.destroyForcibly();
    }
    String out = Files.readString(log);
    assertTrue(ended, "the child JVM hung:\n" + out);
    assertEquals(0, child.exitValue(), "the child JVM exited with " + child.exitValue() + ":\n" + out);
    List<String> lines = out.lines().toList();
    String bigOutput = line(lines, "BIG-OUTPUT ", out);
    // The download of the 96 MiB output: the bytes asked, the limit and the setting to raise.
    assertTrue(bigOutput.startsWith("BIG-OUTPUT FAILED dev.xlaactors.error.XlaException: "), bigOutput);
    assertTrue(bigOutput.contains("100663296 bytes"), bigOutput);
    assertTrue(bigOutput.contains("67108864 bytes"), bigOutput);
    assertTrue(bigOutput.contains("-XX:MaxDirectMemorySize"), bigOutput);
    // The 96 MiB callback input: the same, naming the callback.
    String bigInput = line(lines, "BIG-INPUT ", out);
    assertTrue(bigInput.startsWith("BIG-INPUT FAILED "), bigInput);
    assertTrue(bigInput.contains("'sink'") && bigInput.contains("100663296 bytes") && bigInput.contains("-XX:MaxDirectMemorySize"),
        bigInput);
    assertEquals("SMALL 20", line(lines, "SMALL ", out));
    // Both failed runs are counted as ended and failed, the 20 that fit as ended.
    assertEquals("RUNS 22 failed 2", line(lines, "RUNS ", out));
    assertEquals("DONE", line(lines, "DONE", out));
  }

  private static String line(List<String> lines, String prefix, String all) {
    return lines.stream().filter(l -> l.startsWith(prefix)).findFirst()
        .orElseThrow(() -> new AssertionError("no line starting '" + prefix + "' in:\n" + all));
  }
}
