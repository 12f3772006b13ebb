package dev.xlaactors.runtime.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.PluginException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.XlaClient;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The XLA options of a model package's programs by role: read from the config (the reference's defaults, a
 * user's changes, bad keys named), and applied to the programs of that role only when the package loads on
 * the real plugin.
 */
class PackageXlaOptionsTest {
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

  private static Config with(String text) {
    return ConfigFactory.parseString(text).withFallback(ConfigFactory.load()).resolve();
  }

  @Test
  void theReferenceKeepsXnnpackOffTheWeightsAndFusesTheDecodeStepsElementwiseWork() {
    PackageXlaOptions reference = PackageXlaOptions.load();
    for (Role prompt : new Role[] {Role.SCORE, Role.PREFILL_SLOT, Role.EMBED}) {
      assertEquals(Map.of("xla_cpu_use_xnnpack", "false"), reference.of(prompt), prompt.jsonName());
    }
    assertEquals(Map.of("xla_cpu_use_xnnpack", "false",
        "xla_cpu_experimental_xnn_graph_fusion_mode", "XNN_GRAPH_FUSION_MODE_BYPASS_COST_MODEL"),
        reference.of(Role.DECODE_SLOTS));
    assertEquals(Map.of(), reference.of(Role.MAIN));
    assertEquals(Map.of(), reference.of(Role.SLOT_CACHE));
  }

  @Test
  void aProgramThatCallsTheNativeKernelsDecodesWithoutXnnpacksGraphFusionsAndOthersKeepThem() {
    PackageXlaOptions reference = PackageXlaOptions.load();
    Map<String, String> portable = reference.of(Role.DECODE_BATCH, false);
    assertEquals("XNN_GRAPH_FUSION_MODE_BYPASS_COST_MODEL", portable.get("xla_cpu_experimental_xnn_graph_fusion_mode"));
    assertEquals(Map.of("xla_cpu_use_xnnpack", "false",
        "xla_cpu_experimental_xnn_graph_fusion_mode", "XNN_GRAPH_FUSION_MODE_DISABLED"), reference.of(Role.DECODE_BATCH, true));
    assertEquals(reference.of(Role.PREFILL_CHUNK), reference.of(Role.PREFILL_CHUNK, true), "no other role changes");
    PackageXlaOptions user = PackageXlaOptions.fromConfig(with(PackageXlaOptions.NATIVE_KERNELS_KEY
        + " { decode_batch { xla_cpu_experimental_xnn_graph_fusion_mode = null }, score { xla_cpu_use_xnnpack = true } }"));
    assertEquals(Map.of("xla_cpu_use_xnnpack", "false"), user.of(Role.DECODE_BATCH, true), "null unsets the role's option");
    assertEquals(Map.of("xla_cpu_use_xnnpack", "true"), user.of(Role.SCORE, true));
    assertEquals(Map.of("xla_cpu_use_xnnpack", "false"), user.of(Role.SCORE, false));
    XlaException misspelt = assertThrows(XlaException.class, () -> PackageXlaOptions.fromConfig(
        with(PackageXlaOptions.NATIVE_KERNELS_KEY + ".decode_bach.xla_cpu_use_xnnpack = true")));
    assertTrue(misspelt.getMessage().contains("unknown configuration key " + PackageXlaOptions.NATIVE_KERNELS_KEY
        + ".decode_bach"), misspelt.getMessage());
  }

  @Test
  void aModuleCallsTheNativeKernelsWhenItNamesABridgeTargetOtherThanHostCallbacks() {
    byte[] kernels = "\u0000custom_call\u0000xla_actors.matmul_f32\u0000".getBytes(java.nio.charset.StandardCharsets.ISO_8859_1);
    byte[] callbacksOnly = "xla_actors.host_callback\u0000xla_actors.host_callback".getBytes(java.nio.charset.StandardCharsets.ISO_8859_1);
    byte[] both = "xla_actors.host_callback xla_actors.decode_attention".getBytes(java.nio.charset.StandardCharsets.ISO_8859_1);
    assertTrue(LoadedPackage.callsNativeKernels(kernels));
    assertTrue(LoadedPackage.callsNativeKernels(both));
    assertEquals(false, LoadedPackage.callsNativeKernels(callbacksOnly));
    assertEquals(false, LoadedPackage.callsNativeKernels(new byte[0]));
  }

  @Test
  void aUserAddsOptionsToARoleAndUnsetsADefaultWithNull() {
    PackageXlaOptions options = PackageXlaOptions.fromConfig(with(PackageXlaOptions.KEY
        + " { score { xla_cpu_use_xnnpack = null }, main { xla_cpu_parallel_codegen_split_count = 4 } }"));
    assertEquals(Map.of(), options.of(Role.SCORE));
    assertEquals(Map.of("xla_cpu_parallel_codegen_split_count", "4"), options.of(Role.MAIN));
    assertEquals(Map.of("xla_cpu_use_xnnpack", "false"), options.of(Role.PREFILL_SLOT));
  }

  @Test
  void aMisspeltRoleOrAnOptionThatIsNoValueIsRefusedNamingTheKey() {
    XlaException role = assertThrows(XlaException.class, () -> PackageXlaOptions.fromConfig(
        with(PackageXlaOptions.KEY + ".prefil_slot.xla_cpu_use_xnnpack = false")));
    assertTrue(role.getMessage().contains("unknown configuration key " + PackageXlaOptions.KEY + ".prefil_slot"),
        role.getMessage());
    XlaException object = assertThrows(XlaException.class, () -> PackageXlaOptions.fromConfig(
        with(PackageXlaOptions.KEY + ".main.xla_cpu_use_xnnpack { on = true }")));
    assertTrue(object.getMessage().contains(PackageXlaOptions.KEY + ".main.xla_cpu_use_xnnpack is {")
        && object.getMessage().contains("an XLA option takes one value"), object.getMessage());
  }

  @Test
  void eachProgramCompilesWithItsRolesOptionsOnly() throws IOException {
    ModelPackage pkg = ModelPackage.open(ModelPackageTest.fixture("causal-lm"));
    PackageXlaOptions dumpScore = new PackageXlaOptions(
        Map.of(Role.SCORE, Map.of("xla_dump_to", dumps.toString(), "xla_dump_hlo_as_text", "true")));
    try (LoadedPackage loaded = pkg.load(client.devices().get(0), dumpScore)) {
      assertEquals(2, loaded.models(Role.SCORE).size());
    }
    try (Stream<Path> files = Files.list(dumps)) {
      assertEquals(2, files.filter(f -> f.getFileName().toString().endsWith("after_optimizations.txt")).count(),
          "the two score programs are dumped, and no program of another role");
    }
  }

  @Test
  void anOptionThePluginBuildRefusesFailsTheLoadNamingTheKeyItCameFrom() {
    ModelPackage pkg = ModelPackage.open(ModelPackageTest.fixture("causal-lm"));
    long uploads = client.uploadCount();
    PluginException e = assertThrows(PluginException.class, () -> pkg.load(client.devices().get(0),
        new PackageXlaOptions(Map.of(Role.DECODE_SLOTS, Map.of("xla_cpu_use_xnnpack", "maybe")))));
    assertTrue(e.getMessage().contains("of model package 'toy-lm' is compiled with " + PackageXlaOptions.KEY
        + ".decode_slots = {xla_cpu_use_xnnpack=maybe}: XLA option xla_cpu_use_xnnpack=maybe"), e.getMessage());
    assertEquals(uploads, client.uploadCount(), "refused before any weight was uploaded");
  }
}
