package dev.xlaactors.runtime.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Device;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.ModelPackage.GenerationDefaults;
import dev.xlaactors.runtime.model.ModelPackage.Kind;
import dev.xlaactors.runtime.model.ModelPackage.Limits;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Model packages opened, loaded and run on the real CPU plugin (fixtures of tools/jax_package_fixtures.py):
 * the manifest's facts, each weight uploaded once and shared by every program, the right numbers from the
 * tensor package (single file and shards) and from the toy causal LM's score and slot programs.
 */
class ModelPackageTest {
  private static XlaClient client;
  private static Device device;

  @TempDir Path dir;

  @BeforeAll
  static void open() {
    client = XlaClient.create();
    device = client.devices().get(0);
  }

  @AfterAll
  static void close() {
    client.close();
  }

  /** A fixture package's directory (under test resources). */
  static Path fixture(String name) {
    try {
      return Path.of(ModelPackageTest.class.getResource("/fixtures/packages/" + name + "/xla-model.json").toURI())
          .getParent();
    } catch (URISyntaxException e) {
      throw new IllegalStateException(e);
    }
  }

  /** A copy of a fixture package in {@code target}, to break. */
  static Path copy(String name, Path target) {
    try (Stream<Path> files = Files.list(fixture(name))) {
      Files.createDirectories(target);
      for (Path f : files.toList()) {
        Files.copy(f, target.resolve(f.getFileName()));
      }
      return target;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** y = x @ w + b, from the package's weights file, computed here. */
  private static float[] affine(float[] x, int batch, float[] w, float[] b) {
    float[] y = new float[batch * 2];
    for (int r = 0; r < batch; r++) {
      for (int c = 0; c < 2; c++) {
        float s = b[c];
        for (int k = 0; k < 3; k++) {
          s += x[r * 3 + k] * w[k * 2 + c];
        }
        y[r * 2 + c] = s;
      }
    }
    return y;
  }

  private static float[] run(Model model, HostTensor input) {
    List<HostTensor> out = model.run(List.of(Argument.of(input)), null);
    assertEquals(1, out.size());
    try (HostTensor y = out.get(0)) {
      return y.toFloatArray();
    }
  }

  @Test
  void aTensorPackageOpensWithItsManifestsFacts() {
    ModelPackage pkg = ModelPackage.open(fixture("tensor"));
    assertEquals("affine", pkg.name());
    assertEquals(Kind.TENSOR, pkg.kind());
    assertEquals(Map.of("generator", "tools/jax_package_fixtures.py"), pkg.source());
    assertEquals(List.of(1, 2), pkg.programs(Role.MAIN).stream().map(ProgramSpec::size).toList());
    ProgramSpec b2 = pkg.program(Role.MAIN, 2).orElseThrow();
    assertEquals(0, b2.length());
    assertEquals(pkg.directory().resolve("main_b2.jax"), b2.file());
    assertEquals(List.of("b", "w", "[1]"), b2.export().inputNames());
    assertTrue(pkg.program(Role.MAIN, 3).isEmpty());
    assertTrue(pkg.programs(Role.SCORE).isEmpty());
    assertEquals(Map.of("w", TensorType.of(DType.F32, 3, 2), "b", TensorType.of(DType.F32, 2)), pkg.weightTypes());
    assertEquals(List.of("b", "w"), pkg.weightParameters(b2));
    assertEquals(new Limits(0, 0), pkg.limits());
    assertEquals(List.of(), pkg.hostCallbacks());
    assertTrue(pkg.tokenizer().isEmpty());
    assertTrue(pkg.chatTemplate().isEmpty());
    assertTrue(pkg.embedding().isEmpty());
    assertEquals(GenerationDefaults.NONE, pkg.generation());
  }

  @Test
  void aTensorPackageLoadsEachWeightOnceSharedByEveryProgramAndRunsRight() {
    ModelPackage pkg = ModelPackage.open(fixture("tensor"));
    float[] w;
    float[] b;
    try (SafeTensors weights = SafeTensors.open(pkg.directory().resolve("model.safetensors"));
        HostTensor wt = weights.tensor("w");
        HostTensor bt = weights.tensor("b")) {
      w = wt.toFloatArray();
      b = bt.toFloatArray();
    }
    long uploads = client.uploadCount();
    LoadedPackage loaded = pkg.load(device);
    try (loaded) {
      assertEquals(2, client.uploadCount() - uploads, "each of the 2 weights uploaded once, for both programs");
      assertEquals(List.of(1, 2), List.copyOf(loaded.models(Role.MAIN).keySet()));
      Model one = loaded.model(Role.MAIN, 1);
      Model two = loaded.model(Role.MAIN, 2);
      assertNotSame(one, two);
      for (String weight : List.of("w", "b")) {
        DeviceBuffer buffer = loaded.weight(weight);
        assertTrue(one.isBoundTo(weight, buffer) && two.isBoundTo(weight, buffer), weight + " shared by both programs");
      }
      assertFalse(one.isBoundTo("w", loaded.weight("b")));
      assertEquals(List.of("[1]"), one.inputNames());

      float[] x1 = {1, 2, 3};
      assertArrayEquals(new float[] {4.5f, 9f}, run(one, HostTensor.ofFloats(x1, 1, 3)), 1e-6f);
      float[] x2 = {1, 2, 3, -1, 0, 0.5f};
      assertArrayEquals(affine(x2, 2, w, b), run(two, HostTensor.ofFloats(x2, 2, 3)), 1e-6f);
      assertArrayEquals(new float[] {4.5f, 9f, 3.5f, 1.5f}, run(two, HostTensor.ofFloats(x2, 2, 3)), 1e-6f);

      InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> loaded.model(Role.MAIN, 3));
      assertTrue(e.getMessage().contains("no main program at batch 3") && e.getMessage().contains("batch [1, 2]"),
          e.getMessage());
      assertTrue(loaded.models(Role.SCORE).isEmpty());
    }
    loaded.close(); // idempotent
    XlaException closed = assertThrows(XlaException.class, () -> loaded.model(Role.MAIN, 1));
    assertTrue(closed.getMessage().contains("closed"), closed.getMessage());
  }

  @Test
  void aShardedPackageRunsAsTheSingleFileOne() {
    ModelPackage single = ModelPackage.open(fixture("tensor"));
    ModelPackage sharded = ModelPackage.open(fixture("tensor-sharded"));
    assertEquals(single.weightTypes(), sharded.weightTypes());
    assertEquals(sharded.directory().resolve("model.safetensors.index.json"), sharded.weightsFile());
    try (WeightFiles files = sharded.openWeights()) {
      assertEquals(sharded.directory().resolve("model-00001-of-00002.safetensors"), files.fileOf("w"));
      assertEquals(sharded.directory().resolve("model-00002-of-00002.safetensors"), files.fileOf("b"));
      assertEquals(2, files.files().size());
    }
    float[] x = {0.25f, -3, 7, 2, 2, 2};
    long uploads = client.uploadCount();
    try (LoadedPackage a = single.load(device); LoadedPackage b = sharded.load(device)) {
      assertEquals(4, client.uploadCount() - uploads);
      assertArrayEquals(run(a.model(Role.MAIN, 2), HostTensor.ofFloats(x, 2, 3)),
          run(b.model(Role.MAIN, 2), HostTensor.ofFloats(x, 2, 3)), 0f);
      assertArrayEquals(run(a.model(Role.MAIN, 1), HostTensor.ofFloats(new float[] {1, 2, 3}, 1, 3)),
          new float[] {4.5f, 9f}, 1e-6f);
      assertArrayEquals(new float[] {4.5f, 9f}, run(b.model(Role.MAIN, 1), HostTensor.ofFloats(new float[] {1, 2, 3}, 1, 3)),
          1e-6f);
    }
  }

  /** The toy LM's weights, as tools/jax_package_fixtures.py makes them. */
  private static final int V = 8;
  private static final int D = 4;

  /**
   * The embedding fixture's hidden states of a batch of {@code length}-token rows: (embed[token] +
   * position[t]) * mask, with its weights' closed forms (tools/jax_package_fixtures.py).
   */
  static float[] embeddingFixtureStates(int[] tokens, int[] mask, int length) {
    float[] expected = new float[tokens.length * D];
    for (int i = 0; i < tokens.length; i++) {
      int t = i % length;
      for (int j = 0; j < D; j++) {
        float state = (((tokens[i] * D + j) % 7) - 3f) + (t * D + j) * 0.25f;
        expected[i * D + j] = state * mask[i];
      }
    }
    return expected;
  }

  private static float embed(int token, int j) {
    return ((token * D + j) % 5) - 2f;
  }

  private static float head(int j, int v) {
    return ((j * V + v) % 3) * 0.5f - 0.5f;
  }

  /** The toy LM's logits after {@code tokens}: (sum of their embeddings) @ head. */
  private static float[] logitsAfter(int... tokens) {
    float[] logits = new float[V];
    for (int v = 0; v < V; v++) {
      for (int j = 0; j < D; j++) {
        float state = 0;
        for (int t : tokens) {
          state += embed(t, j);
        }
        logits[v] += state * head(j, v);
      }
    }
    return logits;
  }

  private static float[] row(float[] all, int row, int width) {
    float[] r = new float[width];
    System.arraycopy(all, row * width, r, 0, width);
    return r;
  }

  @Test
  void aCausalLmPackageReadsItsDefaultsAndItsSlotProgramsShareTheWeights() {
    ModelPackage pkg = ModelPackage.open(fixture("causal-lm"));
    assertEquals(Kind.CAUSAL_LM, pkg.kind());
    assertEquals("toy-lm", pkg.name());
    assertEquals(pkg.directory().resolve("tokenizer.json"), pkg.tokenizer().orElseThrow().huggingFaceFile());
    assertEquals(null, pkg.tokenizer().orElseThrow().tiktokenEncoding());
    assertEquals(pkg.directory().resolve("chat_template.jinja"), pkg.chatTemplate().orElseThrow());
    assertEquals(new GenerationDefaults(List.of(0, 7), null, 5, 0.5f, 3, 0.9f, null, null), pkg.generation());
    assertEquals(new Limits(8, 8), pkg.limits());
    assertEquals(List.of(1, 2), pkg.programs(Role.SCORE).stream().map(ProgramSpec::size).toList(), "sorted by size");
    assertEquals(4, pkg.program(Role.PREFILL_SLOT, 2).orElseThrow().length());
    assertEquals(List.of(), pkg.weightParameters(pkg.program(Role.SLOT_CACHE, 2).orElseThrow()),
        "slot_cache takes the dict but uses no weight: JAX drops them");

    long uploads = client.uploadCount();
    try (LoadedPackage loaded = pkg.load(device)) {
      assertEquals(2, client.uploadCount() - uploads, "embed and head uploaded once for four programs");
      for (Model m : List.of(loaded.model(Role.SCORE, 1), loaded.model(Role.SCORE, 2),
          loaded.model(Role.PREFILL_SLOT, 2), loaded.model(Role.DECODE_SLOTS, 2))) {
        assertTrue(m.isBoundTo("embed", loaded.weight("embed")) && m.isBoundTo("head", loaded.weight("head")), m.toString());
      }
      Model prefill = loaded.model(Role.PREFILL_SLOT, 2);
      Model decode = loaded.model(Role.DECODE_SLOTS, 2);
      assertEquals(List.of("[1]", "[2]", "[3]", "[4]"), prefill.inputNames());
      assertTrue(prefill.donatableInputs().contains("[4]") && decode.donatableInputs().contains("[3]"),
          "the cache is donated");

      List<DeviceBuffer> empty = loaded.model(Role.SLOT_CACHE, 2).execute(List.of(), null);
      assertEquals(1, empty.size());
      // Slot 1 takes the prompt [3, 1] (length 2 of 4; the padding must be ignored).
      List<DeviceBuffer> prefilled = prefill.execute(List.of(Argument.of(HostTensor.ofInts(new int[] {3, 1, 6, 6}, 1, 4)),
          Argument.of(HostTensor.scalar(2)), Argument.of(HostTensor.scalar(1)), Argument.donated(empty.get(0))), null);
      try (HostTensor logits = prefilled.get(0).toHost()) {
        assertArrayEquals(logitsAfter(3, 1), logits.toFloatArray(), 1e-5f);
      }
      // One step: slot 0 starts with token 5 at position 0, slot 1 goes on with token 2 at position 2.
      List<DeviceBuffer> stepped = decode.execute(List.of(Argument.of(HostTensor.ofInts(new int[] {5, 2}, 2)),
          Argument.of(HostTensor.ofInts(new int[] {0, 2}, 2)), Argument.donated(prefilled.get(1))), null);
      float[] decoded;
      try (HostTensor logits = stepped.get(0).toHost()) {
        decoded = logits.toFloatArray();
      }
      prefilled.get(0).close();
      stepped.forEach(DeviceBuffer::close);
      assertArrayEquals(logitsAfter(5), row(decoded, 0, V), 1e-5f);
      assertArrayEquals(logitsAfter(3, 1, 2), row(decoded, 1, V), 1e-5f);

      // score sees the same model: its logits at position 2 of [3, 1, 2, 0] are the decoded slot's.
      float[] scored = run(loaded.model(Role.SCORE, 1), HostTensor.ofInts(new int[] {3, 1, 2, 0}, 1, 4));
      assertArrayEquals(row(decoded, 1, V), row(scored, 2, V), 1e-5f);
      float[] both = run(loaded.model(Role.SCORE, 2), HostTensor.ofInts(new int[] {3, 1, 2, 0, 5, 5, 5, 5}, 2, 4));
      assertArrayEquals(logitsAfter(5, 5, 5, 5), row(both, 7, V), 1e-5f);
    }
  }

  @Test
  void aPackageLoadedForSomeRolesCompilesOnlyTheirProgramsAndRefusesTheOthersNamingWhatItHas() {
    ModelPackage pkg = ModelPackage.open(fixture("causal-lm"));
    try (LoadedPackage scoring = pkg.load(device, PackageXlaOptions.none(), Set.of(Role.SCORE))) {
      assertEquals(Set.of(Role.SCORE), scoring.roles());
      assertEquals(List.of(1, 2), List.copyOf(scoring.models(Role.SCORE).keySet()));
      float[] scored = run(scoring.model(Role.SCORE, 1), HostTensor.ofInts(new int[] {3, 1, 2, 0}, 1, 4));
      assertArrayEquals(logitsAfter(3, 1, 2), row(scored, 2, V), 1e-5f);
      // The package has these programs, but they were not compiled: refused, not reported missing.
      ProgramSpec prefill = pkg.program(Role.PREFILL_SLOT, 2).orElseThrow();
      for (org.junit.jupiter.api.function.Executable refused : List.<org.junit.jupiter.api.function.Executable>of(
          () -> scoring.model(Role.PREFILL_SLOT, 2), () -> scoring.model(prefill), () -> scoring.models(Role.DECODE_SLOTS))) {
        XlaException e = assertThrows(XlaException.class, refused);
        assertEquals(dev.xlaactors.error.ErrorCode.FAILED_PRECONDITION, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("'toy-lm'") && e.getMessage().contains("loaded with the programs of [score] only")
            && e.getMessage().contains("load it with that role too"), e.getMessage());
      }
    }
    // A role set none of whose programs the package has is refused before anything compiles.
    InvalidArgumentException none = assertThrows(InvalidArgumentException.class,
        () -> pkg.load(device, PackageXlaOptions.none(), Set.of(Role.EMBED, Role.MAIN)));
    assertTrue(none.getMessage().contains("has no program of the roles [embed, main]")
        && none.getMessage().contains("it has [score, prefill_slot, decode_slots, slot_cache]"), none.getMessage());
  }

  @Test
  void anEmbeddingPackageExportedForTwoPlatformsBindsThePlatformIndexAndRunsRight() {
    ModelPackage pkg = ModelPackage.open(fixture("embedding"));
    assertEquals(Kind.EMBEDDING, pkg.kind());
    assertEquals(new ModelPackage.EmbeddingDefaults(ModelPackage.Pooling.MEAN, true), pkg.embedding().orElseThrow());
    assertEquals("cl100k_base", pkg.tokenizer().orElseThrow().tiktokenEncoding());
    ProgramSpec b2 = pkg.program(Role.EMBED, 2).orElseThrow();
    assertEquals(List.of("cpu", "cuda"), b2.export().platforms());
    assertEquals(JaxExport.PLATFORM_INDEX, b2.export().parameterNames().get(0));
    assertEquals(List.of("embed", "position"), pkg.weightParameters(b2));

    long uploads = client.uploadCount();
    try (LoadedPackage loaded = pkg.load(device)) {
      assertEquals(2 + 2, client.uploadCount() - uploads, "2 weights once, and each program's platform index");
      Model model = loaded.model(Role.EMBED, 2);
      assertEquals(List.of("[1]", "[2]"), model.inputNames());
      int[] tokens = {3, 0, 7, 7, 1, 2, 5, 6};
      int[] mask = {1, 1, 0, 0, 1, 1, 1, 1};
      List<HostTensor> out = model.run(List.of(Argument.of(HostTensor.ofInts(tokens, 2, 4)),
          Argument.of(HostTensor.ofInts(mask, 2, 4))), null);
      try (HostTensor hidden = out.get(0)) {
        assertEquals(TensorType.of(DType.F32, 2, 4, D), hidden.type());
        assertArrayEquals(embeddingFixtureStates(tokens, mask, 4), hidden.toFloatArray(), 1e-6f);
      }
    }
  }

  @Test
  void loadRefusesWeightsChangedSinceOpenBeforeUploadingAnything() throws IOException {
    Path copy = copy("tensor", dir.resolve("pkg"));
    ModelPackage pkg = ModelPackage.open(copy);
    try (HostTensor w = HostTensor.ofFloats(new float[6], 2, 3); HostTensor b = HostTensor.ofFloats(new float[2], 2)) {
      SafeTensors.write(copy.resolve("model.safetensors"), Map.of("w", w, "b", b), null);
    }
    long uploads = client.uploadCount();
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> pkg.load(device));
    assertTrue(e.getMessage().contains("changed since the package was opened"), e.getMessage());
    assertEquals(0, client.uploadCount() - uploads);
  }
}
