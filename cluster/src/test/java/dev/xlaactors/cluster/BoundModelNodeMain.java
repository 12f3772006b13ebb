package dev.xlaactors.cluster;

import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.SegmentationOptions;
import dev.xlaactors.graph.SegmentedProgram;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Model;
import dev.xlaactors.runtime.model.SafeTensors;
import dev.xlaactors.runtime.model.SegmentedModel;
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
 * time it is needed, segmented model "dense-relu" (relu(x . w + b), relu a Java callback between the
 * stage and the output) from the same file, and model "broken" whose file does not exist. Arguments: node name, the seed's port,
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
    Supplier<SegmentedModel> denseRelu = () -> loadSegmented(client, weights, node);
    return ModelCatalog.of(Map.of("twice-plus-one", TestNodes.twicePlusOne()), Map.of("dense", dense, "broken", broken),
        Map.of("dense-relu", denseRelu));
  }

  /** relu(v) in Java: the host callback between the two stages of "dense-relu". */
  static final HostCallback RELU = new HostCallback("cluster_relu", List.of(TensorType.of(DType.F32, 1, D)), null, (in, s) -> {
    float[] v = in.get(0).toFloatArray();
    for (int i = 0; i < v.length; i++) {
      v[i] = Math.max(0, v[i]);
    }
    return List.of(HostTensor.ofFloats(v, 1, D));
  });

  /** Segmented model "dense-relu": relu(x . w + b), relu a Java callback after the stage, w and b bound. */
  static SegmentedModel loadSegmented(XlaClient client, Path weights, String node) {
    GraphBuilder b = new GraphBuilder("dense_relu");
    Value w = b.parameter(TensorType.of(DType.F32, D, D));
    Value bias = b.parameter(TensorType.of(DType.F32, 1, D));
    Value x = b.parameter(TensorType.of(DType.F32, 1, D));
    Graph graph = b.build(b.hostCall(RELU, b.add(b.matmul(x, w), bias)).get(0));
    SegmentedProgram program = new SegmentedProgram(graph.segment(SegmentationOptions.defaults()),
        SegmentedProgram.Placement.on(client));
    try (SafeTensors file = SafeTensors.open(weights)) {
      SegmentedModel model = SegmentedModel.load(program, List.of("w", "b", "x"),
          Map.of("w", file.tensor("w"), "b", file.tensor("b")), client.devices().get(0));
      System.out.println("LOADED dense-relu on " + node);
      System.out.flush();
      return model;
    } catch (RuntimeException e) {
      program.close();
      throw e;
    }
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
