package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.DynamicContainer.dynamicContainer;
import static org.junit.jupiter.api.DynamicTest.dynamicTest;

import dev.xlaactors.error.CompileException;
import dev.xlaactors.graph.ImportedProgram;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Our own JAX compatibility suite: every program exported by tools/jax_compat_suite.py (jax 0.10.2) is
 * loaded, compiled, run on JAX's inputs and compared with JAX's outputs, or, for programs that call back
 * into Python, must be refused at load with the manifest's message.
 *
 * <p>The programs run in child JVMs, which report one line per program: a program that kills its child
 * (an abort inside the plugin) is failed by name, and the programs after it run in a fresh child. Each
 * program is its own dynamic test. A program that fails only because the plugin has no LAPACK/BLAS FFI
 * handler yet is skipped with that reason (an aborted assumption), so it turns into a real check as soon
 * as the handlers exist. Results go to {@code target/compat-results.tsv}, which tools/compat_table.sh
 * turns into docs/imports.md's table.
 */
class JaxCompatibilityTest {
  private static final Logger log = LoggerFactory.getLogger(JaxCompatibilityTest.class);
  private static final String ROOT = "/fixtures/compat/";
  /** Marks the child's protocol lines among whatever else it prints (plugin logs). */
  private static final String TAG = "COMPAT\t";
  /** What the output reader queues when the child's output ends (a line the child cannot print). */
  private static final String EOF = "\u0000EOF";
  /** A child that prints nothing for this long (seconds) is stuck in the program it last started. */
  private static final long PROGRAM_TIMEOUT_S = 60;
  /** The hang test's shorter limit: long enough for a child's start under load, short for the suite. */
  private static final long HANG_TEST_TIMEOUT_S = 10;
  /** Child JVM property naming a program whose start kills the child: the test of crash attribution. */
  private static final String CRASH_IN = "jax-compatibility-test.crash-in"; // not under xla-actors: unknown keys there are refused
  /** Child JVM property naming a program whose start hangs the child: the test of the silence limit. */
  private static final String HANG_IN = "jax-compatibility-test.hang-in";
  private static final List<String> MISSING_LAPACK =
      List.of("No FFI handler registered for lapack_", "No FFI handler registered for blas_");

  /**
   * One manifest line. {@code refusal} is what the refusal message must contain, texts joined by
   * {@code " && "} (refused programs only).
   */
  record Entry(String name, String family, boolean refused, double rtol, double atol, String refusal) {}

  /** How a program ended. */
  enum Outcome {
    MATCH, REFUSED, KNOWN_FAILING_LAPACK, FAILS
  }

  record Result(Outcome outcome, String detail) {}

  @TestFactory
  Stream<DynamicNode> everyExportedProgramRunsAsInJax() throws IOException, InterruptedException {
    List<Entry> entries = manifest();
    // One child at a time: two children sharing the programs were no faster (39 s against 35 s serial,
    // measured on this shared 2-core machine), so the simpler order stays.
    Map<String, Result> results = runInChildren(entries.stream().map(Entry::name).toList(), List.of(), PROGRAM_TIMEOUT_S);
    writeResults(entries, results, Path.of("target", "compat-results.tsv"));
    Map<String, List<Entry>> byFamily = entries.stream()
        .collect(Collectors.groupingBy(Entry::family, LinkedHashMap::new, Collectors.toList()));
    return byFamily.entrySet().stream().map(family -> dynamicContainer(family.getKey(),
        family.getValue().stream().map(e -> dynamicTest(e.name(), () -> verdict(e, results.get(e.name()))))));
  }

  private static void verdict(Entry entry, Result result) {
    switch (result.outcome()) {
      case MATCH -> log.info("{}: matches JAX", entry.name());
      case REFUSED -> log.info("{}: refused as expected: {}", entry.name(), result.detail());
      case KNOWN_FAILING_LAPACK -> {
        log.info("{}: KNOWN-FAILING [lapack]: {}", entry.name(), result.detail());
        Assumptions.abort("KNOWN-FAILING [lapack] " + entry.name() + ": " + result.detail());
      }
      case FAILS -> Assertions.fail(entry.name() + ": " + result.detail());
    }
  }

  /** A program that kills or hangs its child is failed by name, and the programs after it still run. */
  @Test
  void aProgramThatKillsOrHangsItsChildIsBlamedAndTheOthersStillRun() throws Exception {
    List<String> names = List.of("np_broadcast_arith", "nn_relu", "maxpool2d", "top_k", "cumsum_cumprod");
    Map<String, Result> results = runInChildren(
        names, List.of("-D" + CRASH_IN + "=nn_relu", "-D" + HANG_IN + "=top_k"), HANG_TEST_TIMEOUT_S);
    assertEquals(Outcome.FAILS, results.get("nn_relu").outcome(), results.toString());
    assertTrue(results.get("nn_relu").detail().startsWith("crashed: the child JVM died (exit code 134)"), results.toString());
    assertEquals(Outcome.FAILS, results.get("top_k").outcome(), results.toString());
    assertTrue(results.get("top_k").detail().startsWith("hung: no result in 10 s (child killed)"), results.toString());
    for (String survivor : List.of("np_broadcast_arith", "maxpool2d", "cumsum_cumprod")) {
      assertEquals(Outcome.MATCH, results.get(survivor).outcome(), results.toString());
    }
  }

  /** The comparison is what makes a "match" mean something: it must see small, typed and exact differences. */
  @Test
  void theComparisonCatchesWhatItShould() {
    Entry tight = new Entry("t", "f", false, 1e-5, 1e-5, "");
    HostTensor x = HostTensor.ofFloats(new float[] {1f, 100f, Float.NaN, Float.POSITIVE_INFINITY}, 4);
    assertEquals(null, compare(List.of(x), List.of(HostTensor.ofFloats(new float[] {1.000001f, 100.001f, Float.NaN, Float.POSITIVE_INFINITY}, 4)), tight));
    String off = compare(List.of(x), List.of(HostTensor.ofFloats(new float[] {1.0001f, 100f, Float.NaN, Float.POSITIVE_INFINITY}, 4)), tight);
    assertTrue(off != null && off.startsWith("output 0 (f32[4]): 1 of 4 values differ"), off);
    String nan = compare(List.of(x), List.of(HostTensor.ofFloats(new float[] {1f, 100f, 0f, Float.POSITIVE_INFINITY}, 4)), tight);
    assertTrue(nan != null && nan.contains("first at 2"), nan);
    String ints = compare(List.of(HostTensor.ofInts(new int[] {3, 4}, 2)), List.of(HostTensor.ofInts(new int[] {3, 5}, 2)), tight);
    assertTrue(ints != null && ints.contains("(element 1)"), ints);
    String type = compare(List.of(HostTensor.ofInts(new int[] {3, 4}, 2)), List.of(HostTensor.ofFloats(new float[] {3, 4}, 2)), tight);
    assertEquals("output 0 is f32[2], JAX's is s32[2]", type);
    String imaginary = compare(List.of(HostTensor.ofComplex64(new float[] {1, 2}, 1)), List.of(HostTensor.ofComplex64(new float[] {1, 2.1f}, 1)), tight);
    assertTrue(imaginary != null && imaginary.contains("first at 1"), imaginary);
  }

  // ---- the parent: children, crash attribution, results file ----------------------------------------

  /** Runs the programs, a fresh child after each crash or hang, until every program has a result. */
  private static Map<String, Result> runInChildren(List<String> names, List<String> jvmOptions, long timeoutSeconds)
      throws IOException, InterruptedException {
    Map<String, Result> results = new LinkedHashMap<>();
    List<String> remaining = new ArrayList<>(names);
    while (!remaining.isEmpty()) {
      runChild(remaining, jvmOptions, timeoutSeconds, results);
      remaining.removeIf(results::containsKey);
    }
    return results;
  }

  /** One child over {@code names}; every name it reports, or dies in, gets a result. */
  private static void runChild(List<String> names, List<String> jvmOptions, long timeoutSeconds, Map<String, Result> results)
      throws IOException, InterruptedException {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(jvmOptions);
    command.addAll(List.of("-cp", System.getProperty("java.class.path"), JaxCompatibilityTest.class.getName()));
    command.addAll(names);
    Process child = new ProcessBuilder(command).redirectErrorStream(true).start();
    BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    Thread reader = new Thread(() -> pump(child.getInputStream(), lines), "compat-child-output");
    reader.setDaemon(true);
    reader.start();
    String running = null;
    List<String> tail = new ArrayList<>();
    String reason = null;
    while (true) {
      String line = lines.poll(timeoutSeconds, TimeUnit.SECONDS);
      if (line == null) {
        child.destroyForcibly().waitFor();
        reason = "hung: no result in " + timeoutSeconds + " s (child killed)";
        break;
      }
      if (line.equals(EOF)) {
        child.waitFor();
        reason = "crashed: the child JVM died (exit code " + child.exitValue() + ")";
        break;
      }
      if (!line.startsWith(TAG)) {
        tail.add(line);
        if (tail.size() > 5) {
          tail.remove(0);
        }
        continue;
      }
      String[] f = line.split("\t", 5);
      if (f[1].equals("START")) {
        running = f[2];
        tail.clear();
      } else if (f[1].equals("RESULT")) {
        results.put(f[2], new Result(Outcome.valueOf(f[3]), f.length > 4 ? f[4] : ""));
        running = null;
      }
    }
    String why = reason + "; last output: " + String.join(" | ", tail);
    if (running != null) {
      results.put(running, new Result(Outcome.FAILS, why));
    } else if (names.stream().noneMatch(results::containsKey)) {
      // Died before its first program: nothing to blame but the setup, so every program fails with it.
      names.forEach(n -> results.put(n, new Result(Outcome.FAILS, "child JVM failed before running: " + why)));
    }
  }


  private static void pump(InputStream in, BlockingQueue<String> lines) {
    try (BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
      for (String line; (line = r.readLine()) != null; ) {
        lines.add(line);
      }
    } catch (IOException e) {
      lines.add("reading the child's output failed: " + e);
    }
    lines.add(EOF);
  }

  private static void writeResults(List<Entry> entries, Map<String, Result> results, Path file) throws IOException {
    StringBuilder out = new StringBuilder("family\tprogram\texpected\tresult\tdetail\n");
    for (Entry e : entries) {
      Result r = results.get(e.name());
      String result = switch (r.outcome()) {
        case MATCH -> "match";
        case REFUSED -> "refused";
        case KNOWN_FAILING_LAPACK -> "known-failing (lapack)";
        case FAILS -> "fails";
      };
      out.append(e.family()).append('\t').append(e.name()).append('\t').append(e.refused() ? "refused" : "match")
          .append('\t').append(result).append('\t').append(r.detail()).append('\n');
    }
    Files.createDirectories(file.getParent());
    Files.writeString(file, out);
  }

  // ---- the child: runs the named programs, one protocol line before and after each -------------------

  /** Entry point of the child JVM: the arguments are program names from the manifest. */
  public static void main(String[] args) throws IOException, InterruptedException {
    Map<String, Entry> manifest = manifest().stream().collect(Collectors.toMap(Entry::name, e -> e));
    String crashIn = System.getProperty(CRASH_IN, "");
    String hangIn = System.getProperty(HANG_IN, "");
    try (XlaClient client = XlaClient.create()) {
      for (String name : args) {
        // stdout is the protocol to the parent (as in AbortGuardTest), flushed so a crash loses nothing.
        System.out.println(TAG + "START\t" + name);
        System.out.flush();
        if (name.equals(crashIn)) {
          Runtime.getRuntime().halt(134); // as an abort inside the plugin would end the child
        }
        if (name.equals(hangIn)) {
          Thread.sleep(Long.MAX_VALUE); // as a deadlock inside the plugin would stop it
        }
        Result r = runOne(client, manifest.get(name));
        System.out.println(TAG + "RESULT\t" + name + "\t" + r.outcome() + "\t" + oneLine(r.detail()));
        System.out.flush();
      }
    }
  }

  private static Result runOne(XlaClient client, Entry entry) {
    String text = resourceText(entry.name() + "/program.mlir");
    if (entry.refused()) {
      try {
        ImportedProgram.fromText(entry.name(), text);
        return new Result(Outcome.FAILS, "loaded, but should have been refused with \"" + entry.refusal() + "\"");
      } catch (CompileException e) {
        return Arrays.stream(entry.refusal().split(" && ")).allMatch(e.getMessage()::contains)
            ? new Result(Outcome.REFUSED, e.getMessage())
            : new Result(Outcome.FAILS, "refused without \"" + entry.refusal() + "\": " + e.getMessage());
      }
    }
    try {
      List<List<HostTensor>> io = tensors(entry.name());
      ImportedProgram program = ImportedProgram.fromText(entry.name(), text);
      try (Executable exe = program.compile(client)) {
        List<HostTensor> actual = exe.run(io.get(0).toArray(HostTensor[]::new));
        String mismatch = compare(io.get(1), actual, entry);
        return mismatch == null
            ? new Result(Outcome.MATCH, String.format("largest difference %.2g of the tolerance", toleranceUsed(io.get(1), actual, entry)))
            : new Result(Outcome.FAILS, mismatch);
      }
    } catch (RuntimeException e) {
      String message = e.getClass().getSimpleName() + ": " + e.getMessage();
      return MISSING_LAPACK.stream().anyMatch(message::contains)
          ? new Result(Outcome.KNOWN_FAILING_LAPACK, message)
          : new Result(Outcome.FAILS, message);
    }
  }

  /** Null when every output matches; otherwise what differs, first differing element included. */
  static String compare(List<HostTensor> expected, List<HostTensor> actual, Entry entry) {
    if (expected.size() != actual.size()) {
      return "expected " + expected.size() + " outputs, got " + actual.size();
    }
    for (int i = 0; i < expected.size(); i++) {
      HostTensor e = expected.get(i);
      HostTensor a = actual.get(i);
      if (!e.type().equals(a.type())) {
        return "output " + i + " is " + a.type() + ", JAX's is " + e.type();
      }
      DType t = e.dtype();
      String diff;
      if (t.isFloating()) {
        diff = closeness(e.toDoubleArray(), a.toDoubleArray(), entry);
      } else if (t == DType.C64) {
        diff = closeness(widen(e.toComplex64Array()), widen(a.toComplex64Array()), entry);
      } else if (t == DType.C128) {
        diff = closeness(e.toComplex128Array(), a.toComplex128Array(), entry);
      } else {
        // Integers, pred and float8: exact, byte for byte.
        byte[] eb = e.toByteArray();
        byte[] ab = a.toByteArray();
        int k = Arrays.mismatch(eb, ab);
        diff = k < 0 ? null : "byte " + k + " (element " + k / t.byteSize() + ") is " + ab[k] + ", JAX's is " + eb[k];
      }
      if (diff != null) {
        return "output " + i + " (" + e.type() + "): " + diff;
      }
    }
    return null;
  }

  /**
   * The largest |a - e| / (atol + rtol * |e|) over the float and complex outputs of a match: how much of
   * its tolerance a program needs (0 when it matches exactly), so a tolerance set too loose shows.
   */
  private static double toleranceUsed(List<HostTensor> expected, List<HostTensor> actual, Entry entry) {
    double worst = 0;
    for (int i = 0; i < expected.size(); i++) {
      DType t = expected.get(i).dtype();
      if (!t.isFloating() && !t.isComplex()) {
        continue;
      }
      double[] e = t.isFloating() ? expected.get(i).toDoubleArray()
          : t == DType.C64 ? widen(expected.get(i).toComplex64Array()) : expected.get(i).toComplex128Array();
      double[] a = t.isFloating() ? actual.get(i).toDoubleArray()
          : t == DType.C64 ? widen(actual.get(i).toComplex64Array()) : actual.get(i).toComplex128Array();
      for (int k = 0; k < e.length; k++) {
        if (Double.isFinite(e[k])) {
          worst = Math.max(worst, Math.abs(a[k] - e[k]) / (entry.atol() + entry.rtol() * Math.abs(e[k])));
        }
      }
    }
    return worst;
  }

  /** |a - e| <= atol + rtol * |e| everywhere (NaN matches NaN, infinities match exactly). */
  private static String closeness(double[] e, double[] a, Entry entry) {
    int bad = 0;
    int first = -1;
    double worst = 0;
    for (int k = 0; k < e.length; k++) {
      boolean ok = Double.isNaN(e[k]) ? Double.isNaN(a[k])
          : Double.isInfinite(e[k]) ? e[k] == a[k]
          : Math.abs(a[k] - e[k]) <= entry.atol() + entry.rtol() * Math.abs(e[k]);
      if (!ok) {
        bad++;
        first = first < 0 ? k : first;
        worst = Math.max(worst, Math.abs(a[k] - e[k]));
      }
    }
    return bad == 0 ? null : bad + " of " + e.length + " values differ beyond rtol " + entry.rtol() + " atol " + entry.atol()
        + "; first at " + first + ": " + a[first] + " vs JAX's " + e[first] + "; largest difference " + worst;
  }

  private static double[] widen(float[] f) {
    double[] d = new double[f.length];
    for (int i = 0; i < f.length; i++) {
      d[i] = f[i];
    }
    return d;
  }

  private static String oneLine(String s) {
    String flat = s == null ? "" : s.replaceAll("\\s+", " ").trim();
    return flat.length() > 400 ? flat.substring(0, 400) + "..." : flat;
  }

  // ---- fixtures ---------------------------------------------------------------------------------------

  static List<Entry> manifest() {
    List<Entry> entries = new ArrayList<>();
    for (String line : resourceText("manifest.tsv").split("\n")) {
      if (line.isBlank() || line.startsWith("#")) {
        continue;
      }
      String[] f = line.split("\t", -1);
      if (!f[2].equals("match") && !f[2].equals("refused")) {
        throw new IllegalStateException("manifest.tsv: " + f[0] + " expects '" + f[2] + "', not match or refused");
      }
      boolean refused = f[2].equals("refused");
      entries.add(new Entry(f[0], f[1], refused, Double.parseDouble(f[3]), Double.parseDouble(f[4]), refused ? f[5] : ""));
    }
    return entries;
  }

  /** Inputs (index 0) and JAX's outputs (index 1), described by tensors.txt, bytes in tensors.bin. */
  private static List<List<HostTensor>> tensors(String name) {
    ByteBuffer bytes = ByteBuffer.wrap(resourceBytes(name + "/tensors.bin")).order(ByteOrder.LITTLE_ENDIAN);
    List<HostTensor> inputs = new ArrayList<>();
    List<HostTensor> outputs = new ArrayList<>();
    for (String line : resourceText(name + "/tensors.txt").split("\n")) {
      if (line.isBlank() || line.startsWith("#")) {
        continue;
      }
      String[] f = line.trim().split(" ");
      DType dtype = DType.valueOf(f[2].toUpperCase());
      long[] dims = f[3].equals("-") ? new long[0] : Arrays.stream(f[3].split(",")).mapToLong(Long::parseLong).toArray();
      byte[] data = new byte[Math.toIntExact(dtype.byteSize() * Arrays.stream(dims).reduce(1, (x, y) -> x * y))];
      bytes.get(data);
      (f[0].equals("input") ? inputs : outputs).add(HostTensor.ofBytes(dtype, data, dims));
    }
    if (bytes.hasRemaining()) {
      throw new IllegalStateException(name + "/tensors.bin has " + bytes.remaining() + " bytes beyond tensors.txt");
    }
    return List.of(inputs, outputs);
  }

  private static String resourceText(String file) {
    return new String(resourceBytes(file), StandardCharsets.UTF_8);
  }

  private static byte[] resourceBytes(String file) {
    try (InputStream in = JaxCompatibilityTest.class.getResourceAsStream(ROOT + file)) {
      if (in == null) {
        throw new IllegalStateException("missing test resource fixtures/compat/" + file + "; run tools/jax_compat_suite.py");
      }
      return in.readAllBytes();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
