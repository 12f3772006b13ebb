package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.cluster.RemoteCallbackServer.Refused;
import dev.xlaactors.cluster.RemoteCallbackServer.Reply;
import dev.xlaactors.cluster.RemoteCallbackServer.Request;
import dev.xlaactors.cluster.RemoteCallbackServer.Served;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.runtime.HostTensor;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorRefResolver;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.LoggerFactory;

/**
 * Who a callback server answers, over real Artery TCP on loopback with three actor systems in this JVM:
 * node A (the seed) serves the callback with a callback secret; node M is a member of A's cluster; X is a
 * remoting actor system that is no member. Requests are sent straight to A's server (as a hostile process
 * would), with chosen secrets. A member with the secret is served; a member without it, or with another,
 * is answered PERMISSION_DENIED and the callback does not run; the non-member, even with the right secret,
 * gets nothing, the callback does not run, and A logs exactly one line naming it.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CallbackAccessTest {
  private static final String SECRET = "s3cret-of-the-cluster";
  private static final Duration NOTHING_FOR = Duration.ofSeconds(4);

  private static ActorSystem<Void> a;
  private static ActorSystem<Void> m;
  private static ActorSystem<Void> x;
  private static String serverRef;
  private static final AtomicInteger RUNS = new AtomicInteger();
  private ListAppender<ILoggingEvent> log;

  @BeforeAll
  static void startNodes() throws Exception {
    int seedPort = TestNodes.freePort();
    a = XlaCluster.start(ConfigFactory.parseString("xla-actors.cluster.security.callback-secret = \"" + SECRET + "\"")
        .withFallback(TestNodes.config(seedPort, seedPort, "callbacks")));
    m = XlaCluster.start(TestNodes.config(seedPort, 0, "compute"));
    x = ActorSystem.create(Behaviors.empty(), "xla-actors", ConfigFactory.parseString("""
            pekko.actor.provider = remote
            pekko.remote.artery.canonical.hostname = "127.0.0.1"
            pekko.remote.artery.canonical.port = 0
            """).withFallback(TestNodes.config(seedPort, 0, "none")));
    ActorRef<Request> server = ClusterCallbacks.create(a).serve("affine-remote", List.of(TestNodes.F32X3), null, (in, s) -> {
      RUNS.incrementAndGet();
      float[] v = in.get(0).toFloatArray();
      return List.of(HostTensor.ofFloats(new float[] {3 * v[0] + 1, 3 * v[1] + 1, 3 * v[2] + 1}, 3));
    });
    serverRef = ActorRefResolver.get(a).toSerializationFormat(server);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (XlaCluster.membersUp(a) < 2 || Cluster.get(m).selfMember().status() != MemberStatus.up()) {
      assertTrue(System.nanoTime() < deadline, "A and M did not form a cluster within 60 s");
      Thread.sleep(50);
    }
  }

  @AfterAll
  static void stopNodes() throws Exception {
    for (ActorSystem<Void> s : new ActorSystem[] {x, m, a}) {
      if (s != null) {
        s.terminate();
        s.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
      }
    }
  }

  @BeforeEach
  void captureServerLog() {
    log = new ListAppender<>();
    log.start();
    ((Logger) LoggerFactory.getLogger(RemoteCallbackServer.class)).addAppender(log);
    RUNS.set(0);
  }

  @AfterEach
  void stopCapturing() {
    ((Logger) LoggerFactory.getLogger(RemoteCallbackServer.class)).detachAppender(log);
  }

  @Test
  void aMemberWithTheSecretIsServed() {
    TestProbe<Reply> probe = TestProbe.create(m);
    send(m, probe, CallbackSecret.of(SECRET));
    Served served = probe.expectMessageClass(Served.class, Duration.ofSeconds(20));
    assertArrayEquals(new float[] {4f, 7f, 10f}, served.outputs().get(0).toFloatArray(), 0f);
    assertEquals(1, RUNS.get());
    assertEquals(List.of(), log.list, "nothing logged for a served request");
  }

  @Test
  void aMemberWithoutTheSecretOrWithAnotherIsDeniedAndNothingRuns() {
    String mAddress = XlaCluster.selfAddress(m);
    for (CallbackSecret wrong : List.of(CallbackSecret.NONE, CallbackSecret.of("guess"))) {
      TestProbe<Reply> probe = TestProbe.create(m);
      send(m, probe, wrong);
      Refused refused = probe.expectMessageClass(Refused.class, Duration.ofSeconds(20));
      assertEquals(ErrorCode.PERMISSION_DENIED, refused.code());
      String why = wrong.isNone() ? "is missing" : "does not match";
      assertEquals("callback 'affine-remote' on node " + a.address() + " refused the request: its secret " + why
          + " (xla-actors.cluster.security.callback-secret must be the same on every node)", refused.message());
    }
    assertEquals(0, RUNS.get());
    assertEquals(List.of(
            "callback 'affine-remote' refused a request from " + mAddress + ": its callback secret is missing",
            "callback 'affine-remote' refused a request from " + mAddress + ": its callback secret does not match"),
        log.list.stream().map(ILoggingEvent::getFormattedMessage).toList());
    // The secret never shows in what is printed of a request.
    assertTrue(!new Request(1, "n", List.of(), TestProbe.<Reply>create(m).getRef(), CallbackSecret.of(SECRET))
        .toString().contains(SECRET));
  }

  @Test
  void aNonMemberGetsNothingEvenWithTheSecretAndOneLineIsLogged() throws Exception {
    TestProbe<Reply> probe = TestProbe.create(x);
    send(x, probe, CallbackSecret.of(SECRET));
    probe.expectNoMessage(NOTHING_FOR);
    assertEquals(0, RUNS.get());
    String xAddress = x.address().toString();
    assertEquals(List.of("callback 'affine-remote' refused a request from " + xAddress
            + ": not a member of the cluster (nothing was run and nothing is answered)"),
        log.list.stream().map(ILoggingEvent::getFormattedMessage).toList());
    assertEquals("WARN", log.list.get(0).getLevel().toString());
  }

  /** Sends A's server a request for affine([1, 2, 3]) from {@code from}, answered to {@code probe}. */
  private static void send(ActorSystem<Void> from, TestProbe<Reply> probe, CallbackSecret secret) {
    ActorRef<Request> server = ActorRefResolver.get(from).resolveActorRef(serverRef);
    server.tell(new Request(1, "affine-remote", List.of(HostTensor.ofFloats(new float[] {1f, 2f, 3f}, 3)), probe.getRef(), secret));
  }
}
