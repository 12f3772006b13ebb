package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.ConfigFactory;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.RunHandle;
import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The client and server of remote callbacks in one JVM (the Receptionist works without a cluster), on
 * the real CPU plugin: values, and how each failure on the serving side reaches the run (its code and a
 * message naming the callback). The three-JVM behaviour is {@link RemoteCallbackClusterTest}'s.
 */
class RemoteCallbackClientTest {
  // A 32 KiB frame, so the frame-size check is reachable with a small tensor (f32[16384] is 64 KiB), and a
  // short timeout for one callback.
  private static final ActorTestKit testKit = ActorTestKit.create(
      ConfigFactory.parseString("""
              pekko.remote.artery.advanced.maximum-frame-size = 32KiB
              xla-actors.actors.callbacks.timeouts { slow-served = 300ms }
              """)
          .withFallback(ConfigFactory.load("application-test")).withFallback(ConfigFactory.load()));
  private static XlaClient client;
  private static CallbackRuntime runtime;
  private static ClusterCallbacks remote;

  @BeforeAll
  static void start() {
    client = XlaClient.create();
    runtime = CallbackRuntime.create(testKit.system(), client);
    remote = ClusterCallbacks.create(testKit.system());
  }

  @AfterAll
  static void stop() {
    runtime.close();
    client.close();
    testKit.shutdownTestKit();
  }

  /** A program {@code callback(x) + 1}, with {@code callback} called through a client. */
  private static Model program(HostCallback callback) throws Exception {
    GraphBuilder b = new GraphBuilder("via_" + callback.name().replace('-', '_'));
    Value x = b.parameter(callback.outputTemplate().get(0));
    Graph graph = b.build(b.add(b.hostCall(callback, x).get(0), b.constant(1f)));
    remote.callRemotely(runtime, graph.hostCallbacks()).toCompletableFuture().get(10, TimeUnit.SECONDS);
    return Model.compile(client, graph.stablehlo());
  }

  private static CallbackException failure(Model exe, HostTensor input) {
    return assertThrows(CallbackException.class, () -> runtime.run(exe, Argument.of(List.of(input))));
  }

  @Test
  void aServedCallbackGivesItsValues() throws Exception {
    TensorType f32x2 = TensorType.of(DType.F32, 2);
    HostCallback square = HostCallback.of("square-served", List.of(f32x2), 0f, (in, s) -> {
      float[] v = in.get(0).toFloatArray();
      return List.of(HostTensor.ofFloats(new float[] {v[0] * v[0], v[1] * v[1]}, 2));
    });
    remote.serve(square);
    assertEquals(1, remote.awaitServers("square-served", 1).toCompletableFuture().get(10, TimeUnit.SECONDS));
    try (Model exe = program(square)) {
      assertArrayEquals(new float[] {10f, 5f}, runtime.run(exe, Argument.of(List.of(HostTensor.ofFloats(new float[] {3f, -2f}, 2)))).get(0).toFloatArray(), 0f);
    }
  }

  @Test
  void aCallbackThatThrowsWhereItIsServedAbortsTheRunNamingItAndTheNode() throws Exception {
    HostCallback boom = new HostCallback("boom-served", List.of(TensorType.of(DType.F32, 1)), null, (in, s) -> {
      throw new IllegalStateException("no model loaded");
    });
    remote.serve(boom);
    remote.awaitServers("boom-served", 1).toCompletableFuture().get(10, TimeUnit.SECONDS);
    try (Model exe = program(boom)) {
      CallbackException e = failure(exe, HostTensor.vector(1f));
      assertEquals(ErrorCode.ABORTED, e.code());
      assertEquals("boom-served", e.callbackName());
      assertTrue(e.getMessage().startsWith("callback 'boom-served' threw java.lang.IllegalStateException: no model loaded (on node pekko://"),
          e.getMessage());
    }
  }

  @Test
  void aWrongResultWhereItIsServedIsAnInvalidArgument() throws Exception {
    TensorType f32x2 = TensorType.of(DType.F32, 2);
    HostCallback wrong = new HostCallback("wrong-served", List.of(f32x2), null, (in, s) -> List.of(HostTensor.vector(1f, 2f, 3f)));
    remote.serve(wrong);
    remote.awaitServers("wrong-served", 1).toCompletableFuture().get(10, TimeUnit.SECONDS);
    try (Model exe = program(wrong)) {
      CallbackException e = failure(exe, HostTensor.vector(1f, 2f));
      assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
      assertTrue(e.getMessage().startsWith("callback 'wrong-served' returned [f32[3]], expected [f32[2]]"), e.getMessage());
    }
  }

  @Test
  void withNoNodeServingItTheCallFailsAtOnceWithUnavailable() throws Exception {
    HostCallback nobody = new HostCallback("nobody-serves", List.of(TensorType.of(DType.F32, 1)), null, (in, s) -> in);
    try (Model exe = program(nobody)) {
      long t0 = System.nanoTime();
      CallbackException e = failure(exe, HostTensor.vector(1f));
      assertEquals(ErrorCode.UNAVAILABLE, e.code());
      assertEquals("callback 'nobody-serves': no reachable node serves it (service key 'xla-callback:nobody-serves')", e.getMessage());
      assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(2), "at once, not at the callback timeout");
    }
  }

  @Test
  void theServerStoppingDuringACallFailsTheRunWithUnavailable() throws Exception {
    TensorType f32x1 = TensorType.of(DType.F32, 1);
    CountDownLatch called = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    HostCallback stuck = new HostCallback("stuck-served", List.of(f32x1), null, (in, s) -> {
      called.countDown();
      release.await(20, TimeUnit.SECONDS);
      return in;
    });
    ActorRef<RemoteCallbackServer.Request> server = testKit.spawn(RemoteCallbackServer.create(
        remote.settings(), stuck.name(), stuck.outputTemplate(), null, stuck.function()));
    remote.awaitServers("stuck-served", 1).toCompletableFuture().get(10, TimeUnit.SECONDS);
    try (Model exe = program(stuck)) {
      RunHandle run = runtime.start(exe, Argument.of(List.of(HostTensor.vector(1f))));
      assertTrue(called.await(10, TimeUnit.SECONDS));
      testKit.stop(server);
      ExecutionException e = assertThrows(ExecutionException.class, () -> run.result().toCompletableFuture().get(10, TimeUnit.SECONDS));
      CallbackException cause = (CallbackException) e.getCause();
      assertEquals(ErrorCode.UNAVAILABLE, cause.code());
      assertTrue(cause.getMessage().startsWith("callback 'stuck-served': the actor serving it on node pekko://"), cause.getMessage());
    } finally {
      release.countDown();
    }
  }

  @Test
  void aServedCallbackThatIsTooSlowTimesOutAsALocalOneDoes() throws Exception {
    TensorType f32x1 = TensorType.of(DType.F32, 1);
    HostCallback slow = new HostCallback("slow-served", List.of(f32x1), null, (in, s) -> {
      Thread.sleep(3_000);
      return in;
    });
    remote.serve(slow);
    remote.awaitServers("slow-served", 1).toCompletableFuture().get(10, TimeUnit.SECONDS);
    try (Model exe = program(slow)) {
      CallbackException e = failure(exe, HostTensor.vector(1f));
      assertEquals(ErrorCode.DEADLINE_EXCEEDED, e.code());
      assertEquals("callback 'slow-served' did not answer within 300ms (xla-actors.actors.callbacks.timeouts.slow-served)",
          e.getMessage());
    }
  }

  @Test
  void inputsLargerThanAFrameAreRefusedBeforeSending() throws Exception {
    TensorType big = TensorType.of(DType.F32, 16384);
    HostCallback echo = new HostCallback("big-served", List.of(big), null, (in, s) -> in);
    remote.serve(echo);
    remote.awaitServers("big-served", 1).toCompletableFuture().get(10, TimeUnit.SECONDS);
    try (Model exe = program(echo)) {
      CallbackException e = failure(exe, HostTensor.zeros(big));
      assertEquals(ErrorCode.RESOURCE_EXHAUSTED, e.code());
      assertEquals("callback 'big-served': its inputs take 65536 bytes, more than a message between nodes may carry "
          + "(32768 bytes, pekko.remote.artery.advanced.maximum-frame-size)", e.getMessage());
    }
  }
}
