package dev.xlaactors.cluster;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.runtime.XlaClient;
import org.apache.pekko.actor.typed.ActorSystem;

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
    TestNodes.announceReadyAndLiveWhileTheParentDoes(system);
  }
}
