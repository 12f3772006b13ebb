package dev.xlaactors.runtime;

import static dev.xlaactors.nativebridge.pjrt.global.Pjrt.PJRT_Client_Create_Args_STRUCT_SIZE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.PluginException;
import dev.xlaactors.nativebridge.pjrt.PJRT_Client_Create_Args;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code XLA_FLAGS} that end the process inside the CPU plugin are refused before it reads them. The
 * child-JVM cases set the variable for a fresh JVM: the raw binding shows the plugin's exit is real, and the
 * public API shows a clean {@link PluginException} and a normal exit instead.
 */
class XlaFlagsTest {
  private static final String YNN = "--xla_cpu_experimental_ynn_fusion_type=";
  /** The build the measured tables of these checks are for. */
  private static final Optional<PluginBuild> PINNED = Optional.of(PluginBuild.named("xla-cpu-pjrt", "the test"));
  /** A plugin that is no supported build (no pin). */
  private static final Optional<PluginBuild> OTHER = Optional.empty();

  /** Entry point of the child JVM. */
  public static void main(String[] args) throws Exception {
    if (args[0].equals("raw-client")) {
      // Past the check: the plugin parses XLA_FLAGS itself.
      Plugin plugin = Plugin.load(RuntimeSettings.load());
      try (PJRT_Client_Create_Args create = new PJRT_Client_Create_Args()) {
        create.struct_size(PJRT_Client_Create_Args_STRUCT_SIZE);
        plugin.api().clientCreate.call(create);
      }
      System.out.println("RAW CLIENT CREATED");
    } else {
      try (XlaClient client = XlaClient.create(); Executable sum = client.compile(TestPrograms.ROW_SUM_F32_8X8)) {
        float[] ones = new float[64];
        java.util.Arrays.fill(ones, 1f);
        System.out.println("RAN " + sum.run(HostTensor.ofFloats(ones, 8, 8)).get(0));
      } catch (PluginException e) {
        System.out.println("REFUSED " + e.code() + " " + e.getMessage());
      }
    }
    System.out.println("CHILD ALIVE");
  }

  private static ChildJvm.Result child(String scenario, String xlaFlags) throws Exception {
    return ChildJvm.run(XlaFlagsTest.class, List.of(), Map.of(XlaFlags.ENV, xlaFlags), scenario);
  }

  /**
   * Measured: on xla-cpu-pjrt this value SIGSEGVs the JVM at the first run of a reduce (ynn_set_external_value_data),
   * so it is refused there; on the builds where it was measured to run ({@link XlaFlags#CRASHES}), it runs.
   */
  @Test
  void theYnnFusionTypeWithEltwiseAndReduceIsRefusedInsteadOfCrashingTheJvm() throws Exception {
    ChildJvm.Result result = child("client", YNN + "dot,eltwise,reduce");
    assertEquals(0, result.exitCode(), result.output());
    String out = result.output();
    if (XlaFlags.CRASHES.get(0).builds().contains(loadedBuild().name())) {
      assertTrue(out.contains("REFUSED INVALID_ARGUMENT XLA_FLAGS='" + YNN + "dot,eltwise,reduce' sets"
          + " --xla_cpu_experimental_ynn_fusion_type so that it holds [DOT, ELTWISE, REDUCE]"), out);
      assertTrue(out.contains("xla-cpu-pjrt 0.0.1 crashes the process (SIGSEGV"), out);
      assertTrue(out.contains("Fix: drop reduce or eltwise from it"), out);
    } else {
      assertTrue(out.contains("RAN "), out);
    }
    assertTrue(out.contains("CHILD ALIVE"), out);
    assertFalse(out.contains("A fatal error has been detected"), out);
  }

  /** The supported build this JVM's settings select (the tests run on a fetched build, with its pin). */
  private static PluginBuild loadedBuild() {
    return Plugin.load(RuntimeSettings.load()).build().orElseThrow(
        () -> new AssertionError("the plugin under test is no supported build: select one with " + PluginBuild.ENV));
  }

  @Test
  void aFusionTypeThatRunsIsLeftAlone() throws Exception {
    ChildJvm.Result result = child("client", YNN + "dot,eltwise");
    assertEquals(0, result.exitCode(), result.output());
    assertTrue(result.output().contains("RAN "), result.output());
    assertTrue(result.output().contains("CHILD ALIVE"), result.output());
  }

  @Test
  void anUnknownFlagEndsTheProcessInsideThePluginAndIsRefusedBeforeIt() throws Exception {
    ChildJvm.Result raw = child("raw-client", "--xla_nonexistent=1");
    assertNotEquals(0, raw.exitCode(), raw.output());
    assertTrue(raw.output().contains("Unknown flag in XLA_FLAGS: --xla_nonexistent=1"), raw.output());
    assertFalse(raw.output().contains("RAW CLIENT CREATED"), raw.output());

    ChildJvm.Result guarded = child("client", "--xla_nonexistent=1");
    assertEquals(0, guarded.exitCode(), guarded.output());
    assertTrue(guarded.output().contains("REFUSED INVALID_ARGUMENT XLA_FLAGS='--xla_nonexistent=1': --xla_nonexistent"
        + " is not a flag of " + loadedBuild()), guarded.output());
    assertTrue(guarded.output().contains("CHILD ALIVE"), guarded.output());
  }

  @Test
  void theRealPluginIsASupportedBuildSoItsFlagsAreChecked() {
    PluginBuild build = loadedBuild();
    assertTrue(PluginBuild.supported().contains(build), build.toString());
    // Counts measured by tools/xla_flags_table.py on each build.
    int expected = switch (build.name()) {
      case "xla-cpu-pjrt" -> 257;
      case "fastatomstruct-xla-cpu" -> 295;
      case "lammps-jax-pjrt-cpu" -> 339;
      default -> throw new AssertionError("no measured table count for " + build);
    };
    assertEquals(expected, XlaFlags.knownFlags(build).size());
    assertTrue(XlaFlags.knownFlags(build).contains("xla_cpu_experimental_ynn_fusion_type"));
  }

  @Test
  void tokensAreSplitAsXlaSplitsThem() {
    List<XlaFlags.Token> tokens = XlaFlags.tokens(
        "  --a=1 --b=\"x y\"\t--c --d='p q' ignored -e --f=\"say \\\"hi\\\"\" --g=x\"y");
    assertEquals(List.of(
        new XlaFlags.Token("a", "1", "--a=1"),
        new XlaFlags.Token("b", "x y", "--b=\"x y\""),
        new XlaFlags.Token("c", null, "--c"),
        new XlaFlags.Token("d", "p q", "--d='p q'"),
        new XlaFlags.Token(null, null, "-e"),
        new XlaFlags.Token("f", "say \"hi\"", "--f=\"say \\\"hi\\\"\""),
        new XlaFlags.Token("g", "x\"y", "--g=x\"y")), tokens);
    // Measured: XLA splits on space, tab, CR and LF, not on form feed, vertical tab or Unicode spaces.
    assertEquals(List.of(new XlaFlags.Token("a", "x\fy\u000Bz\u2003w", "--a=x\fy\u000Bz\u2003w"),
        new XlaFlags.Token("b", "1", "--b=1")), XlaFlags.tokens("--a=x\fy\u000Bz\u2003w\r\n--b=1"));
  }

  /** Each was measured to be accepted by the plugin (a client is created). */
  @Test
  void whatThePluginAcceptsPasses() {
    for (String ok : List.of("", "--xla_cpu_enable_fast_math=false", "--xla_cpu_enable_fast_math",
        "--xla_cpu_enable_fast_math=TRUE --xla_backend_optimization_level=-3",
        "--xla_dump_to=\"/tmp/a b\" --xla_gpu_autotune_gemm_rtol=1e3", "--xla_gpu_autotune_gemm_rtol=inf",
        "--xla_cpu_enable_fast_math=true stray-word", "--xla_step_marker_location=STEP_MARK_AT_ENTRY",
        "--xla_gpu_all_reduce_combine_threshold_bytes=2147483648",
        YNN + "dot", YNN + "eltwise", YNN + "reduce", YNN + "dot,eltwise", YNN + "dot,reduce", YNN + "individual_dot",
        YNN + "eltwise,,", YNN + "+reduce", YNN + "",
        YNN + "eltwise,reduce " + YNN + "dot,eltwise", // the later value replaces the earlier
        "--xla_cpu_experimental_xnn_fusion_type=eltwise,reduce")) {
      XlaFlags.check(ok, PINNED);
    }
  }

  /** Each was measured to end the process: exit 1 at client creation, or SIGSEGV at the first run. */
  @Test
  void whatEndsTheProcessIsRefusedNamingTheFlagAndTheFix() {
    assertRefused("--xla_nonexistent=1", "--xla_nonexistent is not a flag of xla-cpu-pjrt 0.0.1");
    assertRefused("--xla_cpu_enable_fast_math=maybe",
        "--xla_cpu_enable_fast_math=maybe is not a value the plugin can parse (expected true, false, 1 or 0)");
    assertRefused("--xla_backend_optimization_level=2147483648", "expected a decimal integer from -2147483648");
    assertRefused("--xla_backend_optimization_level", "has no value, but it is a int32 flag");
    assertRefused("--xla_step_marker_location=entry", "expected one of STEP_MARK_AT_ENTRY");
    assertRefused("-xla_cpu_enable_fast_math=true", "starts with a single '-'");
    assertRefused("--xla_cpu_experimental_ynn_fusion_type dot,eltwise,reduce", "has no value, but it is a list flag");
    assertRefused("   ", "only whitespace");
    assertRefused(YNN + "dot,bogus", "('bogus' is none of them)");
    assertRefused(YNN + "dot,+eltwise", "some have a prefix and some not");
    assertRefused(YNN + "+eltwise,", "some have a prefix and some not");
    for (String crash : List.of(YNN + "eltwise,reduce", YNN + "reduce,eltwise", YNN + "+eltwise,+reduce",
        YNN + "LIBRARY_FUSION_TYPE_ELTWISE,REDUCE", YNN + "eltwise " + YNN + "+reduce",
        "--xla_cpu_enable_fast_math=false " + YNN + "\"dot,eltwise,reduce\"")) {
      assertRefused(crash, "Fix: drop reduce or eltwise from it");
    }
  }

  @Test
  void aFlagsFileIsReadAndCheckedAndAMissingOneRefused(@TempDir Path dir) throws Exception {
    Path good = Files.writeString(dir.resolve("good"), "--xla_cpu_enable_fast_math=false\n--xla_backend_optimization_level=2\n");
    XlaFlags.check(good.toString(), PINNED);
    Path bad = Files.writeString(dir.resolve("bad"), "--xla_cpu_enable_fast_math=maybe\n");
    assertRefused(bad.toString(), "XLA_FLAGS (the file " + bad + "): --xla_cpu_enable_fast_math=maybe");
    assertRefused(dir.resolve("missing").toString(), "names a flags file (it does not start with '-'), but "
        + dir.resolve("missing") + " cannot be read");
  }

  @Test
  void anotherPluginGetsTheSyntaxAndTheKnownCrashesChecked() {
    XlaFlags.check("--xla_gpu_something_newer=1 " + YNN + "dot,eltwise", OTHER);
    PluginException e = assertThrows(PluginException.class, () -> XlaFlags.check("-x", OTHER));
    assertTrue(e.getMessage().contains("starts with a single '-'"), e.getMessage());
    // A copy of the pinned plugin without its .pin (seen on a lent GPU machine) crashed the JVM before this.
    PluginException crash = assertThrows(PluginException.class, () -> XlaFlags.check(YNN + "eltwise,reduce", OTHER));
    assertTrue(crash.getMessage().contains("SIGSEGV"), crash.getMessage());
  }

  @Test
  void listsAddRemoveAndReplaceAsThePluginDoes() {
    List<String> types = List.of("DOT", "ELTWISE", "REDUCE", "INDIVIDUAL_DOT", "INVALID");
    Set<String> current = new TreeSet<>();
    assertEquals(null, XlaFlags.list("dot,Eltwise", "LIBRARY_FUSION_TYPE_", types, current));
    assertEquals(Set.of("DOT", "ELTWISE"), current);
    assertEquals(null, XlaFlags.list("-dot,+library_fusion_type_reduce", "LIBRARY_FUSION_TYPE_", types, current));
    assertEquals(Set.of("ELTWISE", "REDUCE"), current);
    assertEquals(null, XlaFlags.list("individual_dot,,", "LIBRARY_FUSION_TYPE_", types, current));
    assertEquals(Set.of("INDIVIDUAL_DOT"), current);
    assertTrue(XlaFlags.list("+dot,", "LIBRARY_FUSION_TYPE_", types, current).contains("some have a prefix and some not"));
  }

  /** The other list syntaxes, each measured on the plugin. */
  @Test
  void theOtherListFlagsFollowTheirMeasuredSyntax() {
    for (String ok : List.of("--xla_gpu_disable_async_collectives=allreduce,ALLGATHER",
        "--xla_gpu_enable_command_buffer=+fusion,-cublas", "--xla_gpu_enable_command_buffer=",
        "--xla_gpu_unsupported_generic_triton_emitter_features=generic_triton_emitter_enable_nested_gemm",
        "--xla_fuel=abc=-1,=2", "--xla_gpu_shape_checks=COMPILE_TIME")) {
      XlaFlags.check(ok, PINNED);
    }
    assertRefused("--xla_gpu_disable_async_collectives=", "(any case; '' is none of them)");
    assertRefused("--xla_gpu_disable_async_collectives=+allreduce", "'+allreduce' is none of them");
    assertRefused("--xla_gpu_enable_command_buffer=fusion,+cublas", "some have a prefix and some not");
    assertRefused("--xla_fuel=abc=1,", "comma-separated pass=N items");
    assertRefused("--xla_gpu_shape_checks=runtime", "one of IGNORE, RUNTIME, COMPILE_TIME");
  }

  private static void assertRefused(String xlaFlags, String part) {
    PluginException e = assertThrows(PluginException.class, () -> XlaFlags.check(xlaFlags, PINNED), xlaFlags);
    assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
    assertTrue(e.getMessage().startsWith("XLA_FLAGS"), e.getMessage());
    assertTrue(e.getMessage().contains(part), "'" + xlaFlags + "': " + e.getMessage());
  }
}
