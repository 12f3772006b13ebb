package dev.xlaactors.examples;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.actors.jobs.BatchScoring;
import dev.xlaactors.actors.jobs.Program;
import dev.xlaactors.actors.jobs.ResultJournal;
import dev.xlaactors.cluster.JobJournalSettings;
import dev.xlaactors.cluster.ShardedBatchJobs;
import dev.xlaactors.cluster.XlaCluster;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope;

/**
 * Three nodes of a Pekko cluster on this machine: this JVM (the seed, role {@code front}) and two JVMs it
 * starts (role {@code compute}, each with its own XLA CPU client). Three batch jobs are started from the
 * front node and spread over the compute nodes by Cluster Sharding; each records every finished item in
 * the job journal (an H2 file in a fresh temporary folder). Half way, the compute node running the most
 * jobs is killed (SIGKILL): its jobs move to the other node, which resumes each at its first unrecorded
 * item. At the end every output file is checked: every item once, with the right values.
 */
public final class ClusterJobs {
  private ClusterJobs() {}

  private static final TensorType F32X4 = TensorType.of(DType.F32, 4);
  private static final List<String> JOBS = List.of("scores-a", "scores-b", "scores-c");
  private static final long ITEMS = 120;
  private static final long DELAY_MS = 40;

  /** Every node's catalog: each job scores {@code 2x + 1} over its items, a printed line per 10 items. */
  private static ShardedBatchJobs.JobCatalog catalog(String node, Path outputs) {
    GraphBuilder b = new GraphBuilder("twice_plus_one");
    Value x = b.parameter(F32X4);
    Program step = Program.of(b.build(b.add(b.multiply(x, b.constant(2f)), b.constant(1f))));
    Map<String, Boolean> started = new ConcurrentHashMap<>();
    return id -> !JOBS.contains(id) ? Optional.empty() : Optional.of(new ShardedBatchJobs.Definition(step, ITEMS, i -> {
      if (started.putIfAbsent(id, true) == null) {
        System.out.println("[" + node + "] runs " + id + " from item " + i);
      } else if (i % 10 == 0) {
        System.out.println("[" + node + "] " + id + " at item " + i);
      }
      Thread.sleep(DELAY_MS); // stands for reading the item
      return List.of(input(i));
    }, outputs.resolve(id + ".tsv")));
  }

  private static HostTensor input(long i) {
    return HostTensor.ofFloats(new float[] {i, i + 1, i + 2, i + 3}, 4);
  }

  private static Config node(int seedPort, int port, String role, Path dir) {
    // On real hosts: hostname = this machine's address, seed-nodes = the seeds' host:port, and
    // jobs.journal.url a PostgreSQL database every node reaches (conf/application.conf).
    return ConfigFactory.parseString("""
            xla-actors.cluster {
              seed-nodes = ["127.0.0.1:%d"], hostname = "127.0.0.1", port = %d, roles = [%s]
              jobs.journal.url = "%s"
            }
            pekko.cluster.downing-provider-class = "org.apache.pekko.cluster.sbr.SplitBrainResolverProvider"
            pekko.cluster.split-brain-resolver.stable-after = 3s
            pekko.cluster.failure-detector { heartbeat-interval = 200ms, acceptable-heartbeat-pause = 3s }
            """.formatted(seedPort, port, role, JobJournalSettings.h2File(dir.resolve("journal"))))
        .withFallback(ConfigFactory.load());
  }

  public static void main(String[] args) throws Exception {
    if (args.length == 4 && args[0].equals("compute")) {
      compute(args[1], Integer.parseInt(args[2]), Path.of(args[3]));
      return;
    }
    new ExampleArgs("examples/run.sh cluster (no arguments; it starts its own nodes)", args, 0);
    Path dir = Files.createTempDirectory("xla-actors-cluster-jobs");
    int seedPort;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      seedPort = s.getLocalPort();
    }
    System.setProperty("h2.bindAddress", "127.0.0.1");
    ActorSystem<Void> system = XlaCluster.start(node(seedPort, seedPort, "front", dir));
    System.out.println("node A (front, seed) at " + XlaCluster.selfAddress(system) + "; journal and outputs in " + dir);
    Map<String, Process> nodes = new LinkedHashMap<>();
    Map<String, String> lastRunner = new ConcurrentHashMap<>();
    Map<String, Long> progress = new ConcurrentHashMap<>();
    for (String name : List.of("node B", "node C")) {
      nodes.put(name, startNode(name, seedPort, dir, lastRunner, progress));
    }
    try {
      ActorRef<ShardingEnvelope<ShardedBatchJobs.Command>> jobs = ShardedBatchJobs.init(system, "compute", null, null);
      long upDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      // Both compute nodes' shard regions are registered before the first job, so the jobs spread.
      while (XlaCluster.membersUp(system) < 3 || progress.size() < 2) {
        if (System.nanoTime() > upDeadline) {
          throw new IllegalStateException("the compute nodes did not join within 60 s");
        }
        Thread.sleep(100);
      }
      System.out.println("3 nodes up; starting " + JOBS + ", " + ITEMS + " items each, " + DELAY_MS + " ms per item");
      for (String job : JOBS) {
        jobs.tell(new ShardingEnvelope<>(job, new ShardedBatchJobs.Ensure()));
      }
      long halfDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (JOBS.stream().mapToLong(j -> progress.getOrDefault(j, 0L)).max().orElse(0) < ITEMS / 2) {
        if (System.nanoTime() > halfDeadline) {
          throw new IllegalStateException("no job got half way within 60 s");
        }
        Thread.sleep(50);
      }
      String victim = busiest(lastRunner);
      System.out.println("killing " + victim + " (SIGKILL) half way, while it runs "
          + lastRunner.entrySet().stream().filter(e -> e.getValue().equals(victim)).map(Map.Entry::getKey).toList());
      Process killed = nodes.get(victim);
      killed.destroyForcibly();
      killed.waitFor(10, TimeUnit.SECONDS);
      long killedAt = System.nanoTime();

      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
      for (String job : JOBS) {
        Path out = dir.resolve(job + ".tsv");
        while (!Files.exists(out)) {
          if (System.nanoTime() > deadline) {
            throw new IllegalStateException(job + " did not finish within 120 s of the kill");
          }
          Thread.sleep(100);
        }
        Map<Long, String> lines = ResultJournal.read(out);
        for (long i = 0; i < ITEMS; i++) {
          String expected = BatchScoring.formatValues(List.of(HostTensor.ofFloats(
              new float[] {2f * i + 1, 2f * i + 3, 2f * i + 5, 2f * i + 7}, 4)));
          if (!expected.equals(lines.get(i))) {
            throw new IllegalStateException(job + " item " + i + ": expected " + expected + ", got " + lines.get(i));
          }
        }
        System.out.printf("%s finished on %s: %d lines in %s, every item once with the right values%n",
            job, lastRunner.get(job), Files.readAllLines(out).size(), out.getFileName());
      }
      System.out.printf("all jobs done %.1f s after the kill%n", (System.nanoTime() - killedAt) / 1e9);
    } finally {
      for (Process p : nodes.values()) {
        p.getOutputStream().close();
      }
      for (Process p : nodes.values()) {
        if (!p.waitFor(20, TimeUnit.SECONDS)) {
          p.destroyForcibly();
        }
      }
      system.terminate();
      system.getWhenTerminated().toCompletableFuture().get(20, TimeUnit.SECONDS);
    }
  }


  /** The node that most recently started the most jobs. */
  private static String busiest(Map<String, String> lastRunner) {
    Map<String, Integer> count = new LinkedHashMap<>();
    lastRunner.values().forEach(n -> count.merge(n, 1, Integer::sum));
    return count.entrySet().stream().max(Map.Entry.comparingByValue()).map(Map.Entry::getKey).orElse("node B");
  }

  /**
   * Starts a compute node. Its lines are shown here and read: "runs <job>" says which node runs which job,
   * "<job> at item <i>" how far a job got, and "compute node at" that the node is up (noted in {@code
   * progress} under the node's name).
   */
  private static Process startNode(String name, int seedPort, Path dir, Map<String, String> lastRunner,
      Map<String, Long> progress) throws Exception {
    List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString()));
    for (String property : List.of("config.file", "logback.configurationFile")) {
      if (System.getProperty(property) != null) {
        command.add("-D" + property + "=" + System.getProperty(property));
      }
    }
    command.addAll(List.of("-Dh2.bindAddress=127.0.0.1", "-cp", System.getProperty("java.class.path"),
        ClusterJobs.class.getName(), "compute", name, Integer.toString(seedPort), dir.toString()));
    Process process = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    Runtime.getRuntime().addShutdownHook(new Thread(process::destroyForcibly));
    Thread reader = new Thread(() -> {
      try (BufferedReader lines = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
        String line;
        while ((line = lines.readLine()) != null) {
          System.out.println(line);
          String[] words = line.substring(line.indexOf(']') + 2).split(" ");
          if (words[0].equals("runs")) {
            lastRunner.put(words[1], name);
          } else if (words.length == 4 && words[1].equals("at")) {
            progress.put(words[0], Long.parseLong(words[3]));
          } else if (words[0].equals("compute")) {
            progress.put(name, 0L);
          }
        }
      } catch (Exception e) {
        // the node is gone
      }
    }, "output of " + name);
    reader.setDaemon(true);
    reader.start();
    return process;
  }

  private static void compute(String name, int seedPort, Path dir) throws Exception {
    ActorSystem<Void> system = XlaCluster.start(node(seedPort, 0, "compute", dir));
    XlaClient client = XlaClient.create();
    ShardedBatchJobs.init(system, "compute", client, catalog(name, dir));
    System.out.println("[" + name + "] compute node at " + XlaCluster.selfAddress(system));
    while (System.in.read() >= 0) {
      // the front node keeps the pipe open while it runs
    }
    System.exit(0);
  }
}
