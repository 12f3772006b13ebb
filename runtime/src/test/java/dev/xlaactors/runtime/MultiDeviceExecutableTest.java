package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * An executable compiled for several devices at once (CompileOptions with 2 replicas) cannot be run one
 * device at a time: its all_reduce waited for the other replica, and after 40 s the CPU plugin aborted
 * the process ("Termination timeout for `all reduce RendezvousKey...` exceeded", exit 134). Now every run
 * of such an executable is refused before it reaches the plugin. Run in a child JVM, so that a regression
 * kills only the child.
 */
class MultiDeviceExecutableTest {
  private static final String ALL_REDUCE = String.join("\n",
      "func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {",
      "  %y = \"stablehlo.all_reduce\"(%x) ({",
      "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):",
      "    %s = stablehlo.add %a, %b : tensor<f32>",
      "    stablehlo.return %s : tensor<f32>",
      "  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>",
      "  return %y : tensor<4xf32>",
      "}");

  /** The child: every way to run the two-replica executable, each refused; then a portable one runs. */
  public static void main(String[] args) {
    try (XlaClient client = XlaClient.create();
        Executable twoReplicas = client.compile(ALL_REDUCE, new CompileOptions(2, 1));
        DeviceBuffer x = client.upload(HostTensor.ofFloats(new float[] {1, 2, 3, 4}))) {
      List<Runnable> runs = List.of(
          () -> twoReplicas.run(HostTensor.ofFloats(new float[4])),
          () -> twoReplicas.execute(x),
          () -> twoReplicas.execute(dev.xlaactors.runtime.model.Argument.of(x)));
      for (Runnable run : runs) {
        try {
          run.run();
          System.out.println("RAN");
        } catch (InvalidArgumentException e) {
          System.out.println("REFUSED " + e.getMessage());
        }
      }
      try (Executable portable = client.compile(ALL_REDUCE)) {
        System.out.println("PORTABLE " + java.util.Arrays.toString(portable.run(HostTensor.ofFloats(new float[] {1, 2, 3, 4})).get(0).toFloatArray()));
      }
    }
  }

  @Test
  void anExecutableForTwoReplicasIsRefusedInsteadOfAbortingTheProcess() throws Exception {
    ChildJvm.Result result = ChildJvm.run(MultiDeviceExecutableTest.class, List.of());
    assertEquals(0, result.exitCode(), result.output());
    List<String> refused = result.output().lines().filter(l -> l.startsWith("REFUSED ")).toList();
    assertEquals(3, refused.size(), result.output());
    for (String line : refused) {
      assertTrue(line.contains("compiled for 2 devices at once") && line.contains("CompileOptions.defaults()"), line);
    }
    // The same program compiled for one device still runs.
    assertTrue(result.output().contains("PORTABLE ["), result.output());
  }
}
