package dev.xlaactors.bench;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.jobs.Program;
import dev.xlaactors.cluster.ClusterCallbacks;
import dev.xlaactors.cluster.JobJournalSettings;
import dev.xlaactors.cluster.ShardedBatchJobs;
import dev.xlaactors.cluster.XlaCluster;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope;

/**
 * A callback served in this JVM against the same callback served by another JVM on loopback (a two-node
 * cluster): a program making K callbacks in sequence, run on the CPU plugin in this JVM. Prints {@code
 * CLUSTER} lines (per-callback median and p99 over the runs) that bench/run.sh tabulates, and the {@code
 * RESULT} line for f32[8], printed last. Then the items per second of batch jobs (ShardedBatchJobs,
 * journaled in H2) on a cluster of one compute node and of three ({@code CLUSTER_JOBS} lines). With the
 * argument {@code serve <seed-port>} it is the serving node, with {@code jobs <seed-port> <dir>} a compute
 * node of the jobs part.
 */
public final class ClusterBench {
  private static final int K = 16;
  private static final int WARMUP_RUNS = 50;
  private static final int RUNS = 200;

  private ClusterBench() {}

  private static HostCallback plusOne(String name, TensorType type) {
    return new HostCallback(name, List.of(type), null, (in, s) -> {
      float[] v = in.get(0).toFloatArray();
      for (int i = 0; i < v.length; i++) {
        v[i] += 1;
      }
      return List.of(HostTensor.ofFloats(v, type.shape().dims()));
    });
  }

  private static Config node(int seedPort, int port, String role) {
    return ConfigFactory.parseString("""
            xla-actors.cluster { seed-nodes = ["127.0.0.1:%d"], port = %d, roles = [%s] }
            xla-actors.actors.metrics.log = off
            pekko.loglevel = WARNING
            """.formatted(seedPort, port, role))
        .withFallback(ConfigFactory.load());
  }

  private static final List<TensorType> SIZES = List.of(TensorType.of(DType.F32, 8), TensorType.of(DType.F32, 16384));

  public static void main(String[] args) throws Exception {
    if (args.length == 2 && args[0].equals("serve")) {
      serve(Integer.parseInt(args[1]));
      return;
    }
    if (args.length == 3 && args[0].equals("jobs")) {
      jobNode(Integer.parseInt(args[1]), Path.of(args[2]));
      return;
    }
    String result = callbacks();
    double oneNode = jobs(1);
    double threeNodes = jobs(3);
    System.out.printf(Locale.ROOT, "CLUSTER_JOBS_RATIO three_over_one=%.3f%n", threeNodes / oneNode);
    System.out.println(result);
  }

  /** Callback round trips served here and by another JVM; returns the RESULT line. */
  private static String callbacks() throws Exception {
    int seedPort;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      seedPort = s.getLocalPort();
    }
    Process server = new ProcessBuilder(
            Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx512m",
            "-cp", System.getProperty("java.class.path"), ClusterBench.class.getName(), "serve", Integer.toString(seedPort))
        .redirectErrorStream(true)
        .start();
    Runtime.getRuntime().addShutdownHook(new Thread(server::destroyForcibly));
    ActorSystem<Void> system = XlaCluster.start(node(seedPort, seedPort, "compute"));
    try (XlaClient client = XlaClient.create(); CallbackRuntime runtime = CallbackRuntime.create(system, client)) {
      BufferedReader out = new BufferedReader(new InputStreamReader(server.getInputStream(), StandardCharsets.UTF_8));
      String line;
      while ((line = out.readLine()) != null && !line.startsWith("READY")) {
        System.err.println("[server] " + line);
      }
      if (line == null) {
        throw new IllegalStateException("the serving node exited before it was ready");
      }
      drain(out);
      ClusterCallbacks remote = ClusterCallbacks.create(system);
      double localF8 = 0;
      double remoteF8 = 0;
      for (TensorType type : SIZES) {
        String size = type.toString();
        HostCallback local = plusOne("local-" + type.shape().elementCount(), type);
        runtime.register(local).toCompletableFuture().get(10, TimeUnit.SECONDS);
        HostCallback served = plusOne("remote-" + type.shape().elementCount(), type);
        remote.callRemotely(runtime, served.name(), served.outputTemplate()).toCompletableFuture().get(10, TimeUnit.SECONDS);
        remote.awaitServers(served.name(), 1).toCompletableFuture().get(60, TimeUnit.SECONDS);
        double l = measure(runtime, client, local, type, "local", size);
        double r = measure(runtime, client, served, type, "remote", size);
        if (type.shape().elementCount() == 8) {
          localF8 = l;
          remoteF8 = r;
        }
      }
      return String.format(Locale.ROOT, "RESULT cluster local_us=%.3f remote_us=%.3f ratio=%.3f", localF8, remoteF8, remoteF8 / localF8);
    } finally {
      // The serving node leaves first (its stdin closes, it exits through Pekko's coordinated shutdown),
      // so neither node sees the other vanish.
      server.getOutputStream().close();
      if (!server.waitFor(20, TimeUnit.SECONDS)) {
        server.destroyForcibly();
      }
      system.terminate();
      system.getWhenTerminated().toCompletableFuture().get(20, TimeUnit.SECONDS);
    }
  }

  /** Median per-callback time of a K-callback program, in microseconds; prints a CLUSTER line. */
  private static double measure(
      CallbackRuntime runtime, XlaClient client, HostCallback callback, TensorType type, String where, String size) {
    GraphBuilder b = new GraphBuilder("k_" + callback.name().replace('-', '_'));
    Value x = b.parameter(type);
    for (int i = 0; i < K; i++) {
      x = b.hostCall(callback, x).get(0);
    }
    Graph graph = b.build(x);
    HostTensor input = HostTensor.zeros(type);
    double[] perCallUs = new double[RUNS];
    List<Argument> inputs = Argument.of(List.of(input));
    try (Executable exe = graph.compile(client); Model model = Model.of(exe)) {
      for (int i = 0; i < WARMUP_RUNS; i++) {
        check(runtime.run(model, inputs));
      }
      for (int i = 0; i < RUNS; i++) {
        long t0 = System.nanoTime();
        List<HostTensor> out = runtime.run(model, inputs);
        perCallUs[i] = (System.nanoTime() - t0) / 1e3 / K;
        check(out);
      }
    }
    Arrays.sort(perCallUs);
    double median = perCallUs[RUNS / 2];
    double p99 = perCallUs[(int) Math.ceil(RUNS * 0.99) - 1];
    System.out.printf(Locale.ROOT, "CLUSTER where=%s size=%s k=%d runs=%d median_us=%.3f p99_us=%.3f%n",
        where, size, K, RUNS, median, p99);
    return median;
  }

  // ---------------------------------------------------------------------------------------------
  // Batch jobs: items per second on one node and on three

  private static final int JOBS = 6;
  private static final int ITEMS = 200;
  private static final TensorType ITEM = TensorType.of(DType.F32, 64);

  /** Every node's catalog: job-0 .. job-5, each 2x + 1 over ITEMS items of f32[64], output files in {@code dir}. */
  private static ShardedBatchJobs.JobCatalog catalog(Path dir) {
    GraphBuilder b = new GraphBuilder("twice_plus_one");
    Value x = b.parameter(ITEM);
    Program step = Program.of(b.build(b.add(b.multiply(x, b.constant(2f)), b.constant(1f))));
    return id -> id.startsWith("job-")
        ? Optional.of(new ShardedBatchJobs.Definition(step, ITEMS, i -> List.of(HostTensor.zeros(ITEM)), dir.resolve(id + ".tsv")))
        : Optional.empty();
  }

  private static Config jobNodeConfig(int seedPort, int port, Path dir) {
    return ConfigFactory.parseString("""
            xla-actors.cluster {
              seed-nodes = ["127.0.0.1:%d"], port = %d, roles = [compute]
              jobs.journal.url = "%s"
            }
            xla-actors.actors.metrics.log = off
            pekko.loglevel = WARNING
            """.formatted(seedPort, port, JobJournalSettings.h2File(dir.resolve("journal"))))
        .withFallback(ConfigFactory.load());
  }

  /**
   * Items per second of JOBS jobs of ITEMS items each, started together on a cluster of {@code nodes}
   * compute nodes (this JVM and nodes-1 child JVMs) with a fresh H2 journal: from the first Ensure to the
   * last output file. Prints a CLUSTER_JOBS line.
   */
  private static double jobs(int nodes) throws Exception {
    Path dir = Files.createTempDirectory("xla-bench-jobs");
    System.setProperty("h2.bindAddress", "127.0.0.1");
    int seedPort;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      seedPort = s.getLocalPort();
    }
    ActorSystem<Void> system = XlaCluster.start(jobNodeConfig(seedPort, seedPort, dir));
    List<Process> children = new ArrayList<>();
    try (XlaClient client = XlaClient.create()) {
      var region = ShardedBatchJobs.init(system, "compute", client, catalog(dir));
      for (int n = 1; n < nodes; n++) {
        Process child = new ProcessBuilder(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx512m", "-Dh2.bindAddress=127.0.0.1",
                "-cp", System.getProperty("java.class.path"), ClusterBench.class.getName(), "jobs",
                Integer.toString(seedPort), dir.toString())
            .redirectErrorStream(true)
            .start();
        Runtime.getRuntime().addShutdownHook(new Thread(child::destroyForcibly));
        children.add(child);
        drain(new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8)));
      }
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
      while (XlaCluster.membersUp(system) < nodes) {
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException("only " + XlaCluster.membersUp(system) + " of " + nodes + " nodes up after 90 s");
        }
        Thread.sleep(50);
      }
      Thread.sleep(3000); // every node's shard region registered, so the jobs spread over all of them
      long t0 = System.nanoTime();
      for (int j = 0; j < JOBS; j++) {
        region.tell(new ShardingEnvelope<>("job-" + j, new ShardedBatchJobs.Ensure()));
      }
      for (int j = 0; j < JOBS; j++) {
        while (!Files.exists(dir.resolve("job-" + j + ".tsv"))) {
          if (System.nanoTime() > t0 + TimeUnit.SECONDS.toNanos(300)) {
            throw new IllegalStateException("job-" + j + " did not finish within 300 s on " + nodes + " node(s)");
          }
          Thread.sleep(5);
        }
      }
      double seconds = (System.nanoTime() - t0) / 1e9;
      double perSecond = JOBS * ITEMS / seconds;
      System.out.printf(Locale.ROOT, "CLUSTER_JOBS nodes=%d jobs=%d items=%d seconds=%.3f items_per_s=%.1f%n",
          nodes, JOBS, JOBS * ITEMS, seconds, perSecond);
      return perSecond;
    } finally {
      for (Process child : children) {
        child.getOutputStream().close();
      }
      for (Process child : children) {
        if (!child.waitFor(20, TimeUnit.SECONDS)) {
          child.destroyForcibly();
        }
      }
      system.terminate();
      system.getWhenTerminated().toCompletableFuture().get(20, TimeUnit.SECONDS);
    }
  }


  /** A compute node of the jobs measurement: runs the jobs sharding places here; exits when stdin closes. */
  private static void jobNode(int seedPort, Path dir) throws Exception {
    ActorSystem<Void> system = XlaCluster.start(jobNodeConfig(seedPort, 0, dir));
    XlaClient client = XlaClient.create();
    ShardedBatchJobs.init(system, "compute", client, catalog(dir));
    while (System.in.read() >= 0) {
      // exits when the measuring JVM closes the pipe (or dies)
    }
    System.exit(0);
  }

  /** Keeps reading the serving node's output (to stderr), so a full pipe never blocks it. */
  private static void drain(BufferedReader out) {
    Thread drain = new Thread(() -> out.lines().forEach(l -> System.err.println("[server] " + l)), "server-output");
    drain.setDaemon(true);
    drain.start();
  }

  private static void check(List<HostTensor> out) {
    float[] v = out.get(0).toFloatArray();
    if (v[0] != K || v[v.length - 1] != K) {
      throw new IllegalStateException("expected " + K + " everywhere, got " + v[0] + " .. " + v[v.length - 1]);
    }
  }

  private static void serve(int seedPort) throws Exception {
    ActorSystem<Void> system = XlaCluster.start(node(seedPort, 0, "callbacks"));
    ClusterCallbacks callbacks = ClusterCallbacks.create(system);
    List<String> names = new ArrayList<>();
    for (TensorType type : SIZES) {
      HostCallback served = plusOne("remote-" + type.shape().elementCount(), type);
      callbacks.serve(served);
      names.add(served.name());
    }
    System.out.println("READY serving " + names + " at " + XlaCluster.selfAddress(system));
    System.out.flush();
    while (System.in.read() >= 0) {
      // exits when the measuring JVM closes the pipe (or dies)
    }
    System.exit(0);
  }
}
