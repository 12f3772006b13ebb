package dev.xlaactors.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.StreamSupport;

/**
 * The Hugging Face test checkpoints of cli/src/test/resources/hf (random weights, made by {@code
 * tools/hf_reference.py} with {@code transformers} itself) and what the parity tests do with them: import
 * one with {@code import hf}, run {@code score} and {@code generate} as a user does, and compare with the
 * fixture's {@code reference.json}. {@link HfParityTest} and {@link HfParityGpt2Test} share it; they are two
 * classes so that cli's two test JVMs (surefire's forkCount) each take about half of the imports.
 */
final class HfFixtures {
  static final ObjectMapper JSON = new ObjectMapper();
  static final Path FIXTURES = Path.of("src/test/resources/hf");
  /** The decode programs' file names start so (one per batch size and attention window). */
  static final String DECODE = "decode_batch_";

  private HfFixtures() {}

  /** What one command line printed and returned. */
  record Run(int status, String out, String err) {}

  static void useThisCheckoutAsHome() {
    System.setProperty("dev.xlaactors.cli.home", Path.of("..").toAbsolutePath().normalize().toString());
  }

  static Run cli(String... args) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int status = XlaActorsCli.run(List.of(args), new PrintStream(out, true, StandardCharsets.UTF_8),
        new PrintStream(err, true, StandardCharsets.UTF_8));
    return new Run(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }

  static Run ok(String... args) {
    Run r = cli(args);
    if (r.status() != 0) {
      fail(String.join(" ", args) + " exited " + r.status() + ":\n" + r.err() + r.out());
    }
    return r;
  }

  /**
   * The package of fixture {@code name} imported with {@code options}, into {@code packages} (a test class's
   * temporary folder) once per class; with import's defaults, the package {@link OpenAiClientsTest} serves
   * (one import per build for all classes: an import takes 5-30 s of CI's time).
   */
  static synchronized Path imported(Path packages, String name, String... options) {
    if (options.length == 0 && List.of("gpt2", "llama", "bert").contains(name)) {
      try {
        return OpenAiClientsTest.imported(name);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
    Path pkg = packages.resolve(name + String.join("", options).replace("-", ""));
    if (!Files.exists(pkg.resolve("xla-model.json"))) {
      List<String> args = new ArrayList<>(List.of("import", "hf", FIXTURES.resolve(name).toString(), "--out", pkg.toString()));
      args.addAll(List.of(options));
      ok(args.toArray(String[]::new));
    }
    return pkg;
  }

  static JsonNode reference(String name) throws IOException {
    return JSON.readTree(FIXTURES.resolve(name).resolve("reference.json").toFile());
  }

  static String ids(JsonNode array) {
    return StreamSupport.stream(array.spliterator(), false).map(JsonNode::asText).collect(Collectors.joining(","));
  }

  static int[] ints(JsonNode array) {
    return StreamSupport.stream(array.spliterator(), false).mapToInt(JsonNode::asInt).toArray();
  }

  /** Every element of {@code got} within {@code rtol * |expected| + atol} of {@code expected}. */
  static void assertClose(JsonNode expected, JsonNode got, double rtol, double atol, String what) {
    assertEquals(expected.size(), got.size(), what + ": rows");
    for (int i = 0; i < expected.size(); i++) {
      assertEquals(expected.get(i).size(), got.get(i).size(), what + ": row " + i + " length");
      for (int j = 0; j < expected.get(i).size(); j++) {
        double e = expected.get(i).get(j).asDouble();
        double g = got.get(i).get(j).asDouble();
        if (Math.abs(e - g) > atol + rtol * Math.abs(e)) {
          fail(what + " [" + i + "][" + j + "]: transformers " + e + ", ours " + g + " (rtol " + rtol + ", atol " + atol + ")");
        }
      }
    }
  }

  /**
   * Imports {@code fixture} into {@code packages}, checks its greedy tokens and tokenizer, and returns the
   * logits {@code score} printed.
   */
  static JsonNode checkCausal(Path packages, String fixture, String... importOptions) throws IOException {
    JsonNode ref = reference(fixture);
    Path pkg = imported(packages, fixture, importOptions);
    JsonNode scored = JSON.readTree(ok("score", pkg.toString(), "--tokens", ids(ref.get("input_ids")), "--json").out());
    assertArrayEquals(ints(ref.get("input_ids")), ints(scored.get("input_ids")));

    JsonNode generated = JSON.readTree(ok("generate", pkg.toString(), "--tokens", ids(ref.get("greedy_prompt")), "--max-tokens", "8",
        "--temperature", "0", "--ignore-eos", "--json").out());
    assertArrayEquals(ints(ref.get("greedy_tokens")), ints(generated.get("tokens")), fixture + ": greedy tokens");

    // generate rather than score: the prompt (24 tokens for gpt2) may be longer than a short score program.
    JsonNode byText = JSON.readTree(ok("generate", pkg.toString(), ref.get("prompt_text").asText(), "--max-tokens", "1",
        "--temperature", "0", "--json").out());
    assertArrayEquals(ints(ref.get("prompt_ids")), ints(byText.get("prompt_ids")), fixture + ": the tokenizer's ids of the prompt");
    return scored.get("logits");
  }

  /** {@link #checkCausal}, and its logits against transformers' in f32 (rtol 1e-3, atol 1e-4). */
  static void checkF32(Path packages, String fixture, String... importOptions) throws IOException {
    assertClose(reference(fixture).get("logits"), checkCausal(packages, fixture, importOptions), 1e-3, 1e-4, fixture + " logits");
  }

  /**
   * The bytes of a package's program files whose names start with {@code prefix}, as Latin-1 text: custom-call
   * target names appear in them verbatim (in the module and in the export's list of checks it disables, which
   * names only the targets the program calls).
   */
  static String programText(Path pkg, String prefix) throws IOException {
    StringBuilder text = new StringBuilder();
    try (var files = Files.list(pkg)) {
      for (Path file : files.filter(f -> f.getFileName().toString().startsWith(prefix)).sorted().toList()) {
        text.append(new String(Files.readAllBytes(file), StandardCharsets.ISO_8859_1));
      }
    }
    assertFalse(text.isEmpty(), "no program file " + prefix + "* in " + pkg);
    return text.toString();
  }
}
