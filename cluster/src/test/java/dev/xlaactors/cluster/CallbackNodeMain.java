package dev.xlaactors.cluster;

import org.apache.pekko.actor.typed.ActorSystem;

/**
 * A child JVM of the cluster tests: a node with role {@code callbacks} that serves {@link
 * TestNodes#affine}. Arguments: node name, the seed's port. Prints {@code READY <address>} once it is Up,
 * and exits when its standard input closes, so it never outlives the test JVM that started it.
 */
public final class CallbackNodeMain {
  private CallbackNodeMain() {}

  public static void main(String[] args) throws Exception {
    String node = args[0];
    int seedPort = Integer.parseInt(args[1]);
    ActorSystem<Void> system = XlaCluster.start(TestNodes.config(seedPort, 0, "callbacks"));
    ClusterCallbacks.create(system).serve(TestNodes.affine(node));
    TestNodes.announceReadyAndLiveWhileTheParentDoes(system);
  }
}
