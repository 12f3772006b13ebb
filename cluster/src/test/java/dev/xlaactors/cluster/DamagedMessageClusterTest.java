package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.ConfigFactory;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.XlaClient;
import java.nio.file.Files;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.apache.pekko.actor.typed.ActorSystem;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Damaged tensor messages in a live cluster of two JVMs on loopback: this test JVM (seed, role compute)
 * runs the program and sends its callback requests with {@link CorruptingCallbackSerializer}; child B
 * serves the callback and decodes with the real {@link RemoteCallbackSerializer}. A truncated request and
 * one with an unknown dtype code are refused on B, which logs why; the function never sees them, the run
 * that sent one fails at its callback timeout, and the next good call on the same connection is served.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class DamagedMessageClusterTest {
  private static final Pattern READY = Pattern.compile("READY (\\S+)");

  private static ChildJvms children;
  private static ChildJvms.Child b;
  private static ActorSystem<Void> system;
  private static XlaClient client;
  private static CallbackRuntime runtime;
  private static Executable executable;

  @BeforeAll
  static void startCluster() throws Exception {
    children = new ChildJvms(Files.createTempDirectory("xla-damaged-messages"));
    int seedPort = TestNodes.freePort();
    b = children.start("node-b", CallbackNodeMain.class, "node-b", Integer.toString(seedPort));
    system = XlaCluster.start(ConfigFactory.parseString("""
            pekko.actor.serializers.xla-remote-callback = "dev.xlaactors.cluster.CorruptingCallbackSerializer"
            xla-actors.actors.callbacks.timeouts.affine-remote = 3s
            """).withFallback(TestNodes.config(seedPort, seedPort, "compute")));
    client = XlaClient.create();
    runtime = CallbackRuntime.create(system, client);
    ClusterCallbacks remote = ClusterCallbacks.create(system);
    // The callback gets x itself (y = affine(x)), so the test chooses what B receives.
    GraphBuilder g = new GraphBuilder("remote_affine_direct");
    Value x = g.parameter(TestNodes.F32X3);
    Graph graph = g.build(g.hostCall(TestNodes.affine("A: never called here"), x).get(0));
    remote.callRemotely(runtime, graph.hostCallbacks()).toCompletableFuture().get(10, TimeUnit.SECONDS);
    executable = graph.compile(client);
    b.await(READY, Duration.ofSeconds(60));
    assertEquals(1, remote.awaitServers("affine-remote", 1).toCompletableFuture().get(30, TimeUnit.SECONDS));
  }

  @AfterAll
  static void stopCluster() throws Exception {
    try {
      if (executable != null) {
        executable.close();
      }
      if (runtime != null) {
        runtime.close();
      }
      if (client != null) {
        client.close();
      }
      if (system != null) {
        system.terminate();
        system.getWhenTerminated().toCompletableFuture().get(20, TimeUnit.SECONDS);
      }
    } finally {
      children.close();
    }
  }

  private static List<HostTensor> run(float x0) {
    return runtime.run(executable, List.of(HostTensor.ofFloats(new float[] {x0, 1f, 2f}, 3)));
  }

  @Test
  void damagedRequestsAreRefusedOnTheServingNodeAndTheNextCallIsServed() throws Exception {
    assertArrayEquals(new float[] {4f, 4f, 7f}, run(1f).get(0).toFloatArray(), 0f);

    for (float damaged : new float[] {CorruptingCallbackSerializer.TRUNCATE, CorruptingCallbackSerializer.BAD_DTYPE}) {
      long start = System.nanoTime();
      CallbackException e = assertThrows(CallbackException.class, () -> run(damaged));
      long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      assertEquals(ErrorCode.DEADLINE_EXCEEDED, e.code(), e.getMessage());
      assertEquals("affine-remote", e.callbackName());
      assertTrue(tookMs < 6_000, "the run failed " + tookMs + " ms after it started; the callback timeout is 3 s");

      // The next good call, on the same connection, is served with correct values.
      assertArrayEquals(new float[] {7f, 4f, 7f}, run(2f).get(0).toFloatArray(), 0f);
    }

    String log = b.output();
    assertFalse(log.contains("x0=" + CorruptingCallbackSerializer.TRUNCATE), "a truncated request reached the function:\n" + log);
    assertFalse(log.contains("x0=" + CorruptingCallbackSerializer.BAD_DTYPE), "a request with a bad dtype reached the function:\n" + log);
    assertTrue(log.contains("x0=2.0"), log);
    assertTrue(log.contains("refused remote callback message (manifest 'Q')") && log.contains("is truncated"),
        "node B did not log why it refused the truncated request:\n" + log);
    assertTrue(log.contains("has dtype code 99, which is no dtype"),
        "node B did not log why it refused the request with a bad dtype code:\n" + log);
  }
}
