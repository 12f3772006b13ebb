package com.example;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.BoundProgram;
import java.util.Arrays;
import java.util.List;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * Uses xla-actors from the installed artifacts: a StableHLO program, then a graph whose middle step is a
 * Java callback. Exits 1 if a value is wrong.
 */
public final class Main {
  private Main() {}

  public static void main(String[] args) {
    float[] sum;
    float[] clipped;
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "standalone");
    try (XlaClient client = XlaClient.create();
         CallbackRuntime callbacks = CallbackRuntime.create(system, client)) {
      try (Executable add = client.compile("""
          func.func @main(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
            %0 = stablehlo.add %a, %b : tensor<3xf32>
            return %0 : tensor<3xf32>
          }""")) {
        sum = add.run(HostTensor.vector(1f, 2f, 3f), HostTensor.vector(10f, 20f, 30f)).get(0).toFloatArray();
      }

      HostCallback clip = HostCallback.of("clip", List.of(TensorType.of(DType.F32, 3)), 2.5f, (in, limit) -> {
        float[] v = in.get(0).toFloatArray();
        for (int i = 0; i < v.length; i++) {
          v[i] = Math.min(v[i], limit);
        }
        return List.of(HostTensor.vector(v));
      });
      GraphBuilder b = new GraphBuilder("clip_in_java");
      Value x = b.parameter(TensorType.of(DType.F32, 3));
      Graph graph = b.build(b.add(b.hostCall(clip, b.multiply(x, b.constant(2f))).get(0), b.constant(1f)));
      callbacks.registerAll(graph.hostCallbacks()).toCompletableFuture().join();
      try (BoundProgram program = callbacks.compile(graph)) {
        clipped = callbacks.run(program, Argument.of(List.of(HostTensor.vector(0.5f, 1f, 3f)))).get(0).toFloatArray();
      }
    } finally {
      system.terminate();
    }
    System.out.println("program: " + Arrays.toString(sum));
    System.out.println("callback: " + Arrays.toString(clipped));
    boolean right = Arrays.equals(sum, new float[] {11f, 22f, 33f}) && Arrays.equals(clipped, new float[] {2f, 3f, 3.5f});
    System.out.println(right ? "standalone sample: OK" : "standalone sample: WRONG VALUES");
    if (!right) {
      System.exit(1);
    }
  }
}
