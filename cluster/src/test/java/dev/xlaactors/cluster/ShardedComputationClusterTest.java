package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.cluster.ShardedComputations.Accepted;
import dev.xlaactors.cluster.ShardedComputations.Outputs;
import dev.xlaactors.cluster.ShardedComputations.Reply;
import dev.xlaactors.cluster.ShardedComputations.Run;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.HostTensor;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.ClusterEvent;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Subscribe;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Sharded computations across real JVMs on loopback: this test JVM is node A (the seed, role front: it
 * only requests runs, with no XLA client), and three child JVMs B, C, D (role compute, each with its own
 * XLA client) hold the entities of {@link TestNodes#computations}. Every value is checked against what
 * the program computes ({@code 2x + 1}, {@code 3x + 1}), worked out here in Java.
 *
 * <p>A run requested here is served by the node holding the computation; killing that node in the middle
 * of a run fails the run with UNAVAILABLE naming it, and the run tried again at once is served by a
 * survivor once the dead node is removed; killing it between runs, a run sent right after the kill waits
 * until a survivor serves it, or fails with DEADLINE_EXCEEDED (accepted by nobody) if its timeout is
 * shorter than the time the cluster takes to remove the node.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ShardedComputationClusterTest {
  private static final Pattern READY = Pattern.compile("READY (\\S+)");
  private static final Duration TIMEOUT = Duration.ofSeconds(20);

  @TempDir static Path dir;
  private static ChildJvms children;
  private static ActorSystem<Void> system;
  private static ShardedComputations computations;
  private static final Map<String, ChildJvms.Child> byAddress = new TreeMap<>();
  private static final Map<String, Long> removedAt = new ConcurrentHashMap<>();

  @BeforeAll
  static void startCluster() throws Exception {
    children = new ChildJvms(dir);
    int seedPort = TestNodes.freePort();
    List<ChildJvms.Child> started = List.of(
        children.start("compute-b", ComputationNodeMain.class, "compute-b", Integer.toString(seedPort)),
        children.start("compute-c", ComputationNodeMain.class, "compute-c", Integer.toString(seedPort)),
        children.start("compute-d", ComputationNodeMain.class, "compute-d", Integer.toString(seedPort)));
    system = XlaCluster.start(TestNodes.config(seedPort, seedPort, "front"));
    // A front node: no XLA client, but the catalog, so unknown ids fail here without a round trip.
    computations = ShardedComputations.init(system, "compute", null, null, TestNodes.computations("A: never runs here"));
    Cluster.get(system).subscriptions().tell(Subscribe.create(
        system.systemActorOf(removals(), "removals", Props.empty()), ClusterEvent.MemberRemoved.class));
    for (ChildJvms.Child c : started) {
      byAddress.put(c.await(READY, Duration.ofSeconds(60)), c);
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (upMembers().size() < 4) {
      assertTrue(System.nanoTime() < deadline, () -> "members Up after 30 s: " + upMembers());
      Thread.sleep(50);
    }
  }

  @AfterAll
  static void stopCluster() throws Exception {
    children.closeAfter(system);
  }

  @Test
  @Order(1)
  void aRunRequestedHereIsServedByTheComputeNodeHoldingTheComputation() throws Exception {
    float[] x = {1.5f, -2f, 0.25f, 3f};
    List<HostTensor> out = run("twice-plus-one", x);
    assertArrayEquals(twicePlusOne(x), out.get(0).toFloatArray(), 0f);

    // The same run by hand, to see who accepts it: a compute node, never this one.
    String node = holder("twice-plus-one", new float[] {10f, 20f, 30f, 40f});
    assertTrue(byAddress.containsKey(node), () -> node + " is not one of the compute nodes " + byAddress.keySet());
    assertNotEquals(XlaCluster.selfAddress(system), node);
    // Every run of an id goes to the same entity while its node lives.
    for (int i = 0; i < 3; i++) {
      assertEquals(node, holder("twice-plus-one", new float[] {i, i, i, i}));
    }
    System.err.printf("sharded computation test: twice-plus-one is held by %s%n", byAddress.get(node).name());
  }

  @Test
  @Order(2)
  void anUnknownIdFailsNamingTheIdAndTheCatalogsIds() {
    XlaException here = failure(computations.run("twice-plus-two", List.of(), TIMEOUT));
    assertEquals(ErrorCode.NOT_FOUND, here.code());
    assertEquals("no computation 'twice-plus-two' in the catalog of node " + XlaCluster.selfAddress(system)
        + "; its ids: [affine, twice-plus-one]", here.getMessage());

    // A node without the catalog sends it anyway; a compute node refuses it, naming itself.
    ShardedComputations noCatalog = ShardedComputations.init(system, "compute", null, null, null);
    XlaException there = failure(noCatalog.run("twice-plus-two", List.of(), TIMEOUT));
    assertEquals(ErrorCode.NOT_FOUND, there.code());
    Matcher m = Pattern.compile("no computation 'twice-plus-two' in the catalog of node (\\S+); its ids: \\[affine, twice-plus-one]")
        .matcher(there.getMessage());
    assertTrue(m.matches(), there.getMessage());
    assertTrue(byAddress.containsKey(m.group(1)), there.getMessage());
  }

  @Test
  @Order(3)
  void killingTheNodeInTheMiddleOfARunFailsItWithUnavailableAndTheNextRunIsServedByASurvivor() throws Exception {
    // A first element below zero makes the host callback of "affine" sleep a minute on its node.
    CompletableFuture<List<HostTensor>> slow =
        computations.run("affine", List.of(HostTensor.vector(-1f, 0f, 2f)), TIMEOUT).toCompletableFuture();
    ChildJvms.Child running = awaitCalled();
    String runningAddress = addressOf(running);
    boolean coordinatorKilled = runningAddress.equals(oldestComputeNode());
    long killedAt = System.nanoTime();
    ChildJvms.kill(running);

    XlaException e = failure(slow);
    long failedAfterMs = msSince(killedAt);
    assertEquals(ErrorCode.UNAVAILABLE, e.code(), e.getMessage());
    assertTrue(e.getMessage().startsWith("computation 'affine': node " + runningAddress + " running it became unreachable"),
        e.getMessage());
    // Promptly: the failure detector's few seconds, far below the run's 20 s timeout.
    assertTrue(failedAfterMs < 10_000, "failed " + failedAfterMs + " ms after the kill");

    // Tried again at once, while the dead node is still a member: the run waits (sent again every
    // second) until sharding has moved the computation, then a survivor serves it.
    float[] x = {1f, 2f, 3f};
    assertArrayEquals(affine(x), run("affine", x).get(0).toFloatArray(), 0f);
    long servedAfterMs = msSince(killedAt);
    long removedAfterMs = awaitRemoved(runningAddress, killedAt);
    String survivor = holder("affine", new float[] {4f, 5f, 6f});
    assertNotEquals(runningAddress, survivor);
    assertTrue(byAddress.containsKey(survivor), survivor);
    System.err.printf("sharded computation test: a run failed %d ms after %s (%s) was killed in the middle of it (%s);"
        + " the run tried again at once was served by %s %d ms after the kill; the node was removed %d ms after the kill%n",
        failedAfterMs, running.name(), coordinatorKilled ? "the sharding coordinator's node" : "not the coordinator's node",
        e.getMessage(), byAddress.get(survivor).name(), servedAfterMs, removedAfterMs);
    byAddress.remove(runningAddress);
  }

  @Test
  @Order(4)
  void killingTheNodeBetweenRunsDelaysTheNextRunUntilASurvivorServesIt() throws Exception {
    float[] x = {0.5f, 1f, -1f, 8f};
    String holding = holder("twice-plus-one", x);
    ChildJvms.Child holder = byAddress.get(holding);
    boolean coordinatorKilled = holding.equals(oldestComputeNode());
    long killedAt = System.nanoTime();
    ChildJvms.kill(holder);

    // Both sent at once, before anyone knows the node is dead: one with a timeout shorter than the time
    // the cluster takes to remove the node, one with a longer one.
    CompletableFuture<List<HostTensor>> shortRun =
        computations.run("twice-plus-one", List.of(HostTensor.vector(x)), Duration.ofSeconds(2)).toCompletableFuture();
    CompletableFuture<List<HostTensor>> longRun =
        computations.run("twice-plus-one", List.of(HostTensor.vector(x)), TIMEOUT).toCompletableFuture();

    XlaException lost = failure(shortRun);
    assertEquals(ErrorCode.DEADLINE_EXCEEDED, lost.code(), lost.getMessage());
    assertTrue(lost.getMessage().startsWith("a run of computation 'twice-plus-one' got no answer within 2 s; no node accepted it"),
        lost.getMessage());
    assertArrayEquals(twicePlusOne(x), longRun.get(30, TimeUnit.SECONDS).get(0).toFloatArray(), 0f);
    long servedAfterMs = msSince(killedAt);

    long removedAfterMs = awaitRemoved(holding, killedAt);
    String survivor = holder("twice-plus-one", new float[] {3f, 2f, 1f, 0f});
    assertNotEquals(holding, survivor);
    assertTrue(byAddress.containsKey(survivor), survivor);
    System.err.printf("sharded computation test: %s (%s) killed between runs; a run sent right after the kill was served"
        + " by %s %d ms after the kill (the node was removed %d ms after it); the one with a 2 s timeout failed: %s%n",
        holder.name(), coordinatorKilled ? "the sharding coordinator's node" : "not the coordinator's node",
        byAddress.get(survivor).name(), servedAfterMs, removedAfterMs, lost.getMessage());
    byAddress.remove(holding);
  }

  private static long msSince(long nanos) {
    return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - nanos);
  }

  private static float[] twicePlusOne(float[] x) {
    float[] y = new float[x.length];
    for (int i = 0; i < x.length; i++) {
      y[i] = 2 * x[i] + 1;
    }
    return y;
  }

  private static float[] affine(float[] x) {
    float[] y = new float[x.length];
    for (int i = 0; i < x.length; i++) {
      y[i] = 3 * x[i] + 1;
    }
    return y;
  }

  private static List<HostTensor> run(String id, float[] x) throws Exception {
    return computations.run(id, List.of(HostTensor.vector(x)), TIMEOUT).toCompletableFuture().get(30, TimeUnit.SECONDS);
  }

  private static XlaException failure(java.util.concurrent.CompletionStage<List<HostTensor>> run) {
    ExecutionException e = assertThrows(ExecutionException.class, () -> run.toCompletableFuture().get(30, TimeUnit.SECONDS));
    return assertInstanceOf(XlaException.class, e.getCause(), () -> String.valueOf(e.getCause()));
  }

  /**
   * Sends a run of {@code id} through this node's region by hand and returns the address of the node that
   * accepted it, after checking its outputs against {@code id}'s function. Like {@link
   * ComputationRequester}, it sends the run again while no node accepts it.
   */
  private static String holder(String id, float[] x) {
    TestProbe<Reply> probe = TestProbe.create(system);
    Run run = new Run(7, List.of(HostTensor.vector(x)), probe.getRef());
    long deadline = System.nanoTime() + TIMEOUT.toNanos();
    String node = null;
    computations.region().tell(new ShardingEnvelope<>(id, run));
    while (System.nanoTime() < deadline) {
      Reply reply;
      try {
        reply = probe.receiveMessage(ComputationRequester.RESEND_INTERVAL);
      } catch (AssertionError nothingYet) {
        if (node == null) {
          computations.region().tell(new ShardingEnvelope<>(id, run));
        }
        continue;
      }
      if (reply instanceof Accepted a) {
        node = a.node();
      } else if (reply instanceof Outputs outputs) {
        assertEquals(7, outputs.requestId());
        assertArrayEquals(id.equals("affine") ? affine(x) : twicePlusOne(x), outputs.outputs().get(0).toFloatArray(), 0f);
        assertTrue(node != null, "outputs before Accepted");
        return node;
      } else {
        throw new AssertionError("unexpected reply " + reply);
      }
    }
    throw new AssertionError("no outputs for " + id + " within " + TIMEOUT);
  }

  private static ChildJvms.Child awaitCalled() throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (System.nanoTime() < deadline) {
      for (ChildJvms.Child c : byAddress.values()) {
        if (c.output().contains("CALLED affine-remote")) {
          return c;
        }
      }
      Thread.sleep(20);
    }
    throw new AssertionError("no compute node printed CALLED within 20 s");
  }

  private static String addressOf(ChildJvms.Child child) {
    return byAddress.entrySet().stream().filter(e -> e.getValue() == child).findFirst().orElseThrow().getKey();
  }

  /** Waits until this node saw {@code address} removed; the milliseconds from {@code killedAt} to then. */
  private static long awaitRemoved(String address, long killedAt) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!removedAt.containsKey(address)) {
      assertTrue(System.nanoTime() < deadline, () -> "the killed node is still a member: " + memberAddresses());
      Thread.sleep(50);
    }
    return TimeUnit.NANOSECONDS.toMillis(removedAt.get(address) - killedAt);
  }

  /** Notes when this node sees each member removed. */
  private static Behavior<ClusterEvent.MemberRemoved> removals() {
    return Behaviors.receiveMessage(removed -> {
      removedAt.put(removed.member().address().toString(), System.nanoTime());
      return Behaviors.same();
    });
  }

  /** The oldest Up node of role compute: where sharding's coordinator (a cluster singleton) runs. */
  private static String oldestComputeNode() {
    Member oldest = null;
    for (Member m : Cluster.get(system).state().getMembers()) {
      if (m.status() == MemberStatus.up() && m.hasRole("compute") && (oldest == null || m.isOlderThan(oldest))) {
        oldest = m;
      }
    }
    return oldest == null ? "none" : oldest.address().toString();
  }

  private static Set<String> memberAddresses() {
    Set<String> all = new TreeSet<>();
    Cluster.get(system).state().getMembers().forEach(m -> all.add(m.address().toString()));
    return all;
  }

  private static Set<String> upMembers() {
    Set<String> up = new TreeSet<>();
    for (Member m : Cluster.get(system).state().getMembers()) {
      if (m.status() == MemberStatus.up()) {
        up.add(m.address().toString());
      }
    }
    return up;
  }
}
