package dev.xlaactors.runtime.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.runtime.GpuPlugin;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.XlaClient;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.opentest4j.TestAbortedException;

/**
 * Model packages on a GPU: a package exported for cpu and cuda loads there with its weights uploaded once to
 * the GPU and gives the fixture's exact values; a cpu-only one is refused. Needs only the GPU plugin (no CPU
 * client), so it runs from the smallest bundle of tools/gpu-check.sh. Tagged {@code gpu}: skipped, saying
 * why, where there is no GPU plugin.
 */
@Tag("gpu")
class PackageGpuTest {
  private static XlaClient gpu;
  private static String noGpu;

  @BeforeAll
  static void open() {
    try {
      gpu = GpuPlugin.clientOrSkip();
    } catch (TestAbortedException e) {
      noGpu = e.getMessage();
    }
  }

  @BeforeEach
  void needsAGpu() {
    Assumptions.assumeTrue(gpu != null, noGpu);
  }

  @AfterAll
  static void close() {
    if (gpu != null) {
      gpu.close();
    }
  }

  @Test
  void aPackageExportedForCpuAndCudaLoadsOnTheGpuWithItsWeightsUploadedOnce() {
    ModelPackage pkg = ModelPackage.open(ModelPackageTest.fixture("embedding"));
    int[] tokens = {3, 0, 7, 7, 1, 2, 5, 6};
    int[] mask = {1, 1, 0, 0, 1, 1, 1, 1};
    long uploads = gpu.uploadCount();
    try (LoadedPackage loaded = pkg.load(gpu.devices().get(0))) {
      assertEquals(2 + 2, gpu.uploadCount() - uploads, "2 weights once, and each program's platform index");
      Model model = loaded.model(Role.EMBED, 2);
      assertEquals(gpu.devices().get(0), model.device());
      List<HostTensor> out = model.run(List.of(Argument.of(HostTensor.ofInts(tokens, 2, 4)),
          Argument.of(HostTensor.ofInts(mask, 2, 4))), null);
      assertArrayEquals(ModelPackageTest.embeddingFixtureStates(tokens, mask, 4), out.get(0).toFloatArray(), 1e-5f);
      out.forEach(HostTensor::close);
    }
  }

  @Test
  void aCpuOnlyPackageIsRefusedOnTheGpuNamingThePlatformsBeforeAnyUpload() {
    ModelPackage pkg = ModelPackage.open(ModelPackageTest.fixture("causal-lm"));
    long uploads = gpu.uploadCount();
    RuntimeException refused = assertThrows(RuntimeException.class, () -> pkg.load(gpu.devices().get(0)));
    assertTrue(refused.getMessage().contains("cpu") && refused.getMessage().contains("cuda"), refused.getMessage());
    assertEquals(uploads, gpu.uploadCount(), "nothing uploaded");
  }
}
