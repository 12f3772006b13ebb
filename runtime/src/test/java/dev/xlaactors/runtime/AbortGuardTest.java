package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import static dev.xlaactors.nativebridge.pjrt.global.Pjrt.*;

import dev.xlaactors.nativebridge.pjrt.PJRT_Client_BufferFromHostBuffer_Args;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.Pointer;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Inputs that abort the process inside the plugin are unreachable through the public API. Each case
 * runs in a child JVM: the raw binding shows that the trap is real (the child dies), and the public
 * API, given the same kind of bad input, answers with exceptions and lets the child exit normally.
 */
class AbortGuardTest {
  /** Entry point of the child JVM. */
  public static void main(String[] args) {
    switch (args[0]) {
      case "raw-invalid-dtype" -> rawInvalidDtype();
      case "public-api" -> publicApiSurvivesBadInput();
      default -> throw new IllegalArgumentException(args[0]);
    }
  }

  @Test
  void theRawBindingReallyAbortsOnAnInvalidDtype() throws Exception {
    ChildJvm.Result result = ChildJvm.run(AbortGuardTest.class, List.of(), "raw-invalid-dtype");
    assertNotEquals(0, result.exitCode(), "the plugin should have aborted the child:\n" + result.output());
    assertTrue(!result.output().contains("RETURNED"), result.output());
  }

  @Test
  void thePublicApiTurnsEveryBadInputIntoAnException() throws Exception {
    ChildJvm.Result result = ChildJvm.run(AbortGuardTest.class, List.of(), "public-api");
    assertEquals(0, result.exitCode(), result.output());
    assertTrue(result.output().contains("refused 6 bad inputs"), result.output());
  }

  private static void rawInvalidDtype() {
    try (XlaClient client = XlaClient.create()) {
      ByteBuffer data = ByteBuffer.allocateDirect(16);
      try (PJRT_Client_BufferFromHostBuffer_Args args = new PJRT_Client_BufferFromHostBuffer_Args();
          LongPointer dims = new LongPointer(1)) {
        dims.put(0, 4);
        args.struct_size(PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE)
            .client(client.pointer())
            .data(new Pointer(data))
            .type(PJRT_Buffer_Type_INVALID)
            .dims(dims)
            .num_dims(1)
            .host_buffer_semantics(PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes)
            .device(client.devices().get(0).pointer());
        client.api().clientBufferFromHostBuffer.call(args);
      }
      System.out.println("RETURNED");
    }
  }

  private static void publicApiSurvivesBadInput() {
    int refused = 0;
    try (XlaClient client = XlaClient.create()) {
      List<Runnable> badInputs = new ArrayList<>();
      badInputs.add(() -> DType.fromPjrtType(0));
      badInputs.add(() -> DType.fromMlirName("f8E4M3FN"));
      badInputs.add(() -> client.compile("func.func @main(%a: tensor<2xf8E4M3FN>) -> tensor<2xf8E4M3FN> { return %a : tensor<2xf8E4M3FN> }"));
      badInputs.add(() -> new CompileOptions(0, 1));
      badInputs.add(() -> client.compile("not a program"));
      badInputs.add(
          () -> {
            DeviceBuffer b = client.upload(HostTensor.ofFloats(new float[] {1}));
            b.close();
            b.toHost();
          });
      for (Runnable bad : badInputs) {
        try {
          bad.run();
          System.out.println("NOT REFUSED");
        } catch (RuntimeException expected) {
          refused++;
        }
      }
    }
    System.out.println("refused " + refused + " bad inputs");
  }

}
