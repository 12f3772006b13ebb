package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.HostTensor;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.apache.pekko.actor.typed.ActorSystem;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;

/**
 * Three real JVMs on loopback: this test JVM is the seed with role {@code front} (a sharding proxy, no
 * XLA), two child JVMs B and C (role {@code compute}) host the computation entities, each on its own CPU
 * plugin. A run asked for on the front is computed on another node with correct values; an unknown id
 * fails naming the catalog; killing the node that runs a computation fails the run in flight at its
 * timeout, and later runs of every id are computed on the survivor.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ShardedComputationClusterTest {
  private static final Pattern READY = Pattern.compile("READY (\\S+)");

  private static ChildJvms children;
  private static final List<ChildJvms.Child> computeNodes = new ArrayList<>();
  private static ActorSystem<Void> system;

  @BeforeAll
  static void startCluster() throws Exception {
    Path dir = Files.createTempDirectory("xla-sharded-computations");
    children = new ChildJvms(dir);
    int seedPort = TestNodes.freePort();
    computeNodes.add(children.start("node-b", ComputationNodeMain.class, "node-b", Integer.toString(seedPort)));
    computeNodes.add(children.start("node-c", ComputationNodeMain.class, "node-c", Integer.toString(seedPort)));
    system = XlaCluster.start(TestNodes.config(seedPort, seedPort, "front"));
    ShardedComputations.init(system, "compute", null, null, null);
    for (ChildJvms.Child node : computeNodes) {
      node.await(READY, Duration.ofSeconds(60));
    }
  }

  @AfterAll
  static void stopCluster() throws Exception {
    try {
      if (system != null) {
        system.terminate();
        system.getWhenTerminated().toCompletableFuture().get(20, TimeUnit.SECONDS);
      }
    } finally {
      children.close();
    }
  }

  private static final float[] X = {1, 2, 3, 4};
  private static final float[] TWICE_PLUS_ONE = {3, 5, 7, 9};

  private static CompletableFuture<List<HostTensor>> run(String id, Duration timeout) {
    return ShardedComputations.run(system, id, List.of(HostTensor.ofFloats(X, 4)), timeout).toCompletableFuture();
  }

  /** The compute node whose log says computation {@code id} started there, or null. */
  private static ChildJvms.Child hostOf(String id, List<ChildJvms.Child> among) {
    ChildJvms.Child host = null;
    for (ChildJvms.Child node : among) {
      if (node.output().contains("computation '" + id + "' starts on node")) {
        assertTrue(host == null, "computation " + id + " started on two nodes at once");
        host = node;
      }
    }
    return host;
  }

  @Test
  @Order(1)
  void aRunAskedOnTheFrontIsComputedOnAComputeNode() throws Exception {
    List<HostTensor> out = run("twice-plus-one", Duration.ofSeconds(30)).get(40, TimeUnit.SECONDS);
    assertEquals(1, out.size());
    assertArrayEquals(TWICE_PLUS_ONE, out.get(0).toFloatArray());
    assertNotNull(hostOf("twice-plus-one", computeNodes), "no compute node logged that it runs the computation");
    // A second run goes to the same entity: compiled once, still correct.
    assertArrayEquals(TWICE_PLUS_ONE, run("twice-plus-one", Duration.ofSeconds(10)).get(20, TimeUnit.SECONDS).get(0).toFloatArray());
  }

  @Test
  @Order(2)
  void anUnknownComputationFailsNamingTheCatalog() {
    ExecutionException e = assertThrows(ExecutionException.class, () -> run("no-such", Duration.ofSeconds(20)).get(30, TimeUnit.SECONDS));
    XlaException x = assertInstanceOf(XlaException.class, e.getCause());
    assertEquals(ErrorCode.NOT_FOUND, x.code());
    assertTrue(x.getMessage().contains("no computation 'no-such'") && x.getMessage().contains("twice-plus-one"), x.getMessage());
  }

  @Test
  @Order(3)
  void killingTheNodeMidRunFailsThatRunAndTheSurvivorServesEveryComputation() throws Exception {
    CompletableFuture<List<HostTensor>> inFlight = run("slow", Duration.ofSeconds(12));
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    ChildJvms.Child victim;
    while ((victim = hostOf("slow", computeNodes)) == null) {
      assertTrue(System.nanoTime() < deadline, "no compute node started computation 'slow' within 30 s");
      Thread.sleep(50);
    }
    Thread.sleep(500); // compiled and running (the run takes about 3 s)
    ChildJvms.kill(victim);
    long killed = System.nanoTime();

    ExecutionException lost = assertThrows(ExecutionException.class, () -> inFlight.get(30, TimeUnit.SECONDS));
    XlaException x = assertInstanceOf(XlaException.class, lost.getCause());
    assertEquals(ErrorCode.DEADLINE_EXCEEDED, x.code(), x.getMessage());
    assertTrue(x.getMessage().contains("computation 'slow' did not answer within"), x.getMessage());

    ChildJvms.Child survivor = computeNodes.get(0) == victim ? computeNodes.get(1) : computeNodes.get(0);
    for (String id : List.of("slow", "twice-plus-one")) {
      List<HostTensor> out = untilServed(id, deadline(60));
      assertArrayEquals(TWICE_PLUS_ONE, out.get(0).toFloatArray(), id);
      assertEquals(survivor, hostOf(id, List.of(survivor)), id + " was not started again on the survivor");
    }
    System.out.printf("sharded computations: every id served by the survivor %.1f s after the kill%n", (System.nanoTime() - killed) / 1e9);
  }

  private static long deadline(int seconds) {
    return System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
  }

  /**
   * Runs {@code id} until it answers: while the dead node is not yet removed, a run sent to it is lost and
   * times out; each attempt is bounded, and so is the whole wait.
   */
  private static List<HostTensor> untilServed(String id, long deadline) throws Exception {
    while (true) {
      try {
        return run(id, Duration.ofSeconds(8)).get(15, TimeUnit.SECONDS);
      } catch (ExecutionException e) {
        XlaException x = assertInstanceOf(XlaException.class, e.getCause());
        assertEquals(ErrorCode.DEADLINE_EXCEEDED, x.code(), x.getMessage());
        assertTrue(System.nanoTime() < deadline, "computation " + id + " still not served: " + x.getMessage());
      }
    }
  }
}
