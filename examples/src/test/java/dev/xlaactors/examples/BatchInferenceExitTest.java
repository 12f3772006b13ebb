package dev.xlaactors.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.jobs.ResultJournal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The batch example's exit status says whether the job succeeded: a failed job exits 1 (it exited 0). */
class BatchInferenceExitTest {
  @TempDir Path dir;

  private static Process start(Path output, String items) throws Exception {
    List<String> command = List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-cp", System.getProperty("java.class.path"), BatchInference.class.getName(), output.toString(), items, "0");
    return new ProcessBuilder(command).redirectErrorStream(true).start();
  }

  private static String finish(Process p) throws Exception {
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(120, TimeUnit.SECONDS), "the example did not end");
    return out;
  }

  @Test
  void aFailedJobExitsNonZeroAndASuccessfulOneZero() throws Exception {
    Path output = dir.resolve("out.tsv");
    try (ResultJournal held = ResultJournal.open(output, 1)) { // another writer holds the output: the job fails
      Process p = start(output, "3");
      String out = finish(p);
      assertEquals(1, p.exitValue(), out);
      assertTrue(out.contains("result: Failed"), out);
    }
    Process ok = start(output, "3");
    String out = finish(ok);
    assertEquals(0, ok.exitValue(), out);
    assertTrue(out.contains("result: Completed"), out);
  }
}
