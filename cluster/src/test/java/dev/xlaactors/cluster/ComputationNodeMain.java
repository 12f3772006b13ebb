package dev.xlaactors.cluster;

import dev.xlaactors.runtime.XlaClient;
import java.util.Map;
import org.apache.pekko.actor.typed.ActorSystem;

/**
 * A child JVM of the sharded computation test: a node with role {@code compute}, its own XLA client and
 * the catalog {@link TestNodes#computations()}. Arguments: node name, the seed's port. Prints {@code READY
 * <address>} once Up; exits when its standard input closes.
 */
public final class ComputationNodeMain {
  private ComputationNodeMain() {}

  public static void main(String[] args) throws Exception {
    ActorSystem<Void> system = XlaCluster.start(TestNodes.config(Integer.parseInt(args[1]), 0, "compute"));
    XlaClient client = XlaClient.create();
    ShardedComputations.init(system, "compute", client, null, TestNodes.computations());
    TestNodes.awaitUp(system);
    System.out.println("READY " + XlaCluster.selfAddress(system));
    System.out.flush();
    while (System.in.read() >= 0) {
      // the parent keeps the pipe open while it lives
    }
    System.exit(0);
  }
}
