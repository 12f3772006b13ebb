package dev.xlaactors.cluster;

import java.time.Duration;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;

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
