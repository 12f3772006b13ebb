package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.SafeTensors;
import java.net.URISyntaxException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A catalog of model packages on a cluster of one node (this JVM, role compute, the real CPU plugin): each
 * id's package is opened and loaded on first use, runs take only the per-request inputs, and a package
 * whose host callbacks are not registered, or that has no main program, is refused naming why.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class ModelCatalogTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(20);
  private static final int D = 64;
  private static ActorSystem<Void> system;
  private static XlaClient client;
  private static CallbackRuntime callbacks;
  private static ModelCatalog catalog;
  private static ShardedComputations computations;

  static Path resource(String dir) {
    try {
      return Path.of(ModelCatalogTest.class.getResource("/" + dir + "/" + ModelPackage.MANIFEST).toURI()).getParent();
    } catch (URISyntaxException e) {
      throw new IllegalStateException(e);
    }
  }

  @BeforeAll
  static void start() throws Exception {
    int port = TestNodes.freePort();
    system = XlaCluster.start(TestNodes.config(port, port, "compute"));
    client = XlaClient.create();
    callbacks = CallbackRuntime.create(system, client);
    catalog = ModelCatalog.ofPackages(Map.of("twice-plus-one", TestNodes.twicePlusOne()), Map.of(
        "affine", resource("packages/tensor"),
        "scoring", resource("scoring"),
        "toy-lm", resource("packages/causal-lm")), client, callbacks);
    computations = ShardedComputations.init(system, "compute", client, callbacks, catalog);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (Cluster.get(system).selfMember().status() != MemberStatus.up()) {
      assertTrue(System.nanoTime() < deadline, "the one-node cluster is not Up after 30 s");
      Thread.sleep(20);
    }
  }

  @AfterAll
  static void stop() throws Exception {
    if (callbacks != null) {
      callbacks.close();
    }
    if (system != null) {
      system.terminate();
      system.getWhenTerminated().toCompletableFuture().get(20, TimeUnit.SECONDS);
    }
    if (catalog != null) {
      catalog.close(); // after the system: the packages' runs have ended
    }
    if (client != null) {
      client.close();
    }
  }

  private static List<HostTensor> get(CompletionStage<List<HostTensor>> run) throws Exception {
    return run.toCompletableFuture().get(30, TimeUnit.SECONDS);
  }

  private static Throwable failure(CompletionStage<List<HostTensor>> run) {
    return assertThrows(ExecutionException.class, () -> get(run)).getCause();
  }

  @Test
  void aPackageIsLoadedOnFirstUseAndRunsItsMainProgram() throws Exception {
    assertEquals(java.util.Set.of("affine", "scoring", "toy-lm", "twice-plus-one"), catalog.ids());
    assertFalse(catalog.isLoaded("affine"), "nothing is loaded before an entity needs it");
    List<HostTensor> out = get(computations.run("affine", List.of(HostTensor.ofFloats(new float[] {1, 2, 3}, 1, 3)), TIMEOUT));
    assertArrayEquals(new float[] {4.5f, 9f}, out.get(0).toFloatArray(), 0f); // x . w + b of the fixture
    assertTrue(catalog.isLoaded("affine"));
    out = get(computations.run("twice-plus-one", List.of(HostTensor.vector(1.5f, -2f, 0.25f, 3f)), TIMEOUT));
    assertArrayEquals(new float[] {4f, -3f, 1.5f, 7f}, out.get(0).toFloatArray(), 0f);
  }

  @Test
  void aPackageIsRefusedUntilItsCallbacksAreRegisteredThenServed() throws Exception {
    XlaException refused = assertInstanceOf(XlaException.class,
        failure(computations.run("scoring", List.of(HostTensor.ofFloats(new float[D], 1, D)), TIMEOUT)));
    assertEquals(ErrorCode.FAILED_PRECONDITION, refused.code());
    assertTrue(refused.getMessage().contains("model 'scoring' could not be loaded")
        && refused.getMessage().contains("calls host callbacks [relu_b1, relu_b16, relu_b2, relu_b32, relu_b4, relu_b8]"
        + " that are not registered"), refused.getMessage());
    assertFalse(catalog.isLoaded("scoring"), "a refused package is not kept");

    for (int b : new int[] {1, 2, 4, 8, 16, 32}) {
      int size = b;
      callbacks.register("relu_b" + b, List.of(TensorType.of(DType.F32, b, D)), null, (in, s) -> {
        float[] h = in.get(0).toFloatArray();
        for (int i = 0; i < h.length; i++) {
          h[i] = Math.max(h[i], 0f);
        }
        return List.of(HostTensor.ofFloats(h, size, D));
      }).toCompletableFuture().join();
    }
    float[] w;
    try (SafeTensors weights = SafeTensors.open(resource("scoring").resolve("model.safetensors"))) {
      w = weights.tensor("w").toFloatArray();
    }
    float[] x = new float[D];
    for (int i = 0; i < D; i++) {
      x[i] = (i % 7 - 3) / 4f;
    }
    // The refusing entity passivates; a later run starts a new one, which loads the package.
    List<HostTensor> out = null;
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (out == null) {
      try {
        out = get(computations.run("scoring", List.of(HostTensor.ofFloats(x, 1, D)), TIMEOUT));
      } catch (ExecutionException e) {
        assertTrue(System.nanoTime() < deadline, "scoring still refused after its callbacks were registered: " + e.getCause());
        Thread.sleep(100);
      }
    }
    float[] y = out.get(0).toFloatArray();
    for (int j = 0; j < D; j++) {
      double s = 0;
      for (int k = 0; k < D; k++) {
        s += (double) x[k] * w[k * D + j];
      }
      assertEquals(Math.max(s, 0), y[j], 1e-4, "output " + j);
    }
    assertTrue(catalog.isLoaded("scoring"));
  }

  @Test
  void aPackageWithoutAMainProgramIsRefusedNamingItsPrograms() {
    XlaException refused = assertInstanceOf(XlaException.class,
        failure(computations.run("toy-lm", List.of(HostTensor.ofInts(new int[] {1, 2, 3, 0}, 1, 4)), TIMEOUT)));
    assertEquals(ErrorCode.FAILED_PRECONDITION, refused.code());
    assertTrue(refused.getMessage().contains("(kind causal-lm) has no main program")
        && refused.getMessage().contains("score (batch 1, length 4, score_b1.jax)"), refused.getMessage());
  }

  @Test
  void aSenderNodesCatalogNeedsNoClientAndNeverLoads() {
    ModelCatalog sender = ModelCatalog.ofPackages(Map.of(), Map.of("affine", Path.of("/nowhere/on/this/node")), null, null);
    assertEquals(java.util.Set.of("affine"), sender.ids());
    XlaException e = assertThrows(XlaException.class, () -> sender.model("affine"));
    assertEquals(ErrorCode.FAILED_PRECONDITION, e.code());
    assertTrue(e.getMessage().contains("was given no XlaClient"), e.getMessage());
    assertFalse(sender.isLoaded("affine"));
    sender.close();
  }

  @Test
  void anIdGivenTwiceIsRefused() {
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> ModelCatalog.ofPackages(
        Map.of("affine", TestNodes.twicePlusOne()), Map.of("affine", resource("packages/tensor")), client, null));
    assertTrue(e.getMessage().contains("ids [affine] are given more than once"), e.getMessage());
  }
}
