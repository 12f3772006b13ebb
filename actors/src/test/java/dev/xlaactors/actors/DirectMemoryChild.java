package dev.xlaactors.actors;

import com.typesafe.config.ConfigFactory;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * The child JVM of {@link DirectMemoryTest}, started with {@code -XX:MaxDirectMemorySize=64m}: runs whose
 * outputs or callback inputs need more direct memory than that, then runs that fit. Prints one line per
 * outcome ({@code BIG-OUTPUT}, {@code BIG-INPUT}, {@code SMALL}, {@code RUNS}) and {@code DONE}; Pekko's
 * default {@code jvm-exit-on-fatal-error = on} stays on, so an Error that reaches Pekko ends the JVM.
 */
public final class DirectMemoryChild {
  private DirectMemoryChild() {}

  public static void main(String[] args) throws Exception {
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "direct-memory", ConfigFactory.parseString("""
        xla-actors.actors.callbacks.default-timeout = 60s
        xla-actors.actors.runs.timeout = 120s
        """).withFallback(ConfigFactory.load()));
    try (XlaClient client = XlaClient.create(); CallbackRuntime callbacks = CallbackRuntime.create(system, client)) {
      // 96 MiB of output from a scalar: more than the whole 64 MiB limit.
      long big = 24L << 20;
      Model wide = Model.compile(client, Programs.lines(
          "func.func @main(%x: tensor<f32>) -> tensor<" + big + "xf32> {",
          "  %y = stablehlo.broadcast_in_dim %x, dims = [] : (tensor<f32>) -> tensor<" + big + "xf32>",
          "  return %y : tensor<" + big + "xf32>",
          "}"));
      report("BIG-OUTPUT", () -> callbacks.start(wide, Argument.of(List.of(HostTensor.scalar(2f)))).result());
      // The same 96 MiB handed to a callback as its input.
      callbacks.register("sink", List.of(TensorType.of(DType.F32)), null,
          (in, s) -> List.of(HostTensor.scalar(in.get(0).toFloatArray()[0]))).toCompletableFuture().join();
      Model toCallback = Model.compile(client, Programs.lines(
          "func.func @main(%x: tensor<f32>) -> tensor<f32> {",
          "  %y = stablehlo.broadcast_in_dim %x, dims = [] : (tensor<f32>) -> tensor<" + big + "xf32>",
          "  " + Programs.call("%z", "sink", List.of("%y"), List.of("tensor<" + big + "xf32>"), List.of("tensor<f32>")),
          "  return %z : tensor<f32>",
          "}"));
      report("BIG-INPUT", () -> callbacks.start(toCallback, Argument.of(List.of(HostTensor.scalar(3f)))).result());
      // Runs that fit: 8 MiB outputs, closed as they come.
      long small = 2L << 20;
      Model fits = Model.compile(client, Programs.lines(
          "func.func @main(%x: tensor<f32>) -> tensor<" + small + "xf32> {",
          "  %y = stablehlo.broadcast_in_dim %x, dims = [] : (tensor<f32>) -> tensor<" + small + "xf32>",
          "  return %y : tensor<" + small + "xf32>",
          "}"));
      int ok = 0;
      for (int i = 0; i < 20; i++) {
        List<HostTensor> out = callbacks.start(fits, Argument.of(List.of(HostTensor.scalar((float) i)))).result()
            .toCompletableFuture().get(60, TimeUnit.SECONDS);
        float[] values = out.get(0).toFloatArray();
        if (values.length == small && values[0] == i && values[values.length - 1] == i) {
          ok++;
        }
        out.forEach(HostTensor::close);
      }
      System.out.println("SMALL " + ok);
      System.out.println("RUNS " + callbacks.metrics().runs().count() + " failed " + callbacks.metrics().runs().failures());
      wide.close();
      toCallback.close();
      fits.close();
    } finally {
      system.terminate();
    }
    System.out.println("DONE");
    System.exit(0);
  }

  private interface Start {
    java.util.concurrent.CompletionStage<List<HostTensor>> result();
  }

  private static void report(String what, Start run) {
    try {
      List<HostTensor> out = run.result().toCompletableFuture().get(60, TimeUnit.SECONDS);
      System.out.println(what + " SUCCEEDED " + out.get(0).type());
    } catch (java.util.concurrent.ExecutionException e) {
      Throwable cause = e.getCause();
      System.out.println(what + " FAILED " + cause.getClass().getName() + ": " + cause.getMessage().replace('\n', ' '));
    } catch (java.util.concurrent.TimeoutException e) {
      System.out.println(what + " HUNG");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
