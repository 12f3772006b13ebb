package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.cluster.ShardedComputations.Accepted;
import dev.xlaactors.cluster.ShardedComputations.Outputs;
import dev.xlaactors.cluster.ShardedComputations.Reply;
import dev.xlaactors.cluster.ShardedComputations.Run;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.model.SafeTensors;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.serialization.SerializationExtension;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A model served across real JVMs on loopback: this JVM is the seed (role front, no XLA client); two
 * child JVMs (role compute) each have model "dense" (y = x . w + b, w 1 MiB) in their catalog, loaded
 * from a safetensors file on the node the first time an entity of it starts there. Runs carry only x:
 * checked on the wire (the serialized request) and on the serving node (its upload counters), and the
 * values against y worked out here in Java.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ShardedBoundModelClusterTest {
  private static final Pattern READY = Pattern.compile("READY (\\S+)");
  private static final Duration TIMEOUT = Duration.ofSeconds(30);
  private static final int D = BoundModelNodeMain.D;

  @TempDir static Path dir;
  private static ChildJvms children;
  private static ActorSystem<Void> system;
  private static ShardedComputations computations;
  private static final Map<String, ChildJvms.Child> byAddress = new TreeMap<>();
  private static float[] w;
  private static float[] b;

  @BeforeAll
  static void startCluster() throws Exception {
    w = random(D * D, 1);
    b = random(D, 2);
    Path weights = dir.resolve("dense.safetensors");
    SafeTensors.write(weights, Map.of("w", HostTensor.ofFloats(w, D, D), "b", HostTensor.ofFloats(b, 1, D)), Map.of());
    children = new ChildJvms(dir);
    int seedPort = TestNodes.freePort();
    List<ChildJvms.Child> started = List.of(
        children.start("model-b", BoundModelNodeMain.class, "model-b", Integer.toString(seedPort), weights.toString()),
        children.start("model-c", BoundModelNodeMain.class, "model-c", Integer.toString(seedPort), weights.toString()));
    system = XlaCluster.start(TestNodes.config(seedPort, seedPort, "front"));
    // The front node knows the names (to refuse unknown ones here) but never loads a model: no entity lives here.
    computations = ShardedComputations.init(system, "compute", null, null, BoundModelNodeMain.catalog(null, weights, "front"));
    for (ChildJvms.Child c : started) {
      byAddress.put(c.await(READY, Duration.ofSeconds(60)), c);
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (java.util.stream.StreamSupport.stream(Cluster.get(system).state().getMembers().spliterator(), false)
        .filter(m -> m.status() == MemberStatus.up()).count() < 3) {
      assertTrue(System.nanoTime() < deadline, "members Up after 30 s");
      Thread.sleep(50);
    }
  }

  @AfterAll
  static void stopCluster() throws Exception {
    children.closeAfter(system);
  }

  static float[] random(int n, long seed) {
    Random r = new Random(seed);
    float[] v = new float[n];
    for (int i = 0; i < n; i++) {
      v[i] = r.nextFloat() * 2 - 1;
    }
    return v;
  }

  static float[] dense(float[] x) {
    float[] y = b.clone();
    for (int k = 0; k < D; k++) {
      for (int j = 0; j < D; j++) {
        y[j] += x[k] * w[k * D + j];
      }
    }
    return y;
  }

  @Test
  void aModelBoundOnEachNodeServesRunsThatCarryOnlyTheirInputs() throws Exception {
    // Who holds "dense": the node that accepts a run of it.
    float[] x0 = random(D, 10);
    String holding = holder("dense", x0);
    ChildJvms.Child holder = byAddress.get(holding);
    assertTrue(holder != null, holding + " is not a compute node " + byAddress.keySet());
    long[] before = stats(holder);

    int runs = 10;
    for (int i = 0; i < runs; i++) {
      float[] x = random(D, 20 + i);
      List<HostTensor> y = computations.run("dense", List.of(HostTensor.ofFloats(x, 1, D)), TIMEOUT)
          .toCompletableFuture().get(60, TimeUnit.SECONDS);
      assertArrayEquals(dense(x), y.get(0).toFloatArray(), 1e-3f);
    }
    long[] after = stats(holder);
    // On the serving node: one upload of x (2 KiB) per run; w (1 MiB) and b stay where they were bound.
    assertEquals(runs, after[0] - before[0], "uploads on " + holder.name());
    assertEquals(runs * 4L * D, after[1] - before[1], "bytes uploaded on " + holder.name());
    // Loaded once on the holder (at its first run), never on the other node.
    assertEquals(1, count(holder.output(), "LOADED dense on"), holder.output());
    for (ChildJvms.Child c : byAddress.values()) {
      if (c != holder) {
        assertEquals(0, count(c.output(), "LOADED dense on"), c.output());
      }
    }
    // On the wire: a request is x and a few bytes of envelope, with the serializer Artery uses.
    TestProbe<Reply> probe = TestProbe.create(system);
    byte[] request = SerializationExtension.get(Adapter.toClassic(system))
        .serialize(new Run(1, List.of(HostTensor.ofFloats(x0, 1, D)), probe.getRef())).get();
    assertTrue(request.length < 4 * D + 512, "a request of " + request.length + " bytes for an x of " + 4 * D + " bytes");
    System.err.printf("bound model cluster test: 'dense' held by %s, %d runs uploaded %d bytes there (weights %d bytes, "
        + "loaded once); a request is %d bytes on the wire%n", holder.name(), runs, after[1] - before[1],
        4L * D * D + 4L * D, request.length);
  }

  @Test
  void aSegmentedModelBoundOnEachNodeServesRunsWithItsCallbackThere() throws Exception {
    float[] x0 = random(D, 40);
    String holding = holder("dense-relu", x0);
    ChildJvms.Child holder = byAddress.get(holding);
    assertTrue(holder != null, holding + " is not a compute node " + byAddress.keySet());
    long[] before = stats(holder);
    int runs = 5;
    for (int i = 0; i < runs; i++) {
      float[] x = random(D, 50 + i);
      List<HostTensor> y = computations.run("dense-relu", List.of(HostTensor.ofFloats(x, 1, D)), TIMEOUT)
          .toCompletableFuture().get(60, TimeUnit.SECONDS);
      assertArrayEquals(relu(dense(x)), y.get(0).toFloatArray(), 1e-3f);
    }
    long[] after = stats(holder);
    // x up, the stage's output down to the callback, relu's result is the output: w and b never move.
    assertEquals(runs, after[0] - before[0], "uploads on " + holder.name());
    assertEquals(runs * 4L * D, after[1] - before[1], "bytes uploaded on " + holder.name());
    assertEquals(1, count(holder.output(), "LOADED dense-relu"), holder.output());
  }

  static float[] relu(float[] v) {
    float[] r = v.clone();
    for (int i = 0; i < r.length; i++) {
      r[i] = Math.max(0, r[i]);
    }
    return r;
  }

  @Test
  void unknownModelsBrokenModelsAndWrongInputsAreClearErrors() {
    XlaException unknown = failure(computations.run("dens", List.of(HostTensor.ofFloats(new float[D], 1, D)), TIMEOUT));
    assertEquals(ErrorCode.NOT_FOUND, unknown.code());
    assertEquals("no computation 'dens' in the catalog of node " + XlaCluster.selfAddress(system)
        + "; its ids: [broken, dense, dense-relu, twice-plus-one]", unknown.getMessage());

    // A node without a catalog sends it anyway: the compute node holding the id refuses it, naming itself.
    ShardedComputations noCatalog = ShardedComputations.init(system, "compute", null, null, null);
    XlaException there = failure(noCatalog.run("dens", List.of(), TIMEOUT));
    assertEquals(ErrorCode.NOT_FOUND, there.code());
    Matcher m = Pattern.compile("no computation 'dens' in the catalog of node (\\S+); its ids: \\[broken, dense, dense-relu, twice-plus-one]")
        .matcher(there.getMessage());
    assertTrue(m.matches() && byAddress.containsKey(m.group(1)), there.getMessage());

    // A model whose weights file is missing on the node: the run fails naming the model, the node, the file.
    XlaException broken = failure(computations.run("broken", List.of(HostTensor.ofFloats(new float[D], 1, D)), TIMEOUT));
    assertEquals(ErrorCode.FAILED_PRECONDITION, broken.code(), broken.getMessage());
    assertTrue(broken.getMessage().contains("model 'broken' could not be loaded on node")
        && broken.getMessage().contains("missing.safetensors"), broken.getMessage());
    // The entity passivated: the next run tries to load it again, and fails the same way.
    XlaException again = failure(computations.run("broken", List.of(HostTensor.ofFloats(new float[D], 1, D)), TIMEOUT));
    assertEquals(broken.getMessage(), again.getMessage());
    int attempts = 0;
    for (ChildJvms.Child c : byAddress.values()) {
      attempts += count(c.output(), "LOADING missing.safetensors");
    }
    assertEquals(2, attempts, "one load attempt per run: a failed load is not kept");

    // An input of the wrong shape: refused by the model on its node, naming the input.
    XlaException shape = failure(computations.run("dense", List.of(HostTensor.ofFloats(new float[D / 2], 1, D / 2)), TIMEOUT));
    assertEquals(ErrorCode.INVALID_ARGUMENT, shape.code(), shape.getMessage());
    assertTrue(shape.getMessage().contains("input 0 'x'") && shape.getMessage().contains("expected f32[1,512]"),
        shape.getMessage());
  }

  /** The node that accepts a run of {@code id} (checking the outputs it returns). */
  private static String holder(String id, float[] x) {
    TestProbe<Reply> probe = TestProbe.create(system);
    Run run = new Run(7, List.of(HostTensor.ofFloats(x, 1, D)), probe.getRef());
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
        float[] want = id.equals("dense-relu") ? relu(dense(x)) : dense(x);
        assertArrayEquals(want, outputs.outputs().get(0).toFloatArray(), 1e-3f);
        assertTrue(node != null, "outputs before Accepted");
        return node;
      } else {
        throw new AssertionError("unexpected reply " + reply);
      }
    }
    throw new AssertionError("no outputs for " + id + " within " + TIMEOUT);
  }

  /** The child's upload counters now: {uploads, bytes}. */
  private static long[] stats(ChildJvms.Child child) throws Exception {
    int seen = count(child.output(), "STATS ");
    child.process().getOutputStream().write("STATS\n".getBytes(StandardCharsets.UTF_8));
    child.process().getOutputStream().flush();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (count(child.output(), "STATS ") <= seen) {
      assertTrue(System.nanoTime() < deadline, "no STATS from " + child.name());
      Thread.sleep(20);
    }
    Matcher m = Pattern.compile("STATS (\\d+) (\\d+)").matcher(child.output());
    long[] last = null;
    while (m.find()) {
      last = new long[] {Long.parseLong(m.group(1)), Long.parseLong(m.group(2))};
    }
    return last;
  }

  private static int count(String text, String what) {
    int n = 0;
    for (int i = text.indexOf(what); i >= 0; i = text.indexOf(what, i + 1)) {
      n++;
    }
    return n;
  }

  private static XlaException failure(java.util.concurrent.CompletionStage<List<HostTensor>> run) {
    ExecutionException e = assertThrows(ExecutionException.class, () -> run.toCompletableFuture().get(60, TimeUnit.SECONDS));
    assertTrue(e.getCause() instanceof XlaException, () -> "not an XlaException: " + e.getCause());
    return (XlaException) e.getCause();
  }
}
