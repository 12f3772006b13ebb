package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.ConfigFactory;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A seed node that is killed and started again rejoins the running cluster instead of forming a cluster
 * of its own, when every node lists the same two seeds (docs/cluster.md's recipe). Real JVMs on
 * loopback: seeds A (first in the list) and B are child JVMs, this test JVM is a third, non-seed member
 * that watches the membership. A is killed (SIGKILL); once the survivors have removed it, A starts again
 * on the same port, and this JVM must see the new incarnation (another uid) Up in its own cluster: a
 * restarted A that formed its own cluster would never appear here.
 */
@Timeout(value = 150, unit = TimeUnit.SECONDS)
class SeedRestartClusterTest {
  private static final Pattern READY = Pattern.compile("READY (\\S+)");

  @Test
  void aRestartedFirstSeedRejoinsTheRunningCluster(@TempDir Path dir) throws Exception {
    int portA = TestNodes.freePort();
    int portB = TestNodes.freePort();
    String seeds = "127.0.0.1:" + portA + ",127.0.0.1:" + portB;
    ChildJvms children = new ChildJvms(dir);
    ActorSystem<Void> system = null;
    try {
      ChildJvms.Child a = children.start("seed-a", SeedNodeMain.class, Integer.toString(portA), seeds);
      ChildJvms.Child b = children.start("seed-b", SeedNodeMain.class, Integer.toString(portB), seeds);
      a.await(READY, Duration.ofSeconds(60));
      b.await(READY, Duration.ofSeconds(60));
      system = XlaCluster.start(
          ConfigFactory.parseString("xla-actors.cluster.seed-nodes = [\"127.0.0.1:" + portA + "\", \"127.0.0.1:" + portB + "\"]")
              .withFallback(TestNodes.config(portA, 0, "watcher")));
      ActorSystem<Void> watcher = system;
      Cluster cluster = Cluster.get(watcher);
      awaitUntil(() -> XlaCluster.membersUp(watcher) == 3, Duration.ofSeconds(60), "three members Up", cluster);
      long firstUid = memberAt(cluster, portA).orElseThrow().uniqueAddress().longUid();

      ChildJvms.kill(a);
      awaitUntil(() -> memberAt(cluster, portA).isEmpty(), Duration.ofSeconds(60), "the killed seed removed", cluster);

      ChildJvms.Child restarted = children.start("seed-a-restarted", SeedNodeMain.class, Integer.toString(portA), seeds);
      restarted.await(READY, Duration.ofSeconds(60));
      awaitUntil(() -> memberAt(cluster, portA).filter(m -> m.status() == MemberStatus.up()).isPresent(),
          Duration.ofSeconds(60), "the restarted seed Up in the running cluster", cluster);
      long secondUid = memberAt(cluster, portA).orElseThrow().uniqueAddress().longUid();
      assertNotEquals(firstUid, secondUid, "a new incarnation of A, not the old one");
      assertTrue(XlaCluster.membersUp(system) == 3, "A, B and this JVM: " + cluster.state().getMembers());
    } finally {
      // This node leaves first, while A and B live (once they were killed, its leave took 7 s of this test's 37).
      children.closeAfter(system);
    }
  }

  private static Optional<Member> memberAt(Cluster cluster, int port) {
    for (Member m : cluster.state().getMembers()) {
      if (m.address().port().isDefined() && (Integer) m.address().port().get() == port) {
        return Optional.of(m);
      }
    }
    return Optional.empty();
  }

  private static void awaitUntil(java.util.function.BooleanSupplier condition, Duration timeout, String what, Cluster cluster)
      throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("not within " + timeout + ": " + what + "; members: " + cluster.state().getMembers());
      }
      Thread.sleep(100);
    }
  }
}
