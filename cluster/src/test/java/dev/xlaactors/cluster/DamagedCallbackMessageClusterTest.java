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
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Damaged tensor messages on a live cluster of two JVMs: this test JVM (node A, role compute, the seed)
 * runs a program whose callback is served by a child JVM (node B, role callbacks), and writes its
 * callback requests with {@link DamagingCallbackSerializer} under the real serializer's identifier, so
 * B decodes them with the real {@link RemoteCallbackSerializer}.
 *
 * <p>What really happens, asserted here: B refuses the damaged request while decoding it, and Pekko
 * 1.7's Artery logs it at ERROR (naming the sender, the serializer id and the manifest, with our
 * exception and its message) and drops it; the callback function never runs (B prints {@code SERVED} for every call it runs). Nothing
 * answers the call, so A's run ends with its callback timeout (2 s here), {@code DEADLINE_EXCEEDED}
 * naming the callback. The connection stays: the next good call on it is served, and B is neither
 * quarantined nor unreachable.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class DamagedCallbackMessageClusterTest {
  private static final Pattern READY = Pattern.compile("READY (\\S+)");
  private static final Duration CALLBACK_TIMEOUT = Duration.ofSeconds(2);

  @TempDir static Path dir;
  private static ChildJvms children;
  private static ChildJvms.Child b;
  private static ActorSystem<Void> system;
  private static XlaClient client;
  private static CallbackRuntime runtime;
  private static Model executable;
  private static int good;

  @BeforeAll
  static void startCluster() throws Exception {
    children = new ChildJvms(dir);
    int seedPort = TestNodes.freePort();
    b = children.start("node-b", CallbackNodeMain.class, "node-b", Integer.toString(seedPort));
    system = XlaCluster.start(ConfigFactory.parseString("""
            pekko.actor.serializers.xla-remote-callback = "dev.xlaactors.cluster.DamagingCallbackSerializer"
            xla-actors.actors.callbacks.default-timeout = %ds
            """.formatted(CALLBACK_TIMEOUT.toSeconds()))
        .withFallback(TestNodes.config(seedPort, seedPort, "compute")));
    client = XlaClient.create();
    runtime = CallbackRuntime.create(system, client);
    ClusterCallbacks remote = ClusterCallbacks.create(system);

    // y = affine(x), served by B: 3x + 1.
    GraphBuilder g = new GraphBuilder("remote_affine_only");
    Value x = g.parameter(TestNodes.F32X3);
    Graph graph = g.build(g.hostCall(TestNodes.affine("A: never called here"), x).get(0));
    remote.callRemotely(runtime, graph.hostCallbacks()).toCompletableFuture().get(10, TimeUnit.SECONDS);
    executable = Model.compile(client, graph.stablehlo());
    b.await(READY, Duration.ofSeconds(60));
    assertEquals(1, remote.awaitServers("affine-remote", 1).toCompletableFuture().get(30, TimeUnit.SECONDS));
    assertAGoodCallIsServed();
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
    } finally {
      children.closeAfter(system);
    }
  }

  static Stream<Arguments> damages() {
    return Stream.of(
        Arguments.of("truncated", DamagingCallbackSerializer.TRUNCATE,
            "tensor 0 of 1 (f32[3]) is truncated: 12 bytes of data expected, 6 left"),
        Arguments.of("unknown dtype code", DamagingCallbackSerializer.UNKNOWN_DTYPE,
            "tensor 0 of 1 has dtype code 99, which is no dtype; known codes: 1=pred"),
        Arguments.of("another dtype's code", DamagingCallbackSerializer.OTHER_DTYPE,
            "tensor 0 of 1 (f64[3]) carries 12 bytes, expected 24"));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("damages")
  void aDamagedRequestIsRefusedByTheReceiverTheCallbackNeverRunsAndTheRunEndsWithItsTimeout(
      String damage, float marker, String refusal) throws Exception {
    String a = XlaCluster.selfAddress(system);
    long start = System.nanoTime();
    ExecutionException e = assertThrows(ExecutionException.class,
        () -> runtime.start(executable, Argument.of(List.of(HostTensor.vector(marker, 0f, 0f)))).result().toCompletableFuture()
            .get(20, TimeUnit.SECONDS));
    long failedAfterMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    CallbackException cause = assertInstanceOf(CallbackException.class, e.getCause(), () -> String.valueOf(e.getCause()));
    assertEquals(ErrorCode.DEADLINE_EXCEEDED, cause.code(), cause.getMessage());
    assertEquals("affine-remote", cause.callbackName());
    // Ended by the callback timeout, not sooner (nothing answers) and not much later (never hangs).
    assertTrue(failedAfterMs >= CALLBACK_TIMEOUT.toMillis() && failedAfterMs < CALLBACK_TIMEOUT.toMillis() + 3_000,
        "failed after " + failedAfterMs + " ms");

    // B logged the refusal: Pekko's error (its Artery Deserializer logs and drops the message), with our
    // serializer's exception and message on the next line.
    String logged = b.await(Pattern.compile("(ERROR [^\\n]*o\\.a\\.pekko\\.remote\\.artery\\.Deserializer - Failed to deserialize"
        + " message from \\[" + Pattern.quote(a) + "] with serializer id \\[7401] and manifest \\[Q]\\.\\R"
        + Pattern.quote("dev.xlaactors.error.InvalidArgumentException: refused remote callback message (manifest 'Q'): "
            + refusal) + "[^\\n]*)"), Duration.ofSeconds(10));
    // ...and never ran the callback on it.
    assertFalse(b.output().contains("SERVED affine-remote [" + marker), b::output);

    // The same connection carries the next call: B is still Up and reachable, and was not quarantined.
    assertAGoodCallIsServed();
    assertEquals(MemberStatus.up(), memberStatus(b.output().lines().filter(l -> l.startsWith("READY ")).findFirst()
        .orElseThrow().substring("READY ".length())));
    assertTrue(Cluster.get(system).state().getUnreachable().isEmpty(), () -> Cluster.get(system).state().toString());
    assertFalse(b.output().contains("uarantine"), b::output);
    System.err.printf("damaged message test (%s): the run failed after %d ms: %s; node B logged: %s%n",
        damage, failedAfterMs, cause.getMessage(), logged.replaceAll("\\R", " | "));
  }

  /** A good call with fresh values: served by B with the right values, and B printed it. */
  private static void assertAGoodCallIsServed() throws Exception {
    good++;
    float[] x = {good, 2f, 3f};
    List<HostTensor> out = runtime.run(executable, Argument.of(List.of(HostTensor.vector(x))));
    assertArrayEquals(new float[] {3f * good + 1f, 7f, 10f}, out.get(0).toFloatArray(), 0f);
    assertTrue(b.output().contains("SERVED affine-remote [" + (float) good + ", 2.0, 3.0] on node-b"), b::output);
  }

  private static MemberStatus memberStatus(String address) {
    for (var m : Cluster.get(system).state().getMembers()) {
      if (m.address().toString().equals(address)) {
        return m.status();
      }
    }
    return MemberStatus.removed();
  }
}
