package dev.xlaactors.examples;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.graph.Composites;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
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
 * The quick start: a small network built in Java, compiled by the real XLA CPU runtime, that calls back
 * into Java in the middle of its execution. XLA computes {@code h = tanh(x @ w)}, hands {@code h} to a
 * Java function (served by the CallbackDispatcher actor) that zeroes entries below a threshold given as
 * the callback's static argument, and then computes {@code softmax(h' * 4)}.
 */
public final class Quickstart {
  private Quickstart() {}

  public static void main(String[] args) {
    new ExampleArgs("examples/run.sh quickstart (no arguments)", args, 0);
    TensorType hidden = TensorType.of(DType.F32, 2, 3);
    // HostCallback.of: the static argument (the threshold) reaches the function as a Float.
    HostCallback threshold =
        HostCallback.of("threshold", List.of(hidden), 0.2f, (inputs, limit) -> {
          HostTensor before = inputs.get(0);
          System.out.println("  [java] callback on thread " + Thread.currentThread().getName());
          System.out.println(rows("  [java] got h = ", before));
          float[] h = before.toFloatArray();
          for (int i = 0; i < h.length; i++) {
            h[i] = h[i] < limit ? 0f : h[i];
          }
          HostTensor after = HostTensor.ofFloats(h, 2, 3);
          System.out.println(rows("  [java] returns (entries below " + limit + " zeroed) = ", after));
          return List.of(after);
        });

    GraphBuilder b = new GraphBuilder("quickstart");
    Value x = b.parameter(TensorType.of(DType.F32, 2, 4));
    Value w = b.parameter(TensorType.of(DType.F32, 4, 3));
    Value h = b.tanh(b.matmul(x, w));
    Value kept = b.hostCall(threshold, h).get(0); // Java runs here, mid-program
    Value probabilities = Composites.softmax(b, b.multiply(kept, b.constant(4f)), -1);
    Graph graph = b.build(probabilities);

    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "quickstart");
    try (XlaClient client = XlaClient.create();
        CallbackRuntime callbacks = CallbackRuntime.create(system, client);
        BoundProgram program = callbacks.compile(graph)) {
      System.out.println("client:  " + client);
      System.out.println("program: " + graph);
      System.out.println("StableHLO that XLA compiled:");
      System.out.println(graph.stablehlo().strip().indent(2));
      callbacks.registerAll(graph.hostCallbacks()).toCompletableFuture().join();
      HostTensor xs = HostTensor.ofFloats(new float[] {1, 0, 0, 1, 0, 1, 1, 0}, 2, 4);
      HostTensor ws = HostTensor.ofFloats(new float[] {0.5f, -0.3f, 0.1f, 0.2f, 0.4f, -0.6f, 0.3f, 0.1f, 0.9f, -0.2f, 0.5f, 0.05f}, 4, 3);
      System.out.println(rows("x = ", xs));
      System.out.println(rows("w = ", ws));
      List<HostTensor> out = callbacks.run(program, Argument.of(List.of(xs, ws)));
      System.out.println(rows("softmax(4 h') = ", out.get(0)));
      System.out.println("metrics: " + callbacks.metrics());
    } finally {
      system.terminate();
    }
  }

  /** {@code label} and a 2-D f32 tensor as rows, one per line, aligned under the first. */
  private static String rows(String label, HostTensor t) {
    long[] dims = t.type().shape().dims();
    float[] v = t.toFloatArray();
    int columns = dims.length == 2 ? (int) dims[1] : v.length;
    StringBuilder sb = new StringBuilder(label);
    for (int r = 0; r * columns < v.length; r++) {
      sb.append(r == 0 ? "" : "\n" + " ".repeat(label.length())).append(Arrays.toString(Arrays.copyOfRange(v, r * columns, (r + 1) * columns)));
    }
    return sb.toString();
  }
}
