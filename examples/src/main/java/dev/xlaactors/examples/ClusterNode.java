package dev.xlaactors.examples;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigValueFactory;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.cluster.ClusterCallbacks;
import dev.xlaactors.cluster.XlaCluster;
import dev.xlaactors.error.XlaException;
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
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.ClusterEvent;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Subscribe;

/**
 * One cluster node in this terminal, from arguments (over conf/application.conf): start two or more in
 * separate terminals to form a cluster (docs/cluster.md has the two-terminal session). It prints the
 * members joining, leaving and becoming unreachable; with role {@code callbacks} it serves the Java
 * callback {@code times-three-plus-one}; with role {@code compute} it runs, every few seconds, a program
 * on its own CPU plugin whose callback another node serves, and prints the result. Ctrl-C leaves the
 * cluster gracefully; a node started again with the same port rejoins as long as another seed is up.
 *
 * <p>Usage: {@code examples/run.sh node --port <port> --seeds <host:port,...> [--hostname <address>]
 * [--roles callbacks,compute]}.
 */
public final class ClusterNode {
  private static final String USAGE = "examples/run.sh node --port <port 1-65535> --seeds <host:port,host:port,...>"
      + " [--hostname <address, default 127.0.0.1>] [--roles callbacks,compute]";
  private static final TensorType F32X3 = TensorType.of(DType.F32, 3);

  private ClusterNode() {}

  public static void main(String[] args) throws Exception {
    ExampleArgs arguments = new ExampleArgs(USAGE, args, 8);
    int port = -1;
    String hostname = "127.0.0.1";
    List<String> seeds = List.of();
    List<String> roles = List.of();
    for (int i = 0; i < args.length; i += 2) {
      if (i + 1 >= args.length) {
        arguments.exit(args[i] + " needs a value");
      }
      switch (args[i]) {
        case "--port" -> port = arguments.intAt(i + 1, "--port", -1, 1);
        case "--hostname" -> hostname = args[i + 1];
        case "--seeds" -> seeds = List.of(args[i + 1].split(","));
        case "--roles" -> roles = List.of(args[i + 1].split(","));
        default -> arguments.exit("unknown option " + args[i]);
      }
    }
    if (port < 1 || port > 65535 || seeds.isEmpty()) {
      arguments.exit("--port (1-65535) and --seeds are required");
    }
    for (String role : roles) {
      if (!role.equals("callbacks") && !role.equals("compute")) {
        arguments.exit("unknown role '" + role + "': the roles are callbacks and compute");
      }
    }
    Config config = ConfigFactory.empty()
        .withValue("xla-actors.cluster.port", ConfigValueFactory.fromAnyRef(port))
        .withValue("xla-actors.cluster.hostname", ConfigValueFactory.fromAnyRef(hostname))
        .withValue("xla-actors.cluster.seed-nodes", ConfigValueFactory.fromIterable(seeds))
        .withValue("xla-actors.cluster.roles", ConfigValueFactory.fromIterable(roles))
        .withFallback(ConfigFactory.parseString("""
            # A killed node is removed from the cluster after the failure detector and 'stable-after'.
            pekko.cluster.downing-provider-class = "org.apache.pekko.cluster.sbr.SplitBrainResolverProvider"
            pekko.cluster.split-brain-resolver.stable-after = 5s
            """))
        .withFallback(ConfigFactory.load());
    ActorSystem<Void> system;
    try {
      system = XlaCluster.start(config); // bad seeds or hostname: an XlaException naming the key
    } catch (XlaException e) { // a malformed seed or hostname
      arguments.exit(e.getMessage());
      return;
    } catch (RuntimeException e) { // the port is taken, say
      System.err.println("cannot start the node: " + e.getMessage());
      System.exit(1);
      return;
    }
    String self = XlaCluster.selfAddress(system);
    System.out.println("node " + self + " roles " + roles + ", seeds " + seeds + "; Ctrl-C leaves the cluster");
    Cluster.get(system).subscriptions().tell(Subscribe.create(
        system.systemActorOf(Behaviors.receive(ClusterEvent.ClusterDomainEvent.class)
            .onMessage(ClusterEvent.ClusterDomainEvent.class, event -> {
              String line = describe(event);
              if (line != null) {
                System.out.println("  [" + self + "] " + line);
              }
              return Behaviors.same();
            }).build(), "membership-printer", Props.empty()),
        ClusterEvent.ClusterDomainEvent.class));

    if (roles.contains("callbacks")) {
      ClusterCallbacks.create(system).serve(timesThreePlusOne(self));
      System.out.println("serving the callback 'times-three-plus-one'");
    }
    if (roles.contains("compute")) {
      compute(system);
    }
    system.getWhenTerminated().toCompletableFuture().get();
  }

  /** Every 5 s until the node stops: runs 3x + 1 over [1, 2, 3] with the callback served by some node. */
  private static void compute(ActorSystem<Void> system) throws Exception {
    GraphBuilder b = new GraphBuilder("remote_times_three_plus_one");
    Value x = b.parameter(F32X3);
    Graph graph = b.build(b.hostCall(timesThreePlusOne("unused here"), x).get(0));
    try (XlaClient client = XlaClient.create();
        CallbackRuntime runtime = CallbackRuntime.create(system, client);
        BoundProgram program = runtime.compile(graph)) {
      ClusterCallbacks.create(system).callRemotely(runtime, graph.hostCallbacks()).toCompletableFuture().get(10, TimeUnit.SECONDS);
      float step = 1;
      while (!system.getWhenTerminated().toCompletableFuture().isDone()) {
        float[] in = {step, step + 1, step + 2};
        try {
          float[] out = runtime.run(program, Argument.of(List.of(HostTensor.ofFloats(in, 3)))).get(0).toFloatArray();
          System.out.println("  3x+1 of " + Arrays.toString(in) + " = " + Arrays.toString(out));
        } catch (RuntimeException e) { // no node serves it yet, or the serving node went away mid-call
          System.out.println("  run failed: " + e.getMessage());
        }
        step++;
        Thread.sleep(5000);
      }
    }
  }

  private static HostCallback timesThreePlusOne(String node) {
    return new HostCallback("times-three-plus-one", List.of(F32X3), null, (in, s) -> {
      float[] v = in.get(0).toFloatArray();
      List<Float> served = new ArrayList<>();
      for (int i = 0; i < v.length; i++) {
        v[i] = 3 * v[i] + 1;
        served.add(v[i]);
      }
      System.out.println("  served times-three-plus-one -> " + served + " on " + node);
      return List.of(HostTensor.ofFloats(v, 3));
    });
  }

  private static String describe(ClusterEvent.ClusterDomainEvent event) {
    if (event instanceof ClusterEvent.MemberUp e) {
      return "member up: " + e.member().address() + " " + e.member().getRoles();
    } else if (event instanceof ClusterEvent.MemberRemoved e) {
      return "member removed: " + e.member().address();
    } else if (event instanceof ClusterEvent.UnreachableMember e) {
      return "member unreachable: " + e.member().address();
    } else if (event instanceof ClusterEvent.ReachableMember e) {
      return "member reachable again: " + e.member().address();
    } else if (event instanceof ClusterEvent.MemberLeft e) {
      return "member leaving: " + e.member().address();
    }
    return null;
  }
}
