package dev.xlaactors.bench;

import com.typesafe.config.ConfigFactory;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.RunMode;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.SegmentedProgram;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.BoundProgram;
import dev.xlaactors.runtime.model.SegmentedModel;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * Fused (Phase 1) against segmented (Phase 2) on the CPU plugin, through one {@link CallbackRuntime}: a
 * program making K callbacks in sequence and an MLP with one callback in the middle, with the time of one
 * tiny execute (f32[8] add on device buffers) measured in the same run. Each measurement is repeated
 * {@value #REPEATS} times; prints {@code SEG} lines (min/median/max of the repetitions' medians) that
 * bench/run.sh tabulates.
 */
public final class SegmentedBench {
  private static final int K = 32;
  private static final int REPEATS = 5;
  private static final LatencyProbe.Budget BUDGET = new LatencyProbe.Budget(50, 2_000, 1.5);
  private static final LatencyProbe.Budget TINY = new LatencyProbe.Budget(2_000, 20_000, 1.0);
  private static final TensorType F8 = TensorType.of(DType.F32, 8);

  private SegmentedBench() {}

  public static void main(String[] args) throws Exception {
    HostCallback identity = new HostCallback("bench-identity", List.of(F8), null, (in, s) -> List.of(in.get(0)));
    TensorType hidden = TensorType.of(DType.F32, 64, 256);
    HostCallback relu = new HostCallback("bench-relu", List.of(hidden), null, (in, s) -> {
      float[] v = in.get(0).toFloatArray();
      for (int i = 0; i < v.length; i++) {
        v[i] = Math.max(0, v[i]);
      }
      return List.of(HostTensor.ofFloats(v, 64, 256));
    });
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "segmented-bench",
        ConfigFactory.parseString("xla-actors.actors.metrics.log = off").withFallback(ConfigFactory.load()).resolve());
    try (XlaClient client = XlaClient.create(); CallbackRuntime callbacks = CallbackRuntime.create(system, client)) {
      callbacks.registerAll(List.of(identity, relu)).toCompletableFuture().join();

      // K callbacks in sequence, an add between two.
      GraphBuilder kb = new GraphBuilder("k_callbacks");
      Value x = kb.parameter(F8);
      for (int i = 0; i < K; i++) {
        x = kb.hostCall(identity, kb.add(x, kb.constant(1f))).get(0);
      }
      Graph chain = kb.build(kb.add(x, kb.constant(1f)));
      List<HostTensor> chainIn = List.of(HostTensor.ofFloats(new float[8]));

      // MLP 64x256 -> 256 -> (relu in Java) -> 10.
      Random r = new Random(1);
      GraphBuilder mb = new GraphBuilder("mlp_callback");
      Value in = mb.parameter(DType.F32, 64, 256);
      Value w1 = mb.parameter(DType.F32, 256, 256);
      Value w2 = mb.parameter(DType.F32, 256, 10);
      Value h = mb.hostCall(relu, mb.matmul(in, w1)).get(0);
      Graph mlp = mb.build(mb.matmul(h, w2));
      List<HostTensor> mlpIn = List.of(random(r, 64, 256), random(r, 256, 256), random(r, 256, 10));

      // Equal outputs before timing anything.
      check(callbacks, chain, chainIn);
      check(callbacks, mlp, mlpIn);

      // What a run moves does not depend on who answers its host calls: count it once, directly.
      List<Argument> chainArgs = Argument.of(chainIn);
      List<Argument> mlpArgs = Argument.of(mlpIn);
      SegmentedProgram.RunStats chainStats;
      SegmentedProgram.RunStats mlpStats;
      double[] execute = new double[REPEATS];
      double[] chainFused = new double[REPEATS];
      double[] chainSeg = new double[REPEATS];
      double[] mlpFused = new double[REPEATS];
      double[] mlpSeg = new double[REPEATS];
      try (Executable add = client.compile("""
              func.func @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
                %0 = stablehlo.add %a, %b : tensor<8xf32>
                return %0 : tensor<8xf32>
              }""");
          BoundProgram chainExe = callbacks.compile(chain, RunMode.FUSED);
          BoundProgram mlpExe = callbacks.compile(mlp, RunMode.FUSED);
          SegmentedModel chainSegmented = (SegmentedModel) callbacks.compile(chain, RunMode.SEGMENTED);
          SegmentedModel mlpSegmented = (SegmentedModel) callbacks.compile(mlp, RunMode.SEGMENTED);
          DeviceBuffer a = client.upload(HostTensor.ofFloats(new float[8]));
          DeviceBuffer b = client.upload(HostTensor.ofFloats(new float[8]))) {
        chainStats = chainSegmented.run(chainArgs, SegmentedProgram.HostCallInvoker.direct()).stats();
        mlpStats = mlpSegmented.run(mlpArgs, SegmentedProgram.HostCallInvoker.direct()).stats();
        System.out.printf(Locale.ROOT, "INFO k_callbacks: K=%d stages=%d host_calls=%d bytes_to_host=%d bytes_to_device=%d%n",
            K, chainSegmented.program().graph().stages().size(), chainStats.hostCalls(), chainStats.bytesToHost(),
            chainStats.bytesToDevice());
        System.out.printf(Locale.ROOT, "INFO mlp_callback: stages=%d host_calls=%d bytes_to_host=%d bytes_to_device=%d%n",
            mlpSegmented.program().graph().stages().size(), mlpStats.hostCalls(), mlpStats.bytesToHost(),
            mlpStats.bytesToDevice());
        for (int rep = 0; rep < REPEATS; rep++) {
          execute[rep] = LatencyProbe.measure("execute", 0, 1, TINY, () -> add.execute(a, b).forEach(DeviceBuffer::close))
              .medianMicros();
          chainFused[rep] = LatencyProbe.measure("k_fused", 0, 1, BUDGET, () -> callbacks.run(chainExe, chainArgs))
              .medianMicros() / K;
          chainSeg[rep] = LatencyProbe.measure("k_segmented", 0, 1, BUDGET,
              () -> callbacks.run(chainSegmented, chainArgs)).medianMicros() / K;
          mlpFused[rep] = LatencyProbe.measure("mlp_fused", 0, 1, BUDGET, () -> callbacks.run(mlpExe, mlpArgs))
              .medianMicros();
          mlpSeg[rep] = LatencyProbe.measure("mlp_segmented", 0, 1, BUDGET,
              () -> callbacks.run(mlpSegmented, mlpArgs)).medianMicros();
        }
      }
      line("execute_f32x8_add", execute, 0);
      line("k_callbacks_fused_per_callback", chainFused, 0);
      line("k_callbacks_segmented_per_callback", chainSeg, chainStats.bytesToHost() + chainStats.bytesToDevice());
      line("mlp_fused_run", mlpFused, 0);
      line("mlp_segmented_run", mlpSeg, mlpStats.bytesToHost() + mlpStats.bytesToDevice());
      double fusedUs = median(chainFused);
      double segmentedUs = median(chainSeg);
      double executeUs = median(execute);
      System.out.printf(Locale.ROOT, "RESULT segmented fused_us=%.3f segmented_us=%.3f execute_us=%.3f boundary_ratio=%.3f%n",
          fusedUs, segmentedUs, executeUs, (segmentedUs - fusedUs) / executeUs);
    } finally {
      system.terminate();
    }
  }

  private static void check(CallbackRuntime callbacks, Graph g, List<HostTensor> inputs) {
    List<HostTensor> fused;
    List<HostTensor> segmented;
    try (BoundProgram f = callbacks.compile(g, RunMode.FUSED); BoundProgram s = callbacks.compile(g, RunMode.SEGMENTED)) {
      fused = callbacks.run(f, Argument.of(inputs));
      segmented = callbacks.run(s, Argument.of(inputs));
    }
    float[] f = fused.get(0).toFloatArray();
    float[] s = segmented.get(0).toFloatArray();
    for (int i = 0; i < f.length; i++) {
      if (Math.abs(f[i] - s[i]) > 1e-4 * Math.max(1, Math.abs(f[i]))) {
        throw new AssertionError(g.name() + ": fused and segmented differ at " + i + ": " + f[i] + " vs " + s[i]);
      }
    }
  }

  private static HostTensor random(Random r, long rows, long cols) {
    float[] v = new float[(int) (rows * cols)];
    for (int i = 0; i < v.length; i++) {
      v[i] = (float) r.nextGaussian() * 0.1f;
    }
    return HostTensor.ofFloats(v, rows, cols);
  }

  private static void line(String name, double[] values, long bytesMoved) {
    double[] s = values.clone();
    Arrays.sort(s);
    System.out.printf(Locale.ROOT, "SEG name=%s min_us=%.3f median_us=%.3f max_us=%.3f repeats=%d bytes_moved=%d%n",
        name, s[0], median(values), s[s.length - 1], s.length, bytesMoved);
  }

  private static double median(double[] values) {
    double[] s = values.clone();
    Arrays.sort(s);
    return s[s.length / 2];
  }
}
