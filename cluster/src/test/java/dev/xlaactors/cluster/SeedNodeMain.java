package dev.xlaactors.cluster;

import com.typesafe.config.ConfigFactory;
import org.apache.pekko.actor.typed.ActorSystem;

/**
 * A child JVM of {@link SeedRestartClusterTest}: a node at {@code 127.0.0.1:<port>} with the given seed
 * nodes ("host:port,host:port", the same list on every node). Prints {@code READY <address>} once Up.
 */
final class SeedNodeMain {
  private SeedNodeMain() {}

  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    String seeds = "\"" + String.join("\", \"", args[1].split(",")) + "\"";
    ActorSystem<Void> system = XlaCluster.start(
        ConfigFactory.parseString("xla-actors.cluster.seed-nodes = [" + seeds + "]")
            .withFallback(TestNodes.config(port, port, "seed")));
    TestNodes.announceReadyAndLiveWhileTheParentDoes(system);
  }
}
