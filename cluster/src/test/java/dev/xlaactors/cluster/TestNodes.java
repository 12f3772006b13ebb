package dev.xlaactors.cluster;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.List;

/** Configuration and callbacks shared by the parent test JVM and the child nodes of the cluster tests. */
final class TestNodes {
  private TestNodes() {}

  static final TensorType F32X3 = TensorType.of(DType.F32, 3);

  /**
   * y = 3x + 1. A first element below zero stands for a long call: the node prints {@code CALLED} and
   * sleeps a minute, so the test can kill it in the middle of the call.
   */
  static HostCallback affine(String node) {
    return new HostCallback("affine-remote", List.of(F32X3), null, (in, s) -> {
      float[] x = in.get(0).toFloatArray();
      if (x[0] < 0) {
        // The child's protocol to the test harness, not logging: the harness waits for this line.
        System.out.println("CALLED affine-remote on " + node);
        System.out.flush();
        try {
          Thread.sleep(60_000);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      float[] y = new float[x.length];
      for (int i = 0; i < x.length; i++) {
        y[i] = 3 * x[i] + 1;
      }
      return List.of(HostTensor.ofFloats(y, y.length));
    });
  }

  /** A free TCP port on the loopback interface, chosen now. */
  static int freePort() {
    try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * A node on loopback joining the seed at {@code seedPort}: quick failure detection (a killed node is
   * unreachable within about three seconds) and the split brain resolver, so the survivors remove it.
   */
  static Config config(int seedPort, int port, String role) {
    return ConfigFactory.parseString("""
            xla-actors.cluster {
              seed-nodes = ["127.0.0.1:%d"]
              hostname = "127.0.0.1"
              port = %d
              roles = [%s]
            }
            xla-actors.actors.callbacks.default-timeout = 20s
            xla-actors.actors.metrics.log = off
            pekko.actor.allow-java-serialization = off
            pekko.cluster.failure-detector {
              heartbeat-interval = 200ms
              acceptable-heartbeat-pause = 2s
            }
            pekko.cluster.downing-provider-class = "org.apache.pekko.cluster.sbr.SplitBrainResolverProvider"
            pekko.cluster.split-brain-resolver.stable-after = 3s
            pekko.cluster.jmx.enabled = off
            pekko.coordinated-shutdown.run-by-jvm-shutdown-hook = off
            """.formatted(seedPort, port, role))
        .withFallback(ConfigFactory.load());
  }
}
