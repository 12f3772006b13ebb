package dev.xlaactors.cluster;

import dev.xlaactors.runtime.XlaClient;
import java.nio.file.Path;
import java.util.Optional;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope;

/**
 * A child JVM of {@link JournalKillTest}: a one-node cluster (its own seed) that opens the job journal
 * first, so it is the JVM serving the H2 file, and runs one job ({@link TestNodes#scoresJob}) whose sink
 * prints {@code ACK <item>} as soon as the journal acknowledged the item. Arguments: node name, port,
 * journal URL, job id, item count, output file, delay per item in ms. Prints {@code READY <address>} once
 * Up; exits when its standard input closes.
 */
public final class JournalKillNodeMain {
  private JournalKillNodeMain() {}

  public static void main(String[] args) throws Exception {
    String node = args[0];
    int port = Integer.parseInt(args[1]);
    String url = args[2];
    String job = args[3];
    long count = Long.parseLong(args[4]);
    Path output = Path.of(args[5]);
    long delayMs = Long.parseLong(args[6]);
    ActorSystem<Void> system = XlaCluster.start(TestNodes.jobNodeConfig(port, port, url));
    XlaClient client = XlaClient.create();
    ShardedBatchJobs.Definition definition = TestNodes.scoresJob(job, node, output, count, delayMs)
        .withSink((item, outputs) -> {
          // The child's protocol to the test: this item is acknowledged by the journal.
          System.out.println("ACK " + item);
          System.out.flush();
        });
    ActorRef<ShardingEnvelope<ShardedBatchJobs.Command>> jobs =
        ShardedBatchJobs.init(system, "compute", client, id -> id.equals(job) ? Optional.of(definition) : Optional.empty());
    jobs.tell(new ShardingEnvelope<>(job, new ShardedBatchJobs.Ensure()));
    TestNodes.announceReadyAndLiveWhileTheParentDoes(system);
  }
}
