package dev.xlaactors.runtime.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.xlaactors.error.CompileException;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.graph.JaxFixture;
import dev.xlaactors.runtime.CompileOptions;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * jax.export artifacts written by tools/jax_export_fixtures.py (jax 0.10.2): read, checked against what JAX
 * reported when it wrote them, compiled and run on the real plugin, outputs compared with JAX's
 * {@code Exported.call}; and bad artifacts, each a clear error.
 */
class JaxExportArtifactTest {
  static XlaClient client;

  @BeforeAll
  static void open() {
    client = XlaClient.create();
  }

  @AfterAll
  static void close() {
    client.close();
  }

  static byte[] artifact(String name) {
    try (InputStream in = JaxExportArtifactTest.class.getResourceAsStream("/fixtures/export/" + name + ".jaxexport")) {
      if (in == null) {
        throw new IllegalStateException("missing fixtures/export/" + name + ".jaxexport; run tools/jax_export_fixtures.py");
      }
      return in.readAllBytes();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static JaxExport load(String name) {
    return JaxExport.fromBytes(name + ".jaxexport", artifact(name));
  }

  /** The facts tools/jax_export_fixtures.py wrote for {@code name}: values of {@code key}, in order. */
  static List<String> expected(String name, String key) {
    List<String> values = new ArrayList<>();
    for (String line : JaxFixture.resource("export/" + name + ".expect").split("\n")) {
      if (line.startsWith(key + " ")) {
        values.add(line.substring(key.length() + 1));
      } else if (line.equals(key)) {
        values.add("");
      }
    }
    return values;
  }

  @ParameterizedTest
  @ValueSource(strings = {"mlp", "nested", "keys", "dtypes", "unused", "multi_platform", "symbolic", "donated"})
  void readsWhatJaxWrote(String name) {
    JaxExport export = load(name);
    assertEquals(expected(name, "function"), List.of(export.functionName()));
    assertEquals(expected(name, "serialization_version"), List.of(String.valueOf(export.serializationVersion())));
    assertEquals(expected(name, "calling_convention_version"), List.of(String.valueOf(export.callingConventionVersion())));
    assertEquals(expected(name, "platform"), export.platforms());
    assertEquals(expected(name, "ordered_effect"), export.orderedEffects());
    assertEquals(expected(name, "kept_var"), export.keptInputs().stream().map(String::valueOf).toList());
    assertEquals(expected(name, "input_path"), export.inputPaths());
    assertEquals(expected(name, "input_aval"), export.inputAvals().stream().map(JaxExport.Aval::toString).toList());
    assertEquals(expected(name, "output_path"), export.outputPaths());
    assertEquals(expected(name, "output_aval"), export.outputAvals().stream().map(JaxExport.Aval::toString).toList());
    byte[] module = export.module();
    // A portable artifact is MLIR bytecode: magic "ML\xefR".
    assertArrayEquals(new byte[] {'M', 'L', (byte) 0xef, 'R'}, Arrays.copyOf(module, 4), name);
  }

  @ParameterizedTest
  @ValueSource(strings = {"mlp", "nested", "keys", "dtypes", "unused", "multi_platform"})
  void compilesRunsAndMatchesJax(String name) {
    JaxExport export = load(name);
    JaxFixture fixture = JaxFixture.load("export/" + name);
    assertEquals(fixture.inputs().stream().map(HostTensor::type).toList(), export.inputTypes());
    try (Executable exe = export.compile(client)) {
      assertEquals(export.parameterTypes(), exe.parameterTypes());
      assertEquals(export.outputTypes(), exe.outputTypes());
      fixture.check(export.run(exe, fixture.inputs()), 1e-5, 1e-6, name + ".jaxexport");
    }
  }

  @Test
  void namesAndParametersFollowTheExport() {
    JaxExport mlp = load("mlp");
    assertEquals(List.of("b1", "b2", "w1", "w2", "[1]"), mlp.inputNames());
    assertEquals(mlp.inputNames(), mlp.parameterNames());
    assertEquals(List.of("[0]", "[1]['k'][0]", "[1]['s']"), load("nested").inputNames()); // [1] is not flat
    // Keys unquoted as keystr (Python's repr) quoted them; keyword arguments keep their keystr.
    assertEquals(List.of("blocks.0.attn.wo", "both '\"", "café", "it's", "say \"hi\"", "['scale']"),
        load("keys").inputNames());

    JaxExport unused = load("unused"); // f(a, b, c) never reads b: JAX drops it from the module
    assertEquals(List.of(0, 2), unused.keptInputs());
    assertEquals(List.of("[0]", "[2]"), unused.parameterNames());
    assertEquals(List.of(TensorType.of(DType.F32, 2, 2), TensorType.of(DType.F32, 2, 2)), unused.parameterTypes());

    JaxExport multi = load("multi_platform"); // cpu and cuda: @main takes the platform index first
    assertEquals(List.of(JaxExport.PLATFORM_INDEX, "[0]"), multi.parameterNames());
    assertEquals(List.of(TensorType.of(DType.S32), TensorType.of(DType.F32, 2, 3)), multi.parameterTypes());
    assertEquals(0, multi.platformIndex(client));
    assertEquals(0, multi.constants(client).get(JaxExport.PLATFORM_INDEX).toLongArray()[0]);
    assertTrue(load("mlp").constants(client).isEmpty());
  }

  @Test
  void concreteTypesThatMatchCompile() {
    JaxExport mlp = load("mlp");
    JaxFixture fixture = JaxFixture.load("export/mlp");
    try (Executable exe = mlp.compile(client, mlp.inputTypes())) {
      fixture.check(mlp.run(exe, fixture.inputs()), 1e-5, 1e-6, "mlp via compile(client, types)");
    }
    List<TensorType> wrong = new ArrayList<>(mlp.inputTypes());
    wrong.set(4, TensorType.of(DType.F32, 3, 8));
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> mlp.compile(client, wrong));
    assertTrue(e.getMessage().contains("input 4 ([1])") && e.getMessage().contains("f32[2,8]"), e.getMessage());
  }

  @Test
  void symbolicDimensionsAreNamedNeverCrash() {
    JaxExport symbolic = load("symbolic");
    assertTrue(symbolic.inputAvals().get(0).isSymbolic());
    assertEquals("2*b", symbolic.outputAvals().get(0).dims().get(0));
    InvalidArgumentException types = assertThrows(InvalidArgumentException.class, symbolic::inputTypes);
    assertTrue(types.getMessage().contains("symbolic dimension 'b' in f32[b,16]"), types.getMessage());

    CompileException plain = assertThrows(CompileException.class, () -> symbolic.compile(client));
    assertTrue(plain.getMessage().startsWith("input 0 ([0]) of jax.export artifact symbolic.jaxexport has symbolic "
        + "dimension 'b' in f32[b,16]"), plain.getMessage());
    assertTrue(plain.getMessage().contains("concrete shapes"), plain.getMessage());

    CompileException concrete = assertThrows(CompileException.class,
        () -> symbolic.compile(client, List.of(TensorType.of(DType.F32, 8, 16))));
    assertTrue(concrete.getMessage().contains("symbolic dimension 'b' in f32[b,16]")
        && concrete.getMessage().contains("{b=8}"), concrete.getMessage());
    InvalidArgumentException mismatch = assertThrows(InvalidArgumentException.class,
        () -> symbolic.compile(client, List.of(TensorType.of(DType.F32, 8, 15))));
    assertTrue(mismatch.getMessage().contains("f32[b,16]"), mismatch.getMessage());
  }

  @Test
  void runChecksInputsAgainstTheAvals() {
    JaxExport unused = load("unused");
    try (Executable exe = unused.compile(client)) {
      HostTensor a = HostTensor.ofFloats(new float[4], 2, 2);
      InvalidArgumentException count = assertThrows(InvalidArgumentException.class, () -> unused.run(exe, List.of(a, a)));
      assertTrue(count.getMessage().contains("takes 3 inputs"), count.getMessage());
      InvalidArgumentException type = assertThrows(InvalidArgumentException.class, () -> unused.run(exe, List.of(a, a, a)));
      assertTrue(type.getMessage().contains("input 1 ([1])") && type.getMessage().contains("s32[3]"), type.getMessage());
    }
  }

  @Test
  void unknownVersionsAreRefusedNamingThem() {
    InvalidArgumentException serialization =
        assertThrows(InvalidArgumentException.class, () -> load("bad_serialization_version"));
    assertTrue(serialization.getMessage().contains("serialization version 99")
        && serialization.getMessage().contains("versions 1 to 11"), serialization.getMessage());
    InvalidArgumentException calling = assertThrows(InvalidArgumentException.class, () -> load("bad_calling_convention"));
    assertTrue(calling.getMessage().contains("calling convention version 99")
        && calling.getMessage().contains("versions 9 to 10"), calling.getMessage());
  }

  @Test
  void exportsThatCannotRunHereAreRefusedAtCompile() {
    JaxExport cuda = load("bad_cuda_only");
    assertEquals(List.of("cuda"), cuda.platforms());
    CompileException platform = assertThrows(CompileException.class, () -> cuda.compile(client));
    assertTrue(platform.getMessage().contains("[cuda]") && platform.getMessage().contains("'cpu'"), platform.getMessage());

    JaxExport effects = load("bad_ordered_effects");
    // JAX writes an effect as str() of its type.
    assertEquals(List.of("<class '__main__.TestOrderedEffect'>"), effects.orderedEffects());
    CompileException ordered = assertThrows(CompileException.class, () -> effects.compile(client));
    assertTrue(ordered.getMessage().contains("ordered effects [<class '__main__.TestOrderedEffect'>]"), ordered.getMessage());
  }

  @Test
  void anotherFlatBufferIsNotAnExport() {
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> load("bad_other_flatbuffer"));
    assertTrue(e.getMessage().contains("bad_other_flatbuffer.jaxexport"), e.getMessage());
  }

  @Test
  void truncatedArtifactsAreClearErrors() {
    byte[] full = artifact("mlp");
    for (int length : new int[] {0, 3, 11, 12, 64, full.length / 2, full.length - 200}) {
      byte[] cut = Arrays.copyOf(full, length);
      InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
          () -> JaxExport.fromBytes("cut.jaxexport", cut), "truncated to " + length);
      assertTrue(e.getMessage().contains("cut.jaxexport"), e.getMessage());
    }
  }

  @Test
  void randomAndCorruptedBytesNeverEscapeAsAnythingElse() {
    Random random = new Random(20261125);
    for (int i = 0; i < 500; i++) {
      byte[] bytes = new byte[random.nextInt(4096)];
      random.nextBytes(bytes);
      assertThrows(InvalidArgumentException.class, () -> JaxExport.fromBytes("random", bytes), "random bytes " + i);
    }
    byte[] good = artifact("nested");
    for (int i = 0; i < 2000; i++) {
      byte[] bytes = good.clone();
      for (int flips = 1 + random.nextInt(4); flips > 0; flips--) {
        bytes[random.nextInt(bytes.length)] = (byte) random.nextInt(256);
      }
      try {
        JaxExport.fromBytes("corrupted", bytes); // a flip inside the module's bytes or a name still reads
      } catch (InvalidArgumentException expected) {
        assertTrue(expected.getMessage().contains("corrupted"), expected.getMessage());
      } catch (RuntimeException | Error e) {
        fail("corrupted artifact " + i + " escaped as " + e, e);
      }
    }
  }

  @Test
  void garbageModuleBytesAreACompileErrorNotACrash() {
    byte[] garbage = new byte[256];
    new Random(7).nextBytes(garbage);
    garbage[0] = 'M';
    garbage[1] = 'L';
    garbage[2] = (byte) 0xef;
    garbage[3] = 'R';
    CompileException e = assertThrows(CompileException.class,
        () -> client.compileModule("garbage", garbage, List.of(), CompileOptions.defaults()));
    assertTrue(e.getMessage().startsWith("module garbage does not compile"), e.getMessage());
  }

  @Test
  void theModuleCompilesAloneAndFilesReadAsArtifacts(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
      throws IOException {
    JaxExport mlp = load("mlp");
    JaxFixture fixture = JaxFixture.load("export/mlp");
    // The portable artifact by itself, through the bytecode entry point, with the parameter types given.
    try (Executable exe = client.compileModule("mlp module", mlp.module(), mlp.parameterTypes(), CompileOptions.defaults())) {
      fixture.check(exe.run(fixture.inputs(), null), 1e-5, 1e-6, "mlp module");
    }
    java.nio.file.Path file = dir.resolve("mlp.jaxexport");
    java.nio.file.Files.write(file, artifact("mlp"));
    assertEquals(mlp.inputPaths(), JaxExport.read(file).inputPaths());
    assertEquals("mlp.jaxexport", JaxExport.read(file).source());
    // ImportedProgram reads text; given bytecode it says where bytecode goes instead of failing to parse.
    java.nio.file.Path module = dir.resolve("mlp.mlirbc");
    java.nio.file.Files.write(module, mlp.module());
    CompileException e = assertThrows(CompileException.class, () -> dev.xlaactors.graph.ImportedProgram.fromFile(module));
    assertTrue(e.getMessage().contains("MLIR bytecode") && e.getMessage().contains("compileModule"), e.getMessage());
  }

  /** The Java snippet of docs/jax-export.md, as written there (file read from the fixtures). */
  @Test
  void docsSnippet(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir) throws IOException {
    java.nio.file.Files.write(dir.resolve("mlp.jaxexport"), artifact("mlp"));
    java.nio.file.Path file = dir.resolve("mlp.jaxexport");
    HostTensor w1 = HostTensor.ofFloats(new float[8 * 16], 8, 16);
    HostTensor b1 = HostTensor.ofFloats(new float[16], 16);
    HostTensor w2 = HostTensor.ofFloats(new float[16 * 4], 16, 4);
    HostTensor b2 = HostTensor.ofFloats(new float[4], 4);
    HostTensor x = HostTensor.ofFloats(new float[2 * 8], 2, 8);
    // --- snippet start
    JaxExport export = JaxExport.read(file);
    System.out.println(export.inputPaths());   // [[0]['b1'], [0]['b2'], [0]['w1'], [0]['w2'], [1]]
    System.out.println(export.inputNames());   // [b1, b2, w1, w2, [1]]
    System.out.println(export.outputAvals());  // [f32[2,4]]
    try (XlaClient client = XlaClient.create();
        Executable exe = export.compile(client)) {
      // Inputs in inputPaths() order; run() does what Exported.call does (dropped inputs, platform index).
      List<HostTensor> out = export.run(exe, List.of(b1, b2, w1, w2, x));
      System.out.println(out.get(0).type());   // f32[2,4]
      // --- snippet end
      assertEquals(TensorType.of(DType.F32, 2, 4), out.get(0).type());
      // Zero weights: softmax of zeros is uniform.
      for (float p : out.get(0).toFloatArray()) {
        assertEquals(0.25f, p, 1e-6f);
      }
    }
  }
}
