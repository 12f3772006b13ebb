package dev.xlaactors.bench;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostFunction;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.RunContext;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * The Java half of {@code bench/run.sh weighted} (issue 25's 16 MiB-weight row): y = relu(x[1,2048] .
 * W[2048,2048]) with relu a Java host callback, each run from a host x to a host y, through the
 * supervised {@link CallbackRuntime}:
 *
 * <ul>
 *   <li>{@code weighted_hostonly}: W passed as a host tensor every run (what the runtime offered before
 *       bound parameters: W's 16 MiB are sent each run);
 *   <li>{@code weighted_bound}: a {@link Model} with W bound once, the run passes x only;
 *   <li>{@code weighted_bound_inline}: the same with relu registered inline (run on XLA's thread, as
 *       JAX runs pure_callback);
 *   <li>{@code weighted_bound_sink}: the bound Model's program with its call answered by a native sink on
 *       XLA's thread: no runtime, no hand-off, no actor (the floor of the supervised rows);
 *   <li>{@code matmul_bound}: the bare matmul as a Model with W bound, without the supervised layer.
 * </ul>
 *
 * Prints {@code BENCH side=java name=...} lines (see {@link LatencyProbe}); {@code bench/jax_weighted.py}
 * prints the JAX lines. Every path's output is checked against the others before timing.
 */
public final class WeightedCallbackBench {
  static final int D = 2048;
  static final TensorType ROW = TensorType.of(DType.F32, 1, D);

  static String program(String callback) {
    return """
        func.func @main(%w: tensor<2048x2048xf32>, %x: tensor<1x2048xf32>) -> tensor<1x2048xf32> {
          %h = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<1x2048xf32>, tensor<2048x2048xf32>) -> tensor<1x2048xf32>
          %y = stablehlo.custom_call @xla_actors.host_callback(%h) {api_version = 4 : i32,
                 backend_config = {callback = "NAME"}, has_side_effect = true} : (tensor<1x2048xf32>) -> tensor<1x2048xf32>
          return %y : tensor<1x2048xf32>
        }
        """.replace("NAME", callback);
  }

  static final String MATMUL = """
      func.func @main(%w: tensor<2048x2048xf32>, %x: tensor<1x2048xf32>) -> tensor<1x2048xf32> {
        %h = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<1x2048xf32>, tensor<2048x2048xf32>) -> tensor<1x2048xf32>
        return %h : tensor<1x2048xf32>
      }
      """;

  /** relu of the one input, into a new f32[1,2048]. */
  static final HostFunction RELU = (in, s) -> {
    FloatBuffer x = in.get(0).data().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
    float[] y = new float[D];
    for (int i = 0; i < D; i++) {
      y[i] = Math.max(0f, x.get(i));
    }
    return List.of(HostTensor.ofFloats(y, 1, D));
  };

  private WeightedCallbackBench() {}

  public static void main(String[] args) throws Exception {
    double seconds = Double.parseDouble(System.getenv().getOrDefault("BENCH_WEIGHTED_SECONDS", "6"));
    LatencyProbe.Budget budget = new LatencyProbe.Budget(300, 3_000, seconds);
    Random random = new Random(1);
    float[] w = new float[D * D];
    for (int i = 0; i < w.length; i++) {
      w[i] = (random.nextFloat() * 2 - 1) * 0.03f;
    }
    float[] xs = new float[D];
    for (int i = 0; i < D; i++) {
      xs[i] = random.nextFloat() * 2 - 1;
    }
    Config config = ConfigFactory.load();
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "weighted-bench", config);
    try (XlaClient client = XlaClient.create(); // loads the native library before the first tensor
        CallbackRuntime callbacks = CallbackRuntime.create(system, client);
        Executable weighted = client.compile(program("relu"));
        Executable weightedInline = client.compile(program("relu_inline"));
        Executable matmul = client.compile(MATMUL)) {
      HostTensor weights = HostTensor.ofFloats(w, D, D);
      HostTensor x = HostTensor.ofFloats(xs, 1, D);
      System.out.println("INFO side=java java=" + System.getProperty("java.version") + " plugin=" + client.platformName() + " "
          + client.platformVersion() + " cores=" + Runtime.getRuntime().availableProcessors());
      callbacks.register("relu", List.of(ROW), null, RELU).toCompletableFuture().join();
      callbacks.registerInline(new HostCallback("relu_inline", List.of(ROW), null, RELU)).toCompletableFuture().join();
      List<String> names = List.of("w", "x");
      try (Model bound = Model.load(weighted, names, Map.of("w", weights), client.devices().get(0));
          Model boundInline = Model.load(weightedInline, names, Map.of("w", weights), client.devices().get(0));
          Model bare = Model.load(matmul, names, Map.of("w", weights), client.devices().get(0));
          Model hostOnly = Model.of(weighted)) {
        List<Argument> weightsAndX = Argument.of(List.of(weights, x));
        List<Argument> xOnly = List.of(Argument.of(x));
        float[] expected = callbacks.run(hostOnly, weightsAndX).get(0).toFloatArray();
        check("bound", expected, callbacks.run(bound, xOnly).get(0).toFloatArray());
        check("bound inline", expected, callbacks.run(boundInline, xOnly).get(0).toFloatArray());
        float[] h = bare.run(xOnly, null).get(0).toFloatArray();
        for (int i = 0; i < D; i++) {
          h[i] = Math.max(0f, h[i]);
        }
        check("bare matmul", expected, h);
        long uploads = client.uploadCount();
        long supervised = callbacks.metrics().supervisedRuns();
        long runs = callbacks.metrics().runs().count();
        print(LatencyProbe.measure("weighted_bound", 0, budget, () -> callbacks.run(bound, xOnly).get(0).close()));
        long boundRuns = client.uploadCount() - uploads;
        // A run whose callback goes straight to its function spawns no supervisor actor (see
        // docs/performance.md, "Per-run cost of supervision"): say how many of the timed runs needed one.
        System.out.println("INFO side=java bound_runs=" + (callbacks.metrics().runs().count() - runs)
            + " bound_runs_with_a_supervisor_actor=" + (callbacks.metrics().supervisedRuns() - supervised));
        print(LatencyProbe.measure("weighted_bound_inline", 0, budget,
            () -> callbacks.run(boundInline, xOnly).get(0).close()));
        print(LatencyProbe.measure("matmul_bound", 0, budget, () -> bare.run(xOnly, null).get(0).close()));
        // The floor of the supervised rows: the same program and Model, its one call answered by a
        // native sink on XLA's thread, with no runtime, thread hand-off or actor at all.
        print(LatencyProbe.measure("weighted_bound_sink", 0, budget, () -> {
          try (RunContext context = RunContext.withHostCalls(client.plugin(), 0, WeightedCallbackBench::answerRelu,
              Duration.ofSeconds(30))) {
            bound.run(xOnly, context).get(0).close();
          }
        }));
        long before = client.uploadedBytes();
        print(LatencyProbe.measure("weighted_hostonly", 0, budget,
            () -> callbacks.run(hostOnly, weightsAndX).get(0).close()));
        System.out.println("INFO side=java bound_uploads_per_run=1 (x only: " + boundRuns + " uploads over the bound runs)"
            + " hostonly_uploaded_mib=" + (client.uploadedBytes() - before) / (1 << 20));
      }
    } finally {
      system.terminate();
      system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
    }
  }

  /** Answers a relu call on the calling (XLA) thread. */
  private static void answerRelu(HostCall call) {
    try {
      call.complete(RELU.apply(call.inputs(), null));
    } catch (Exception e) {
      call.fail(ErrorCode.INTERNAL, "relu failed: " + e);
    }
  }

  private static void print(LatencyProbe.Result r) {
    System.out.println(r.toBenchLine());
  }

  private static void check(String what, float[] expected, float[] got) {
    for (int i = 0; i < D; i++) {
      if (Math.abs(expected[i] - got[i]) > 1e-3f * Math.max(1f, Math.abs(expected[i]))) {
        throw new IllegalStateException(what + ": output " + i + " is " + got[i] + ", expected " + expected[i]);
      }
    }
  }
}
