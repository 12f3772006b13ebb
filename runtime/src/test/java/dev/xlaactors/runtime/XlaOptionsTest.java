package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.PluginException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The XLA options of one compilation ({@link CompileOptions#xlaOptions()}): sent as JAX's compiler_options
 * are, applied by the real plugin to that program only, and checked against the build's flag table first.
 */
class XlaOptionsTest {
  private static final Optional<PluginBuild> PINNED = Optional.of(PluginBuild.named("xla-cpu-pjrt", "the test"));

  private static XlaClient client;

  @TempDir Path dumps;

  @BeforeAll
  static void open() {
    client = XlaClient.create();
  }

  @AfterAll
  static void close() {
    client.close();
  }

  @Test
  void anOptionIsSerialisedAsJaxlibSerialisesItsCompilerOptions() {
    // jaxlib 0.10.2: CompileOptions().env_option_overrides = [("xla_cpu_use_xnnpack", False)] ends in these bytes.
    byte[] jaxlib = HexFormat.of().parseHex("3a190a13786c615f6370755f7573655f786e6e7061636b12021000");
    byte[] ours = CompileOptions.defaults().withXlaOptions(Map.of("xla_cpu_use_xnnpack", "false")).toProto();
    assertArrayEquals(jaxlib, Arrays.copyOfRange(ours, ours.length - jaxlib.length, ours.length));
    assertArrayEquals(CompileOptions.defaults().toProto(),
        Arrays.copyOf(ours, ours.length - jaxlib.length), "the rest is the options without it");
  }

  @Test
  void theOptionsReachThatCompilationOnly() throws IOException {
    CompileOptions dumped = CompileOptions.defaults()
        .withXlaOptions(Map.of("xla_dump_to", dumps.toString(), "xla_dump_hlo_as_text", "TRUE"));
    try (Executable sum = client.compile(TestPrograms.ROW_SUM_F32_8X8, dumped)) {
      float[] ones = new float[64];
      Arrays.fill(ones, 1f);
      assertArrayEquals(new float[] {8, 8, 8, 8, 8, 8, 8, 8},
          sum.run(HostTensor.ofFloats(ones, 8, 8)).get(0).toFloatArray());
    }
    long optimized = afterOptimizations();
    assertEquals(1, optimized, "the program compiled with xla_dump_to is dumped there");
    try (Executable add = client.compile(TestPrograms.ADD_F32_4)) {
      assertEquals(optimized, afterOptimizations(), "a program compiled without it is not");
    }
  }

  private long afterOptimizations() throws IOException {
    try (Stream<Path> files = Files.list(dumps)) {
      return files.filter(f -> f.getFileName().toString().endsWith("after_optimizations.txt")).count();
    }
  }

  @Test
  void anUnknownOptionOrABadValueIsRefusedBeforeThePluginNamingTheFix() {
    PluginException unknown = assertThrows(PluginException.class, () -> client.compile(TestPrograms.ROW_SUM_F32_8X8,
        CompileOptions.defaults().withXlaOptions(Map.of("xla_cpu_use_xnnpak", "false"))));
    assertEquals(ErrorCode.INVALID_ARGUMENT, unknown.code());
    assertTrue(unknown.getMessage().contains("xla_cpu_use_xnnpak is not an XLA option of "), unknown.getMessage());
    PluginException value = assertThrows(PluginException.class, () -> client.compile(TestPrograms.ROW_SUM_F32_8X8,
        CompileOptions.defaults().withXlaOptions(Map.of("xla_cpu_use_xnnpack", "no"))));
    assertTrue(value.getMessage().contains("XLA option xla_cpu_use_xnnpack=no (CompileOptions.xlaOptions): no is not a"
        + " value xla_cpu_use_xnnpack takes (expected true, false, 1 or 0)"), value.getMessage());
    InvalidArgumentException name = assertThrows(InvalidArgumentException.class,
        () -> CompileOptions.defaults().withXlaOptions(Map.of("--xla_cpu_use_xnnpack", "false")));
    assertTrue(name.getMessage().contains("'--xla_cpu_use_xnnpack' is not the name of an XLA DebugOptions field"),
        name.getMessage());
  }

  @Test
  void aValueMeasuredToCrashThePinnedBuildIsRefused() {
    PluginException crash = assertThrows(PluginException.class, () -> XlaFlags.checkOptions(
        Map.of("xla_cpu_experimental_ynn_fusion_type", "dot,eltwise,reduce"), PINNED));
    assertTrue(crash.getMessage().contains("holds [DOT, ELTWISE, REDUCE]: with both eltwise and reduce, xla-cpu-pjrt"
        + " 0.0.1 crashes the process") && crash.getMessage().contains("Fix: drop reduce or eltwise"), crash.getMessage());
  }

  @Test
  void valuesAreSentAsThePluginParsesThem() {
    assertEquals(Map.of("xla_cpu_experimental_ynn_fusion_type", "LIBRARY_FUSION_TYPE_DOT,LIBRARY_FUSION_TYPE_REDUCE",
        "xla_cpu_experimental_xnn_graph_fusion_mode", "XNN_GRAPH_FUSION_MODE_GREEDY", "xla_cpu_use_xnnpack", "false"),
        XlaFlags.checkOptions(Map.of("xla_cpu_experimental_ynn_fusion_type", "reduce,dot",
            "xla_cpu_experimental_xnn_graph_fusion_mode", "xnn_graph_fusion_mode_greedy", "xla_cpu_use_xnnpack", "0"),
            PINNED));
    // The plugin takes the short list items only in full ("'dot' is not a valid enum value" otherwise).
    try (Executable sum = client.compile(TestPrograms.ROW_SUM_F32_8X8, CompileOptions.defaults()
        .withXlaOptions(Map.of("xla_cpu_experimental_ynn_fusion_type", "dot,reduce")))) {
      float[] ones = new float[64];
      Arrays.fill(ones, 2f);
      assertEquals(16f, sum.run(HostTensor.ofFloats(ones, 8, 8)).get(0).toFloatArray()[3]);
    }
  }
}
