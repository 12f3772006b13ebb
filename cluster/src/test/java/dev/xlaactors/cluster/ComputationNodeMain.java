package dev.xlaactors.cluster;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.runtime.XlaClient;
import java.time.Duration;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;

/**
 * A child JVM of the sharded computation test: a node with role {@code compute}, its own XLA client and
 * callback runtime, holding entities of {@link TestNodes#computations}. Arguments: node name, the seed's
 * port. Prints {@code READY <address>} once Up; exits when its standard input closes.
 */
public final class ComputationNodeMain {
  private ComputationNodeMain() {}

  public static void main(String[] args) throws Exception {
    String node = args[0];
    int seedPort = Integer.parseInt(args[1]);
    ActorSystem<Void> system = XlaCluster.start(TestNodes.config(seedPort, 0, "compute"));
    XlaClient client = XlaClient.create();
    CallbackRuntime callbacks = CallbackRuntime.create(system, client);
    ShardedComputations.init(system, "compute", client, callbacks, TestNodes.computations(node));
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
}
