package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.jobs.Program;
import dev.xlaactors.cluster.ShardedComputations.ComputationCatalog;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
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
 * Sharded computations on a cluster of one node (this JVM, role compute, the real CPU plugin): the
 * answers and errors a caller sees, without the cost of other JVMs. {@link ShardedComputationClusterTest}
 * runs them across JVMs.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ShardedComputationsTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(20);
  private static ActorSystem<Void> system;
  private static XlaClient client;
  private static CallbackRuntime callbacks;
  private static ShardedComputations computations;
  private static String self;

  @BeforeAll
  static void start() throws Exception {
    int port = TestNodes.freePort();
    system = XlaCluster.start(TestNodes.config(port, port, "compute"));
    client = XlaClient.create();
    callbacks = CallbackRuntime.create(system, client);
    computations = ShardedComputations.init(system, "compute", client, callbacks, ComputationCatalog.of(Map.of(
        "twice-plus-one", TestNodes.twicePlusOne(),
        "affine", TestNodes.affineComputation("A"),
        "broken", Program.ofText("broken", "this is not StableHLO"))));
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (Cluster.get(system).selfMember().status() != MemberStatus.up()) {
      assertTrue(System.nanoTime() < deadline, "the one-node cluster is not Up after 30 s");
      Thread.sleep(20);
    }
    self = XlaCluster.selfAddress(system);
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
  void runsReturnTheProgramsValues() throws Exception {
    List<HostTensor> out = get(computations.run("twice-plus-one", List.of(HostTensor.vector(1.5f, -2f, 0.25f, 3f)), TIMEOUT));
    assertArrayEquals(new float[] {4f, -3f, 1.5f, 7f}, out.get(0).toFloatArray(), 0f);
    // A program with a host callback runs through the node's CallbackRuntime.
    out = get(computations.run("affine", List.of(HostTensor.vector(1f, 2f, 3f)), TIMEOUT));
    assertArrayEquals(new float[] {4f, 7f, 10f}, out.get(0).toFloatArray(), 0f);
  }

  /** The example of docs/cluster.md, as written there (the graph is built here). */
  @Test
  void theReadmeExample() {
    GraphBuilder b = new GraphBuilder("twice_plus_one");
    Value x = b.parameter(TensorType.of(DType.F32, 4));
    Graph graph = b.build(b.add(b.multiply(x, b.constant(2f)), b.constant(1f)));

    ComputationCatalog catalog = ComputationCatalog.of(Map.of("twice-plus-one", Program.of(graph)));
    ShardedComputations computations = ShardedComputations.init(system, "compute", client, callbacks, catalog);
    List<HostTensor> out = computations
        .run("twice-plus-one", List.of(HostTensor.vector(1.5f, -2f, 0.25f, 3f)), Duration.ofSeconds(10))
        .toCompletableFuture().join();

    assertArrayEquals(new float[] {4f, -3f, 1.5f, 7f}, out.get(0).toFloatArray(), 0f);
  }

  @Test
  void anUnknownIdFailsNamingTheIdAndTheCatalogsIds() {
    XlaException here = assertInstanceOf(XlaException.class,
        failure(computations.run("twice-plus-two", List.of(), TIMEOUT)));
    assertEquals(ErrorCode.NOT_FOUND, here.code());
    assertEquals("no computation 'twice-plus-two' in the catalog of node " + self + "; its ids: [affine, broken,"
        + " twice-plus-one]", here.getMessage());

    // A node given no catalog sends the run; the entity's node refuses it with the same message.
    ShardedComputations noCatalog = ShardedComputations.init(system, "compute", null, null, null);
    XlaException there = assertInstanceOf(XlaException.class, failure(noCatalog.run("twice-plus-two", List.of(), TIMEOUT)));
    assertEquals(ErrorCode.NOT_FOUND, there.code());
    assertEquals(here.getMessage(), there.getMessage());
  }

  @Test
  void aRunThatFailsReportsItsErrorNamingTheComputationAndTheNode() {
    XlaException wrongShape = assertInstanceOf(InvalidArgumentException.class,
        failure(computations.run("twice-plus-one", List.of(HostTensor.vector(1f, 2f, 3f)), TIMEOUT)));
    assertTrue(wrongShape.getMessage().startsWith("a run of computation 'twice-plus-one' failed on node " + self + ": "),
        wrongShape.getMessage());
    assertTrue(wrongShape.getMessage().contains("f32[3]"), wrongShape.getMessage());

    XlaException broken = assertInstanceOf(XlaException.class, failure(computations.run("broken", List.of(), TIMEOUT)));
    assertTrue(broken.getMessage().contains("Program(broken) did not compile"), broken.getMessage());
    assertTrue(broken.getMessage().contains("on node " + self), broken.getMessage());
  }

  @Test
  void aRunWithNoAnswerWithinItsTimeoutFailsWithDeadlineExceeded() {
    // A first element below zero makes the callback sleep (TestNodes.affine).
    long start = System.nanoTime();
    XlaException slow = assertInstanceOf(XlaException.class,
        failure(computations.run("affine", List.of(HostTensor.vector(-1f, 0f, 0f)), Duration.ofMillis(500))));
    long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    assertEquals(ErrorCode.DEADLINE_EXCEEDED, slow.code());
    assertEquals("a run of computation 'affine' got no answer within 500 ms; it was accepted by node " + self, slow.getMessage());
    assertTrue(ms >= 500 && ms < 5_000, ms + " ms");

    assertInstanceOf(InvalidArgumentException.class,
        failure(computations.run("affine", List.of(HostTensor.vector(1f, 2f, 3f)), Duration.ZERO)));
  }
}
