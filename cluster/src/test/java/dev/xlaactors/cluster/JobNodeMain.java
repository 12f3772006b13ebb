package dev.xlaactors.cluster;

import dev.xlaactors.runtime.XlaClient;
import java.nio.file.Path;
import java.util.Optional;
import org.apache.pekko.actor.typed.ActorSystem;

/**
 * A child JVM of the sharded job test: a node with role {@code compute} and its own XLA client that can
 * run one job ({@link TestNodes#scoresJob}). Arguments: node name, the seed's port, the
 * output file, item count, delay per item in ms, the job journal's JDBC URL, the job's id. Prints {@code READY <address>} once Up; exits when its
 * standard input closes.
 */
public final class JobNodeMain {
  private JobNodeMain() {}

  public static void main(String[] args) throws Exception {
    int seedPort = Integer.parseInt(args[1]);
    Path output = Path.of(args[2]);
    long count = Long.parseLong(args[3]);
    long delayMs = Long.parseLong(args[4]);
    ActorSystem<Void> system = XlaCluster.start(TestNodes.jobNodeConfig(seedPort, 0, args[5]));
    XlaClient client = XlaClient.create();
    ShardedBatchJobs.init(system, "compute", client,
        id -> id.equals(args[6]) ? Optional.of(TestNodes.scoresJob(id, args[0], output, count, delayMs)) : Optional.empty());
    TestNodes.announceReadyAndLiveWhileTheParentDoes(system);
  }
}
