package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.jobs.BatchScoring;
import dev.xlaactors.actors.jobs.ResultJournal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A batch job as a sharded entity on two compute nodes (child JVMs with their own XLA client); this test
 * JVM is the seed and only sends the job its start. The node running the job is killed half way: the
 * survivors remove it, the job's shard moves to the other compute node, which starts the remembered job
 * again, and it resumes from the output file. The file ends with every item exactly once.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ShardedBatchJobClusterTest {
  private static final int COUNT = 200;
  private static final Pattern READY = Pattern.compile("READY (\\S+)");

  @Test
  void aJobWhoseNodeIsKilledHalfWayCompletesOnAnotherWithEveryItemOnce() throws Exception {
    Path dir = Files.createTempDirectory("xla-sharded-job-test");
    Path output = dir.resolve("scores.tsv");
    int seedPort = TestNodes.freePort();
    ActorSystem<Void> system = null;
    try (ChildJvms children = new ChildJvms(dir)) {
      String[] args = {Integer.toString(seedPort), output.toString(), Integer.toString(COUNT), "30"};
      ChildJvms.Child b = children.start("job-node-b", JobNodeMain.class, "job-node-b", args[0], args[1], args[2], args[3]);
      ChildJvms.Child c = children.start("job-node-c", JobNodeMain.class, "job-node-c", args[0], args[1], args[2], args[3]);
      system = XlaCluster.start(TestNodes.config(seedPort, seedPort, "coordinator"));
      ActorRef<ShardingEnvelope<ShardedBatchJobs.Command>> jobs = ShardedBatchJobs.init(system, "compute", null, null);
      String addressB = b.await(READY, Duration.ofSeconds(60));
      String addressC = c.await(READY, Duration.ofSeconds(60));

      jobs.tell(new ShardingEnvelope<>("scores", new ShardedBatchJobs.Ensure()));
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (lines(output) < 40) {
        assertTrue(System.nanoTime() < deadline, () -> "the job wrote too little in 60 s:\n" + b.output() + c.output());
        Thread.sleep(20);
      }
      ChildJvms.Child running = b.output().contains("RUNNING scores on") ? b : c;
      ChildJvms.Child other = running == b ? c : b;
      ChildJvms.kill(running);
      long killedAt = System.nanoTime();
      long atKill = ResultJournal.read(output).size();
      assertTrue(atKill < COUNT, "killed after " + atKill + " items");

      deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (ResultJournal.read(output).size() < COUNT) {
        assertTrue(System.nanoTime() < deadline, () -> "the job did not complete in 60 s after the kill:\n" + other.output());
        Thread.sleep(50);
      }
      long completedAfterMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killedAt);
      // Resumed at the first item the killed node had not written, not from the start.
      assertTrue(other.output().contains("RUNNING scores on " + other.name() + " from item " + atKill), other::output);

      List<String> lines = Files.readAllLines(output);
      assertEquals(COUNT, lines.size(), "one line per item, none twice");
      Map<Long, String> done = ResultJournal.read(output);
      for (long i = 0; i < COUNT; i++) {
        assertEquals(BatchScoring.formatValues(List.of(TestNodes.itemOutput(i))), done.get(i), "item " + i);
      }
      System.err.printf("sharded job test: node %s killed after %d of %d items; the job completed on %s %d ms later%n",
          running == b ? addressB : addressC, atKill, COUNT, running == b ? addressC : addressB, completedAfterMs);
    } finally {
      if (system != null) {
        system.terminate();
        system.getWhenTerminated().toCompletableFuture().get(20, TimeUnit.SECONDS);
      }
    }
  }

  private static long lines(Path output) throws Exception {
    return Files.exists(output) ? ResultJournal.read(output).size() : 0;
  }
}
