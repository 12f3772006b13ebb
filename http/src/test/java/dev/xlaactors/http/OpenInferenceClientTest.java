package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The Open Inference Protocol as its reference client speaks it: {@code src/test/python/oip_client_check.py}
 * drives a live server ({@link OpenInferenceFixture}) with {@code tritonclient[http]} from the venv of
 * {@code tools/triton-client-env.sh} (made on first use from PyPI): health, metadata, FP32 and INT32
 * inference through InferInput/InferRequestedOutput, output selection, and refusals raised as
 * InferenceServerException. Skipped only where there is no python3.
 */
class OpenInferenceClientTest {
  private static final Path TOOLS = Path.of("..", "tools", "triton-client-env.sh");
  private static final Path SCRIPT = Path.of("src", "test", "python", "oip_client_check.py");

  @Test
  void tritonClientAgainstLiveServer() throws Exception {
    Assumptions.assumeTrue(onPath("python3"), "python3 is not on the PATH: the tritonclient check needs it (tools/triton-client-env.sh)");
    String python = run(List.of("bash", TOOLS.toString()), 600).strip();
    python = python.lines().reduce((a, b) -> b).orElse(""); // the script's last line is the venv's python
    assertTrue(Files.isExecutable(Path.of(python)), "tools/triton-client-env.sh printed no python: " + python);
    try (OpenInferenceFixture fixture = new OpenInferenceFixture("open-inference-client-test")) {
      String out = run(List.of(python, SCRIPT.toString(), fixture.http.url().substring("http://".length())), 120);
      assertTrue(out.contains("ok: FP32 infer of 2 rows") && out.contains("ok: INT32 infer") && out.strip().endsWith("ALL OK"), out);
    }
  }

  private static boolean onPath(String program) {
    for (String dir : System.getenv().getOrDefault("PATH", "").split(java.io.File.pathSeparator)) {
      if (Files.isExecutable(Path.of(dir, program))) {
        return true;
      }
    }
    return false;
  }

  /** Runs {@code command}, returns its output (stdout and stderr), failing on a non-zero exit or after {@code seconds}. */
  private static String run(List<String> command, int seconds) throws IOException, InterruptedException {
    Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
    byte[][] out = new byte[1][];
    Thread reader = new Thread(() -> {
      try {
        out[0] = p.getInputStream().readAllBytes();
      } catch (IOException e) {
        out[0] = ("reading its output failed: " + e).getBytes(StandardCharsets.UTF_8);
      }
    });
    reader.start();
    if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      reader.join(5000);
      throw new AssertionError(command + " ran past " + seconds + " s");
    }
    reader.join(5000);
    String text = out[0] == null ? "" : new String(out[0], StandardCharsets.UTF_8);
    assertEquals(0, p.exitValue(), command + " failed:\n" + text);
    return text;
  }
}
