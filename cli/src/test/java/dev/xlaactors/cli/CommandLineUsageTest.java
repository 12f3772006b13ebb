package dev.xlaactors.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Every bad argument or package gets a message naming what is wrong, the command's usage line, and exit status 2. */
class CommandLineUsageTest {

  private static String[] run(String... args) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int status = XlaActorsCli.run(List.of(args), new PrintStream(out, true, StandardCharsets.UTF_8),
        new PrintStream(err, true, StandardCharsets.UTF_8));
    return new String[] {Integer.toString(status), out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8)};
  }

  private static void refused(String expected, String... args) {
    String[] r = run(args);
    assertEquals("2", r[0], String.join(" ", args) + " -> " + r[2]);
    assertTrue(r[2].contains(expected), "expected '" + expected + "' in: " + r[2]);
    assertTrue(r[2].contains("usage: bin/xla-actors"), "a usage line in: " + r[2]);
  }

  @Test
  void noCommandPrintsTheUsage() {
    refused("usage: bin/xla-actors <command>");
  }

  @Test
  void anUnknownCommandIsNamed() {
    refused("unknown command 'frobnicate'", "frobnicate");
  }

  @Test
  void anUnknownOptionIsNamedWithTheOnesTaken(@TempDir Path dir) {
    refused("unknown option '--colour'", "score", dir.toString(), "--tokens", "1", "--colour", "red");
  }

  @Test
  void aDirectoryThatIsNoPackageIsNamed(@TempDir Path dir) {
    refused("xla-model.json", "score", dir.toString(), "--tokens", "1,2");
    refused("is not a directory", "generate", dir.resolve("missing").toString(), "hello");
  }

  @Test
  void importChecksItsArgumentsBeforeRunningAnything(@TempDir Path dir) throws IOException {
    refused("the format 'gguf' is not known", "import", "gguf", dir.toString(), "--out", dir.resolve("p").toString());
    refused("has no config.json", "import", "hf", dir.toString(), "--out", dir.resolve("p").toString());
    Files.writeString(dir.resolve("config.json"), "{}");
    refused("--out PKG is required", "import", "hf", dir.toString());
    refused("--dtype takes as-is, f32, bf16 or f16, got 'f8'", "import", "hf", dir.toString(), "--out", dir.resolve("p").toString(),
        "--dtype", "f8");
    refused("--kv-cache-memory takes a byte count such as 1GiB", "import", "hf", dir.toString(), "--out",
        dir.resolve("p").toString(), "--kv-cache-memory", "lots");
    refused("--context-length and --max-model-len are the same option", "import", "hf", dir.toString(), "--out",
        dir.resolve("p").toString(), "--context-length", "512", "--max-model-len", "1024");
    refused("--prefill-chunks", "import", "hf", dir.toString(), "--out", dir.resolve("p").toString(), "--prefill-chunks", "32,x");
    refused("--kv-cache-dtype takes f32, f16, bf16, got 'fp8'", "import", "hf", dir.toString(), "--out", dir.resolve("p").toString(),
        "--kv-cache-dtype", "fp8");
  }

  @Test
  void badNumbersAndTokenListsAreNamed(@TempDir Path dir) {
    refused("--port 70000 is outside 0..65535", "serve", dir.toString(), "--port", "70000");
    refused("takes comma-separated token ids", "embed", dir.toString(), "--tokens", "1,x;2");
    refused("--port needs a value", "serve", dir.toString(), "--port");
  }

  @Test
  void aClusterNeedsWellFormedSeeds(@TempDir Path dir) {
    refused("--cluster needs the cluster's seed nodes: give --seed HOST:PORT", "serve", dir.toString(), "--cluster");
    refused("xla-actors.cluster.seed-nodes must hold \"host:port\" strings", "serve", dir.toString(), "--seed", "localhost");
    refused("--cluster-port 70000 is outside 0..65535", "serve", dir.toString(), "--seed", "127.0.0.1:25520", "--cluster-port", "70000");
  }

  @Test
  void helpPrintsEveryCommand() {
    String[] r = run("help");
    assertEquals("0", r[0]);
    for (String c : List.of("import hf", "generate PKG", "score PKG", "embed PKG", "serve PKG")) {
      assertTrue(r[1].contains(c), c + " in " + r[1]);
    }
  }
}
