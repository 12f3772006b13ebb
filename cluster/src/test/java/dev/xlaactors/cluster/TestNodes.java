package dev.xlaactors.cluster;

import com.typesafe.config.Config;
import java.time.Duration;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import dev.xlaactors.actors.jobs.Program;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.Value;

/** Configuration and callbacks shared by the parent test JVM and the child nodes of the cluster tests. */
final class TestNodes {
  /**
   * The end of a child node's main: waits until this node is Up (exit 2 after 60 s), prints {@code READY
   * <address>} for the parent, then lives until the parent closes its stdin (the parent died or stopped
   * it), and exits 0.
   */
  static void announceReadyAndLiveWhileTheParentDoes(ActorSystem<Void> system) throws Exception {
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (Cluster.get(system).selfMember().status() != MemberStatus.up()) {
      if (System.nanoTime() > deadline) {
        System.out.println("NOT UP after 60 s");
        System.exit(2);
      }
      Thread.sleep(50);
    }
    System.out.println("READY " + XlaCluster.selfAddress(system));
    System.out.flush();
    while (System.in.read() >= 0) {
      // the parent keeps the pipe open while it lives
    }
    System.exit(0);
  }

  private TestNodes() {}

  static final TensorType F32X3 = TensorType.of(DType.F32, 3);

  /**
   * y = 3x + 1. A first element below zero stands for a long call: the node prints {@code CALLED} and
   * sleeps a minute, so the test can kill it in the middle of the call. Every call that returns prints
   * {@code SERVED affine-remote <x> on <node>}, so a test can tell which calls ran.
   */
  static HostCallback affine(String node) {
    return new HostCallback("affine-remote", List.of(F32X3), null, (in, s) -> {
      float[] x = in.get(0).toFloatArray();
      if (x[0] < 0) {
        // The child's protocol to the test harness, not logging: the harness waits for this line.
        System.out.println("CALLED affine-remote on " + node);
        System.out.flush();
        try {
          Thread.sleep(60_000);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      float[] y = new float[x.length];
      for (int i = 0; i < x.length; i++) {
        y[i] = 3 * x[i] + 1;
      }
      System.out.println("SERVED affine-remote " + java.util.Arrays.toString(x) + " on " + node);
      System.out.flush();
      return List.of(HostTensor.ofFloats(y, y.length));
    });
  }

  /** Computation "twice-plus-one": {@code 2x + 1} over f32[4], in XLA. */
  static Program twicePlusOne() {
    GraphBuilder b = new GraphBuilder("twice_plus_one");
    Value x = b.parameter(F32X4);
    return Program.of(b.build(b.add(b.multiply(x, b.constant(2f)), b.constant(1f))));
  }

  /** Computation "affine": {@code 3x + 1} over f32[3] by the host callback {@link #affine} of {@code node}. */
  static Program affineComputation(String node) {
    GraphBuilder b = new GraphBuilder("affine_computation");
    Value x = b.parameter(F32X3);
    return Program.of(b.build(b.hostCall(affine(node), x).get(0)));
  }

  /** The catalog of the sharded computation tests; every node has the same ids. */
  static ShardedComputations.ComputationCatalog computations(String node) {
    return ShardedComputations.ComputationCatalog.of(Map.of(
        "twice-plus-one", twicePlusOne(),
        "affine", affineComputation(node)));
  }

  static final TensorType F32X4 = TensorType.of(DType.F32, 4);

  /** Item {@code i}'s input: {@code [i, i+1, i+2, i+3]}. */
  static HostTensor itemInput(long i) {
    return HostTensor.ofFloats(new float[] {i, i + 1, i + 2, i + 3}, 4);
  }

  /** Item {@code i}'s output, {@code 2x + 1} of its input. */
  static HostTensor itemOutput(long i) {
    return HostTensor.ofFloats(new float[] {2f * i + 1, 2f * i + 3, 2f * i + 5, 2f * i + 7}, 4);
  }

  /**
   * The batch job {@code id}: {@code 2x + 1} over {@code count} items, each input taking {@code
   * delayMs} to read (so the job runs long enough to be killed half way), written to {@code output}.
   */
  static ShardedBatchJobs.Definition scoresJob(String id, String node, Path output, long count, long delayMs) {
    Program step = twicePlusOne();
    java.util.concurrent.atomic.AtomicBoolean first = new java.util.concurrent.atomic.AtomicBoolean(true);
    return new ShardedBatchJobs.Definition(step, count, i -> {
      if (first.getAndSet(false)) {
        // The child's protocol to the test harness: which node runs the job, from which item.
        System.out.println("RUNNING " + id + " on " + node + " from item " + i);
        System.out.flush();
      }
      Thread.sleep(delayMs);
      return List.of(itemInput(i));
    }, output);
  }

  /**
   * The JDBC URL of an H2 job journal in {@code dir}, served over loopback by the first JVM that opens it
   * (the test JVM opens it first and holds it, so the database outlives the nodes it kills).
   */
  static String h2Journal(Path dir) {
    return JobJournalSettings.h2File(dir.resolve("journal"));
  }

  /** The user of the test journal at {@code url}: H2's "sa", or PostgreSQL's from the environment. */
  static String journalUser(String url) {
    return url.startsWith("jdbc:postgresql:") ? System.getenv().getOrDefault("XLA_ACTORS_TEST_POSTGRES_USER", "postgres") : "sa";
  }

  /** A free TCP port on the loopback interface, chosen now. */
  static int freePort() {
    try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * A node on loopback joining the seed at {@code seedPort}: quicker failure detection than Pekko's
   * default (a killed node is unreachable within about four seconds; a pause of 3 s is still tolerated,
   * as the machine running the tests may be busy) and the split brain resolver, so the survivors remove it.
   * The cluster's own clocks tick five times as often as Pekko's defaults (gossip, the leader's actions that
   * move a joining node Up and a downed one out, the reaper of unreachable nodes: 200 ms, not 1 s) and shards
   * of a downed node move after 1 s, not stable-after's 3 s (its JVM was killed and waited for; the margin
   * is for a partition whose other side may still run): each join and each removal waited up to about a
   * second per tick for nothing (a killed node was removed 10.3 s after the kill, now 7.6 s; the failure
   * detector and stable-after, the waits the tests prove, stay as they were). Sharding retries
   * what went unanswered every 500 ms, not 2 s, and a shard whose remembered entities did not load within
   * waiting-for-state-timeout (2 s; a fresh JVM's first read of the JDBC journal can take longer on a busy
   * machine) starts again after 1 s, not 10 s: that backoff alone was 10 s of several batch job tests.
   */
  static Config config(int seedPort, int port, String role) {
    return config(seedPort, port, role, "jdbc:h2:mem:unused");
  }

  /**
   * {@link #config(int, int, String, String)} for a node that runs batch jobs: its journal and snapshot store
   * start with the actor system, while the node joins and makes its XLA client, not when its first shard
   * starts. Their first start in a JVM (Slick, the connection pool, H2's first connection) took 1 to 3 s
   * there, on the way of every job a new node ran (the coordinator's remembered shards, then the shard's
   * entities, then the job's own recovery); the recovery itself is the same.
   */
  static Config jobNodeConfig(int seedPort, int port, String journalUrl) {
    return ConfigFactory.parseString("""
            pekko.extensions += "org.apache.pekko.persistence.Persistence"
            pekko.persistence.journal.auto-start-journals = ["jdbc-journal"]
            pekko.persistence.snapshot-store.auto-start-snapshot-stores = ["jdbc-snapshot-store"]
            """)
        .withFallback(config(seedPort, port, "compute", journalUrl));
  }

  /** {@link #config(int, int, String)} with batch jobs journaled at {@code journalUrl}. */
  static Config config(int seedPort, int port, String role, String journalUrl) {
    return ConfigFactory.parseString("""
            xla-actors.cluster {
              seed-nodes = ["127.0.0.1:%d"]
              hostname = "127.0.0.1"
              port = %d
              roles = [%s]
            }
            xla-actors.actors.callbacks.default-timeout = 20s
            xla-actors.actors.metrics.log = off
            pekko.actor.allow-java-serialization = off
            pekko.cluster.failure-detector {
              heartbeat-interval = 200ms
              acceptable-heartbeat-pause = 3s
            }
            pekko.cluster.downing-provider-class = "org.apache.pekko.cluster.sbr.SplitBrainResolverProvider"
            pekko.cluster.split-brain-resolver.stable-after = 3s
            pekko.cluster.down-removal-margin = 1s
            pekko.cluster.gossip-interval = 200ms
            pekko.cluster.leader-actions-interval = 200ms
            pekko.cluster.unreachable-nodes-reaper-interval = 200ms
            pekko.cluster.sharding.retry-interval = 500ms
            pekko.cluster.sharding.shard-failure-backoff = 1s
            pekko.cluster.jmx.enabled = off
            pekko.coordinated-shutdown.run-by-jvm-shutdown-hook = off
            xla-actors.cluster.jobs.journal.url = "%s"
            xla-actors.cluster.jobs.journal.user = "%s"
            xla-actors.cluster.jobs.snapshot-every = 25
            """.formatted(seedPort, port, role, journalUrl, journalUser(journalUrl)))
        .withFallback(ConfigFactory.load());
  }
}
