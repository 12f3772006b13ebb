package dev.xlaactors.cluster;

import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Model;
import dev.xlaactors.runtime.model.SafeTensors;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;

/**
 * A child JVM of {@link ShardedBoundModelClusterTest}: a node with role {@code compute} whose catalog
 * binds model "dense" (y = x . w + b) from the safetensors file given, loaded once on this node the first
 * time it is needed, and model "broken" whose file does not exist. Arguments: node name, the seed's port,
 * the weights file. Prints {@code READY <address>} once Up, {@code LOADING <file>} when it starts loading
 * a model and {@code LOADED dense ...} when it has loaded it; answers each {@code STATS} line on its
 * standard input with {@code STATS <uploads> <bytes>} (this node's client upload counters); exits when
 * its standard input closes.
 */
public final class BoundModelNodeMain {
  static final int D = 512;
  /** y = x . w + b with w [512, 512] and b [1, 512] bound, x [1, 512] the per-request input. */
  static final String DENSE = """
      func.func @main(%w: tensor<512x512xf32>, %b: tensor<1x512xf32>, %x: tensor<1x512xf32>) -> tensor<1x512xf32> {
        %h = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<1x512xf32>, tensor<512x512xf32>) -> tensor<1x512xf32>
        %y = stablehlo.add %h, %b : tensor<1x512xf32>
        return %y : tensor<1x512xf32>
      }
      """;

  private BoundModelNodeMain() {}

  /** The catalog every node of the test has; the suppliers run only where an entity of the model starts. */
  static ModelCatalog catalog(XlaClient client, Path weights, String node) {
    Supplier<Model> dense = () -> load(client, weights, node);
    Supplier<Model> broken = () -> load(client, weights.resolveSibling("missing.safetensors"), node);
    return ModelCatalog.of(Map.of("twice-plus-one", TestNodes.twicePlusOne()), Map.of("dense", dense, "broken", broken));
  }

  static Model load(XlaClient client, Path weights, String node) {
    System.out.println("LOADING " + weights.getFileName() + " on " + node);
    System.out.flush();
    try (SafeTensors file = SafeTensors.open(weights); Executable exe = client.compile(DENSE)) {
      Model model = Model.load(exe, List.of("w", "b", "x"), Map.of("w", file.tensor("w"), "b", file.tensor("b")),
          client.devices().get(0));
      // The child's protocol to the test harness: the test counts these lines.
      System.out.println("LOADED dense on " + node + " uploads " + client.uploadCount() + " bytes " + client.uploadedBytes());
      System.out.flush();
      return model;
    }
  }

  public static void main(String[] args) throws Exception {
    String node = args[0];
    int seedPort = Integer.parseInt(args[1]);
    Path weights = Path.of(args[2]);
    ActorSystem<Void> system = XlaCluster.start(TestNodes.config(seedPort, 0, "compute"));
    XlaClient client = XlaClient.create();
    ShardedComputations.init(system, "compute", client, null, catalog(client, weights, node));
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (Cluster.get(system).selfMember().status() != MemberStatus.up()) {
      if (System.nanoTime() > deadline) {
        System.out.println("NOT UP after 60 s");
        System.exit(2);
      }
      Thread.sleep(50);
    }
    System.out.println("READY " + XlaCluster.selfAddress(system));
    System.out.flush();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line = in.readLine(); line != null; line = in.readLine()) {
      if (line.equals("STATS")) {
        System.out.println("STATS " + client.uploadCount() + " " + client.uploadedBytes());
        System.out.flush();
      }
    }
    System.exit(0);
  }
}
