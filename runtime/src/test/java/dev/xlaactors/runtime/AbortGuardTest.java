package dev.xlaactors.runtime;

import static dev.xlaactors.nativebridge.pjrt.global.Pjrt.*;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.ExecutionFailedException;
import dev.xlaactors.error.PluginException;
import dev.xlaactors.nativebridge.pjrt.PJRT_Api;
import dev.xlaactors.nativebridge.pjrt.PJRT_Client_BufferFromHostBuffer_Args;
import java.lang.reflect.Modifier;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.Pointer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Inputs that abort the process inside the plugin, or that crashed the hand-written JNI bridge this
 * binding replaced, are unreachable through the public API. Each case runs in a child JVM: the raw
 * binding shows that the plugin's trap is real (the child dies), and every other case shows the child
 * living on, with an exception that says what was wrong.
 */
class AbortGuardTest {
  private static final String CHILD_ALIVE = "CHILD ALIVE";

  /** Entry point of the child JVM. */
  public static void main(String[] args) throws Exception {
    switch (args[0]) {
      case "raw-invalid-dtype" -> rawInvalidDtype();
      case "public-api" -> publicApiSurvivesBadInput();
      case "huge-callback-input" -> hugeCallbackInput();
      case "null-failure-message" -> nullFailureMessage();
      case "throwing-sink-and-forged-tags" -> throwingSinkAndForgedTags();
      case "utf8-callback-name" -> utf8CallbackName();
      case "huge-output" -> hugeOutput();
      default -> throw new IllegalArgumentException(args[0]);
    }
    System.out.println(CHILD_ALIVE);
  }

  private static ChildJvm.Result child(String scenario, String... jvmOptions) throws Exception {
    return ChildJvm.run(AbortGuardTest.class, List.of(jvmOptions), scenario);
  }

  @Test
  void theRawBindingReallyAbortsOnAnInvalidDtype() throws Exception {
    ChildJvm.Result result = child("raw-invalid-dtype");
    assertNotEquals(0, result.exitCode(), "the plugin should have aborted the child:\n" + result.output());
    assertTrue(!result.output().contains("RETURNED"), result.output());
  }

  @Test
  void thePublicApiTurnsEveryBadInputIntoAnException() throws Exception {
    ChildJvm.Result result = child("public-api");
    assertEquals(0, result.exitCode(), result.output());
    assertTrue(result.output().contains("refused 6 bad inputs"), result.output());
  }

  /** Crash 1: a 4 GiB + 8 byte callback input overflowed an int in the old bridge (SIGSEGV). */
  @Test
  void aHostCallbackInputOverTwoGibibytesFailsTheRunWithAClearError() throws Exception {
    ChildJvm.Result result = child("huge-callback-input", "-Xmx512m");
    assertEquals(0, result.exitCode(), result.output());
    assertTrue(result.output().contains("REFUSED RESOURCE_EXHAUSTED"), result.output());
    assertTrue(result.output().contains("input 0 is f32[1073741826] (4294967304 bytes)"), result.output());
    assertTrue(result.output().contains("SINK CALLS 0"), result.output());
    assertTrue(result.output().contains(CHILD_ALIVE), result.output());
  }

  /** Sizes are 64-bit: a 2 GiB + 8 byte output lives on the device, and a download refuses it by name. */
  @Test
  void anOutputOverTwoGibibytesIsABufferAndItsDownloadSaysWhy() throws Exception {
    ChildJvm.Result result = child("huge-output", "-Xmx512m");
    assertEquals(0, result.exitCode(), result.output());
    assertTrue(result.output().contains("ON DEVICE 2147483656 BYTES"), result.output());
    assertTrue(result.output().contains("REFUSED tensors over 2 GiB are not supported, got 2147483656 bytes"), result.output());
    assertTrue(result.output().contains(CHILD_ALIVE), result.output());
  }

  /** Crash 2: HostCall.fail(code, null) dereferenced null in native code (SIGSEGV). */
  @Test
  void failingACallWithANullMessageFailsTheRun() throws Exception {
    ChildJvm.Result result = child("null-failure-message");
    assertEquals(0, result.exitCode(), result.output());
    assertTrue(result.output().contains("FAILED INTERNAL execution failed: the host callback failed (no message)"), result.output());
    assertTrue(result.output().contains(CHILD_ALIVE), result.output());
  }

  /**
   * Crash 3: exceptions crossed the old JNI boundary (exit 134), and any caller could forge another run's
   * tag. Now a sink that throws fails its run, tags are not guessable, and HostCall has no public
   * constructor.
   */
  @Test
  void aThrowingSinkFailsItsRunAndForgedTagsAnswerNothing() throws Exception {
    ChildJvm.Result result = child("throwing-sink-and-forged-tags");
    assertEquals(0, result.exitCode(), result.output());
    assertTrue(result.output().contains("FAILED INTERNAL execution failed: host call could not be dispatched"), result.output());
    assertTrue(result.output().contains("boom from the sink"), result.output());
    assertTrue(result.output().contains("FORGED ANSWERS ACCEPTED 0"), result.output());
    assertTrue(result.output().contains(CHILD_ALIVE), result.output());
    assertEquals(
        0,
        Arrays.stream(HostCall.class.getDeclaredConstructors()).filter(c -> Modifier.isPublic(c.getModifiers())).count(),
        "HostCall must have no public constructor");
  }

  /** Crash 4: strings crossed as modified UTF-8, so a callback named café-😀 was unknown. */
  @Test
  void aCallbackNameOutsideAsciiArrivesIntact() throws Exception {
    ChildJvm.Result result = child("utf8-callback-name", "-Dfile.encoding=UTF-8", "-Dstdout.encoding=UTF-8");
    assertEquals(0, result.exitCode(), result.output());
    assertTrue(result.output().contains("NAME OK"), result.output());
    assertTrue(result.output().contains(CHILD_ALIVE), result.output());
  }

  /**
   * Crash 5: the plugin's API table size was never checked before optional members were read. A plugin
   * whose table is too small is refused by name, version and missing piece, at load (in C) and for each
   * function the runtime reads (in Java).
   */
  @Test
  void aPluginWithASmallApiTableIsRefusedNamingWhatIsMissing(@TempDir Path dir) throws Exception {
    Path source = dir.resolve("tiny_plugin.c");
    Files.writeString(
        source,
        """
        #include <stddef.h>
        #include <string.h>
        /* A PJRT_Api header with a 64-byte table: version 0.81 and no functions at all. */
        struct Table { size_t struct_size; void* extension_start; size_t v_size; void* v_ext; int major; int minor; };
        static struct Table table;
        const void* GetPjrtApi(void) {
          memset(&table, 0, sizeof table);
          table.struct_size = 64; table.v_size = 24; table.major = 0; table.minor = 81;
          return &table;
        }
        """);
    Path library = dir.resolve("libtiny_plugin.so");
    Process cc = new ProcessBuilder("cc", "-shared", "-fPIC", "-o", library.toString(), source.toString())
        .redirectErrorStream(true).start();
    assertEquals(0, cc.waitFor(), new String(cc.getInputStream().readAllBytes()));
    PluginException e = org.junit.jupiter.api.Assertions.assertThrows(PluginException.class, () -> Plugin.load(library));
    assertTrue(e.getMessage().contains("libtiny_plugin.so"), e.getMessage());
    assertTrue(e.getMessage().contains("PJRT C API 0.81"), e.getMessage());
    assertTrue(e.getMessage().contains("64-byte API table, without the execute-context functions"), e.getMessage());

    // The Java side checks every function it reads against the table's size, too.
    try (PJRT_Api fake = new PJRT_Api()) {
      Pointer.memset(fake, 0, fake.sizeof());
      long clientCreate = Loader.offsetof(PJRT_Api.class, "PJRT_Client_Create");
      fake.struct_size(clientCreate);
      fake.pjrt_api_version().major_version(0).minor_version(81);
      PluginException missing =
          org.junit.jupiter.api.Assertions.assertThrows(PluginException.class, () -> new PjrtApi(fake, "fake.so"));
      assertTrue(
          missing.getMessage().startsWith("PJRT plugin fake.so (PJRT C API 0.81, " + clientCreate + "-byte API table) has no PJRT_"),
          missing.getMessage());
    }
  }

  // ---- the child JVM's scenarios ------------------------------------------------------------------

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
      badInputs.add(() -> DType.fromMlirName("f8E4M3B11FNUZ"));
      badInputs.add(() -> client.compile("func.func @main(%a: tensor<2xf8E4M3B11FNUZ>) -> tensor<2xf8E4M3B11FNUZ> { return %a : tensor<2xf8E4M3B11FNUZ> }"));
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

  /** Runs {@code program} on {@code inputs} with {@code sink}; prints how it failed, if it did. */
  private static void runAndReport(XlaClient client, String program, HostCallSink sink, List<HostTensor> inputs) {
    try (Executable exe = client.compile(program);
        RunContext context = RunContext.withHostCalls(client.plugin(), 7, sink, Duration.ofSeconds(20))) {
      exe.run(inputs, context);
      System.out.println("RUN SUCCEEDED");
    } catch (ExecutionFailedException e) {
      System.out.println("FAILED " + e.code() + " " + e.getMessage());
      if (e.code() == ErrorCode.RESOURCE_EXHAUSTED) {
        System.out.println("REFUSED " + e.code());
      }
    }
  }

  private static String callbackProgram(String name, String inputType, String body) {
    return """
        func.func @main(%x: tensor<f32>) -> tensor<1xf32> {
          BODY
          %r = stablehlo.custom_call @xla_actors.host_callback(%in) {api_version = 4 : i32,
                 backend_config = {callback = "NAME"}, has_side_effect = true} : (IN) -> tensor<1xf32>
          return %r : tensor<1xf32>
        }
        """
        .replace("BODY", body)
        .replace("NAME", name)
        .replace("IN", inputType);
  }

  private static void hugeCallbackInput() {
    // 2^30 + 2 floats: 4 GiB + 8 bytes, broadcast from a scalar inside the program.
    String program =
        callbackProgram(
            "huge",
            "tensor<1073741826xf32>",
            "%in = stablehlo.broadcast_in_dim %x, dims = [] : (tensor<f32>) -> tensor<1073741826xf32>");
    int[] sinkCalls = {0};
    try (XlaClient client = XlaClient.create()) {
      runAndReport(client, program, call -> sinkCalls[0]++, List.of(HostTensor.scalar(1f)));
    }
    System.out.println("SINK CALLS " + sinkCalls[0]);
  }

  private static void nullFailureMessage() {
    String program = callbackProgram("fails", "tensor<f32>", "%in = stablehlo.negate %x : tensor<f32>");
    try (XlaClient client = XlaClient.create()) {
      runAndReport(
          client,
          program,
          call -> CompletableFuture.runAsync(() -> call.fail(ErrorCode.INTERNAL, null)),
          List.of(HostTensor.scalar(1f)));
    }
  }

  private static void throwingSinkAndForgedTags() {
    String program = callbackProgram("answer", "tensor<f32>", "%in = stablehlo.negate %x : tensor<f32>");
    try (XlaClient client = XlaClient.create()) {
      runAndReport(
          client,
          program,
          call -> {
            throw new IllegalStateException("boom from the sink");
          },
          List.of(HostTensor.scalar(1f)));
      // A caller of the raw binding who saw one tag still cannot name a waiting call of another run.
      AtomicReference<Long> seenTag = new AtomicReference<>();
      int[] forgedAccepted = {0};
      HostCallSink answerLater =
          call -> {
            Long previous = seenTag.getAndSet(call.tag());
            if (previous != null) {
              for (long guess = previous - 3; guess <= previous + 3; guess++) {
                if (guess != call.tag() && XlaActors_FailHostCall(guess, 13, "forged", 6) == 1) {
                  forgedAccepted[0]++;
                }
              }
            }
            CompletableFuture.runAsync(() -> call.complete(List.of(HostTensor.ofFloats(new float[] {1}, 1))));
          };
      runAndReport(client, program, answerLater, List.of(HostTensor.scalar(1f)));
      runAndReport(client, program, answerLater, List.of(HostTensor.scalar(1f)));
      System.out.println("FORGED ANSWERS ACCEPTED " + forgedAccepted[0]);
    }
  }

  private static void hugeOutput() {
    String program =
        """
        func.func @main(%x: tensor<f32>) -> tensor<536870914xf32> {
          %0 = stablehlo.broadcast_in_dim %x, dims = [] : (tensor<f32>) -> tensor<536870914xf32>
          return %0 : tensor<536870914xf32>
        }
        """;
    try (XlaClient client = XlaClient.create();
        Executable exe = client.compile(program);
        DeviceBuffer x = client.upload(HostTensor.scalar(1f))) {
      List<DeviceBuffer> out = exe.execute(x);
      System.out.println("ON DEVICE " + out.get(0).onDeviceSizeInBytes() + " BYTES");
      try {
        out.get(0).toHost();
        System.out.println("NOT REFUSED");
      } catch (dev.xlaactors.error.InvalidArgumentException e) {
        System.out.println("REFUSED " + e.getMessage());
      }
      out.forEach(DeviceBuffer::close);
    }
  }

  private static void utf8CallbackName() {
    String name = "café-😀";
    String program = callbackProgram(name, "tensor<f32>", "%in = stablehlo.negate %x : tensor<f32>");
    try (XlaClient client = XlaClient.create()) {
      runAndReport(
          client,
          program,
          call -> {
            System.out.println(call.callbackName().equals(name) ? "NAME OK" : "NAME MANGLED " + call.callbackName());
            CompletableFuture.runAsync(() -> call.complete(List.of(HostTensor.ofFloats(new float[] {1}, 1))));
          },
          List.of(HostTensor.scalar(1f)));
    }
  }
}
