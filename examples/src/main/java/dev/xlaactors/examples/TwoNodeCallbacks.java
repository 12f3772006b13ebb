package dev.xlaactors.examples;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.cluster.ClusterCallbacks;
import dev.xlaactors.cluster.XlaCluster;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.BoundProgram;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.typed.ActorSystem;

/**
 * Two nodes of a Pekko cluster on this machine: this JVM (role compute) runs a program on the XLA CPU
 * plugin, and a second JVM it starts (role callbacks) serves the program's callback. XLA computes {@code
 * e = exp(x)}, the other JVM normalizes it ({@code e / sum(e)}), and XLA takes the log: a log-softmax whose
 * middle step ran in another process. The program names the callback, never the node.
 */
public final class TwoNodeCallbacks {
  private TwoNodeCallbacks() {}

  private static final TensorType F32X4 = TensorType.of(DType.F32, 4);

  /** Divides by the sum; printed by the node that runs it. */
  private static HostCallback normalize(String node) {
    return new HostCallback("normalize", List.of(F32X4), null, (in, s) -> {
      float[] e = in.get(0).toFloatArray();
      float sum = 0;
      for (float v : e) {
        sum += v;
      }
      float[] p = new float[e.length];
      for (int i = 0; i < e.length; i++) {
        p[i] = e[i] / sum;
      }
      System.out.println("  [" + node + "] normalize " + Arrays.toString(e) + " -> " + Arrays.toString(p));
      return List.of(HostTensor.ofFloats(p, 4));
    });
  }

  private static Config node(int seedPort, int port, String role) {
    // On real hosts: hostname = this machine's address, seed-nodes = the seeds' host:port (conf/application.conf).
    return ConfigFactory.parseString("""
            xla-actors.cluster { seed-nodes = ["127.0.0.1:%d"], hostname = "127.0.0.1", port = %d, roles = [%s] }
            """.formatted(seedPort, port, role))
        .withFallback(ConfigFactory.load());
  }

  public static void main(String[] args) throws Exception {
    if (args.length == 2 && args[0].equals("serve")) {
      serve(Integer.parseInt(args[1]));
      return;
    }
    new ExampleArgs("examples/run.sh cluster-callbacks (no arguments; it starts the serving node)", args, 0);
    int seedPort;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      seedPort = s.getLocalPort();
    }
    List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString()));
    for (String property : List.of("config.file", "logback.configurationFile")) {
      if (System.getProperty(property) != null) {
        command.add("-D" + property + "=" + System.getProperty(property));
      }
    }
    command.addAll(List.of("-cp", System.getProperty("java.class.path"), TwoNodeCallbacks.class.getName(),
        "serve", Integer.toString(seedPort)));
    // The serving node's output is shown here; it exits when this JVM closes its standard input.
    Process server = new ProcessBuilder(command).redirectOutput(ProcessBuilder.Redirect.INHERIT)
        .redirectError(ProcessBuilder.Redirect.INHERIT).start();
    Runtime.getRuntime().addShutdownHook(new Thread(server::destroyForcibly));

    ActorSystem<Void> system = XlaCluster.start(node(seedPort, seedPort, "compute"));
    System.out.println("node A (compute) at " + XlaCluster.selfAddress(system) + "; started node B (callbacks)");
    GraphBuilder b = new GraphBuilder("log_softmax_across_nodes");
    Value x = b.parameter(F32X4);
    Value p = b.hostCall(normalize("not used on node A"), b.exp(x)).get(0);
    Graph graph = b.build(b.log(p));
    try (XlaClient client = XlaClient.create();
        CallbackRuntime runtime = CallbackRuntime.create(system, client);
        BoundProgram program = runtime.compile(graph)) {
      ClusterCallbacks remote = ClusterCallbacks.create(system);
      remote.callRemotely(runtime, graph.hostCallbacks()).toCompletableFuture().get(10, TimeUnit.SECONDS);
      int servers = remote.awaitServers("normalize", 1).toCompletableFuture().get(60, TimeUnit.SECONDS);
      System.out.println("nodes serving 'normalize': " + servers);
      for (float[] values : List.of(new float[] {1f, 2f, 3f, 4f}, new float[] {0f, 0f, 0f, 0f})) {
        HostTensor in = HostTensor.ofFloats(values, 4);
        List<HostTensor> out = runtime.run(program, Argument.of(List.of(in)));
        System.out.println("  [node A] log_softmax(" + Arrays.toString(values) + ") = " + Arrays.toString(out.get(0).toFloatArray()));
      }
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

  private static void serve(int seedPort) throws Exception {
    ActorSystem<Void> system = XlaCluster.start(node(seedPort, 0, "callbacks"));
    ClusterCallbacks.create(system).serve(normalize("node B"));
    System.out.println("node B (callbacks) at " + XlaCluster.selfAddress(system) + " serves 'normalize'");
    while (System.in.read() >= 0) {
      // the compute node keeps the pipe open while it runs
    }
    System.exit(0);
  }
}
