package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.JaxExport;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Compiled programs kept on disk ({@code xla-actors.runtime.compiled-programs}), on the real plugin: a second
 * client loads what the first compiled instead of compiling it, and it runs the same (the donated cache of the
 * {@code donated} jax.export artifact updated in place, its donatable parameter read from the loaded program);
 * a torn, altered or unloadable file is removed and compiled again, never trusted; other options or a request
 * for XLA's dumps compile; the store keeps to its bound; a store that cannot be written only costs the compile.
 */
class CompiledProgramStoreTest {
  @TempDir Path dir;

  private static final int ROWS = 8;
  private static final int WIDTH = 16;

  private static JaxExport export(String name) {
    try (InputStream in = CompiledProgramStoreTest.class.getResourceAsStream("/fixtures/export/" + name + ".jaxexport")) {
      return JaxExport.fromBytes(name + ".jaxexport", in.readAllBytes());
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  private XlaClient client(Path store) {
    return XlaClient.create(RuntimeSettings.load().withCompiledProgramsDirectory(store));
  }

  private List<Path> kept(Path store) throws IOException {
    if (!Files.isDirectory(store)) {
      return List.of();
    }
    try (Stream<Path> files = Files.list(store)) {
      return files.filter(f -> f.getFileName().toString().endsWith(".xlaexe")).sorted().toList();
    }
  }

  /**
   * Three steps of the {@code donated} artifact (cache row {@code step} = x . w, the cache donated): the cache
   * after them, and whether every step updated it in place.
   */
  private static float[] threeSteps(XlaClient client, Executable exe) {
    float[] w = new float[WIDTH * WIDTH];
    for (int i = 0; i < w.length; i++) {
      w[i] = (i % 7) - 3;
    }
    try (DeviceBuffer weights = client.upload(HostTensor.ofFloats(w, WIDTH, WIDTH))) {
      DeviceBuffer cache = client.upload(HostTensor.zeros(TensorType.of(DType.F32, 64, WIDTH)));
      for (int step = 0; step < 3; step++) {
        float[] x = new float[WIDTH];
        java.util.Arrays.fill(x, step + 1);
        long before = cache.unsafeDevicePointer();
        List<DeviceBuffer> out = exe.execute(Argument.of(weights), Argument.donated(cache),
            Argument.of(HostTensor.ofFloats(x, 1, WIDTH)), Argument.of(HostTensor.scalar(step)));
        out.get(1).close();
        assertEquals(before, out.get(0).unsafeDevicePointer(), "step " + step + " updated the donated cache in place");
        cache = out.get(0);
      }
      try (DeviceBuffer last = cache) {
        return java.util.Arrays.copyOf(last.toHost().toFloatArray(), ROWS * WIDTH);
      }
    }
  }

  @Test
  void aSecondClientLoadsTheKeptProgramInsteadOfCompilingItAndItRunsTheSame() throws IOException {
    Path store = dir.resolve("programs");
    JaxExport donated = export("donated");
    float[] compiledResult;
    try (XlaClient first = client(store); Executable exe = donated.compile(first)) {
      assertEquals(0, first.compileCacheStats().loadedFromDisk());
      assertEquals(1, first.compileCacheStats().keptOnDisk());
      compiledResult = threeSteps(first, exe);
    }
    List<Path> files = kept(store);
    assertEquals(1, files.size(), "one file for the one program: " + files);
    long modified = Files.getLastModifiedTime(files.get(0)).toMillis();
    try (XlaClient second = client(store); Executable exe = donated.compile(second)) {
      assertEquals(1, second.compileCacheStats().loadedFromDisk(), "loaded, not compiled");
      assertEquals(0, second.compileCacheStats().keptOnDisk());
      assertEquals(java.util.Set.of(1), exe.donatableParameters(), "read from the loaded program's aliases");
      assertArrayEquals(compiledResult, threeSteps(second, exe), "the same machine code gives the same bits");
      float expectedRow2 = 0;
      for (int k = 0; k < WIDTH; k++) {
        expectedRow2 += 3 * ((k * WIDTH) % 7 - 3);
      }
      assertEquals(expectedRow2, compiledResult[2 * WIDTH], 1e-3, "row 2, column 0 is 3 x column 0 of w");
    }
    assertEquals(files, kept(store), "nothing new written");
    assertTrue(Files.getLastModifiedTime(files.get(0)).toMillis() >= modified, "a load marks the file recently used");
  }

  @Test
  void aTornOrAlteredFileIsRemovedAndCompiledAgainNeverHandedToThePlugin() throws IOException {
    Path store = dir.resolve("programs");
    JaxExport mlp = export("mlp");
    Path file = keptBy(store, mlp);
    byte[] whole = Files.readAllBytes(file);
    byte[] altered = whole.clone();
    altered[altered.length / 2] ^= 0x40;
    for (byte[] bad : new byte[][] {java.util.Arrays.copyOf(whole, whole.length / 3), altered, new byte[0]}) {
      Files.write(file, bad);
      assertCompiledAndKeptAgain(store, mlp);
    }
  }

  /** The file a first client of {@code store} keeps for {@code export}'s program. */
  private Path keptBy(Path store, JaxExport export) throws IOException {
    try (XlaClient first = client(store); Executable exe = export.compile(first)) {
      assertEquals(1, first.compileCacheStats().keptOnDisk());
    }
    return kept(store).get(0);
  }

  /**
   * A client of {@code store} does not load {@code export}'s bad file but compiles the module and keeps it again,
   * and the next client loads the file written so: it is whole.
   */
  private void assertCompiledAndKeptAgain(Path store, JaxExport export) {
    try (XlaClient next = client(store); Executable exe = export.compile(next)) {
      assertEquals(0, next.compileCacheStats().loadedFromDisk(), "the bad file is not loaded");
      assertEquals(1, next.compileCacheStats().keptOnDisk(), "compiled and kept again");
    }
    try (XlaClient c = client(store); Executable exe = export.compile(c)) {
      assertEquals(1, c.compileCacheStats().loadedFromDisk(), "the file written again is whole");
    }
  }

  @Test
  void aWholeFileThePluginDoesNotLoadIsRemovedAndTheModuleCompiledAgain() throws Exception {
    Path store = dir.resolve("programs");
    JaxExport mlp = export("mlp");
    Path file = keptBy(store, mlp);
    // A file with the store's header and a matching checksum around bytes that are no executable.
    byte[] magic = "xla-actors compiled program 1\n".getBytes(StandardCharsets.US_ASCII);
    byte[] payload = {1, 2, 3, 4, 5, 6, 7, 8};
    byte[] forged = new byte[magic.length + 32 + payload.length];
    System.arraycopy(magic, 0, forged, 0, magic.length);
    System.arraycopy(MessageDigest.getInstance("SHA-256").digest(payload), 0, forged, magic.length, 32);
    System.arraycopy(payload, 0, forged, magic.length + 32, payload.length);
    Files.write(file, forged);
    assertCompiledAndKeptAgain(store, mlp);
  }

  @Test
  void otherOptionsKeepTheirOwnFileAndAProgramAskedToDumpIsCompiled() throws IOException {
    Path store = dir.resolve("programs");
    JaxExport mlp = export("mlp");
    try (XlaClient c = client(store)) {
      mlp.compile(c).close();
      mlp.compile(c, CompileOptions.defaults().withXlaOptions(Map.of("xla_cpu_use_xnnpack", "false"))).close();
      assertEquals(2, c.compileCacheStats().keptOnDisk());
      assertEquals(2, kept(store).size());
    }
    Path dumps = dir.resolve("dumps");
    try (XlaClient c = client(store);
        Executable exe = mlp.compile(c, CompileOptions.defaults().withXlaOptions(Map.of("xla_dump_to", dumps.toString())))) {
      assertEquals(0, c.compileCacheStats().loadedFromDisk());
      assertEquals(0, c.compileCacheStats().keptOnDisk());
      try (Stream<Path> written = Files.list(dumps)) {
        assertTrue(written.findAny().isPresent(), "XLA wrote its dumps: the program was compiled");
      }
    }
    assertEquals(2, kept(store).size());
  }

  @Test
  void aProgramThePluginCannotSerializeIsCompiledEachTime() throws IOException {
    Path store = dir.resolve("programs");
    CompileOptions xnnFusions = CompileOptions.defaults().withXlaOptions(Map.of(
        "xla_cpu_experimental_xnn_graph_fusion_mode", "XNN_GRAPH_FUSION_MODE_BYPASS_COST_MODEL"));
    JaxExport mlp = export("mlp");
    for (int process = 0; process < 2; process++) {
      try (XlaClient c = client(store); Executable exe = mlp.compile(c, xnnFusions)) {
        assertEquals(0, c.compileCacheStats().loadedFromDisk());
        assertEquals(0, c.compileCacheStats().keptOnDisk(), "XNNPACK's fusions are not serializable");
      }
    }
    assertEquals(List.of(), kept(store));
  }

  @Test
  void pastItsBoundTheStoreRemovesTheLeastRecentlyUsedFiles() throws IOException {
    Path store = dir.resolve("programs");
    try (XlaClient c = client(store)) {
      export("mlp").compile(c).close();
    }
    Path mlpFile = kept(store).get(0);
    long bound = Files.size(mlpFile) + 1;
    RuntimeSettings bounded = RuntimeSettings.fromConfig(ConfigFactory.parseString(
            "xla-actors.runtime.compiled-programs { directory = \"" + store + "\", max-bytes = " + bound + " }")
        .withFallback(ConfigFactory.load()).resolve());
    Files.setLastModifiedTime(mlpFile, java.nio.file.attribute.FileTime.fromMillis(System.currentTimeMillis() - 60_000));
    try (XlaClient c = XlaClient.create(bounded)) {
      export("nested").compile(c).close();
      export("keys").compile(c).close();
      assertEquals(2, c.compileCacheStats().keptOnDisk());
    }
    List<Path> left = kept(store);
    long total = 0;
    for (Path f : left) {
      total += Files.size(f);
    }
    assertTrue(!left.contains(mlpFile), "the least recently used file went first: " + left);
    assertTrue(total <= bound && !left.isEmpty(), "the store keeps to its bound of " + bound + " bytes: " + left);
    try (XlaClient c = client(store); Executable exe = export("keys").compile(c)) {
      assertEquals(1, c.compileCacheStats().loadedFromDisk(), "the newest file stays");
    }
  }

  @Test
  void aStoreThatCannotBeWrittenOnlyCostsTheCompile() throws IOException {
    Path notADirectory = Files.writeString(dir.resolve("a-file"), "not a directory");
    try (XlaClient c = client(notADirectory); Executable exe = export("mlp").compile(c)) {
      assertEquals(0, c.compileCacheStats().keptOnDisk());
      assertEquals(0, c.compileCacheStats().loadedFromDisk());
    }
    assertEquals("not a directory", Files.readString(notADirectory));
  }

  @Test
  void theSettingsTurnTheStoreOffOrRefuseABadBoundNamingTheKey() {
    RuntimeSettings off = RuntimeSettings.fromConfig(ConfigFactory.parseString("xla-actors.runtime.compiled-programs.keep = false")
        .withFallback(ConfigFactory.load()).resolve());
    assertNull(off.compiledProgramsDirectory());
    RuntimeSettings on = RuntimeSettings.load();
    assertNotEquals(null, on.compiledProgramsDirectory());
    assertTrue(on.compiledProgramsDirectory().endsWith("compiled-programs"), on.compiledProgramsDirectory().toString());
    XlaException bad = assertThrows(XlaException.class, () -> RuntimeSettings.fromConfig(ConfigFactory.parseString(
        "xla-actors.runtime.compiled-programs.max-bytes = lots").withFallback(ConfigFactory.load()).resolve()));
    assertTrue(bad.getMessage().contains("xla-actors.runtime.compiled-programs.max-bytes must be a size in bytes"),
        bad.getMessage());
    try (XlaClient c = XlaClient.create(off); Executable exe = export("mlp").compile(c)) {
      assertEquals(0, c.compileCacheStats().keptOnDisk());
    }
  }
}
