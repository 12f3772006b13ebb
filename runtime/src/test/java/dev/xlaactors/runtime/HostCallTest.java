package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.ExecutionFailedException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The native host-call mechanism on its own, answered by plain threads (the actors come on top). */
class HostCallTest {
  static final String DOUBLE_IN_JAVA =
      """
      func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
        %0 = stablehlo.add %x, %x : tensor<4xf32>
        %1 = stablehlo.custom_call @xla_actors.host_callback(%0) {api_version = 4 : i32,
               backend_config = {callback = "double"}, has_side_effect = true} : (tensor<4xf32>) -> tensor<4xf32>
        %2 = stablehlo.negate %1 : tensor<4xf32>
        return %2 : tensor<4xf32>
      }
      """;

  private static XlaClient client;
  private static Executable program;
  private static final ExecutorService answerers = Executors.newCachedThreadPool();

  @BeforeAll
  static void start() {
    client = XlaClient.create();
    program = client.compile(DOUBLE_IN_JAVA);
  }

  @AfterAll
  static void stop() {
    answerers.shutdownNow();
    program.close();
    client.close();
  }

  private static List<HostTensor> run(HostCallSink sink, Duration backstop, float... x) {
    try (RunContext context = RunContext.withHostCalls(client.plugin(), 1, sink, backstop)) {
      return program.run(List.of(HostTensor.ofFloats(x)), context);
    }
  }

  @Test
  void callbackAnsweredOnAnotherThreadFeedsTheRestOfTheProgram() {
    AtomicReference<HostCall> seen = new AtomicReference<>();
    HostCallSink sink =
        call -> {
          seen.set(call);
          answerers.submit(
              () -> {
                float[] in = call.inputs().get(0).toFloatArray();
                for (int i = 0; i < in.length; i++) {
                  in[i] *= 2;
                }
                assertTrue(call.complete(List.of(HostTensor.ofFloats(in))));
              });
        };
    float[] out = run(sink, Duration.ofSeconds(10), 1, 2, 3, 4).get(0).toFloatArray();
    assertArrayEquals(new float[] {-4, -8, -12, -16}, out, 0f);
    assertEquals("double", seen.get().callbackName());
    assertEquals(List.of(TensorType.of(DType.F32, 4)), seen.get().expectedOutputs());
    assertEquals(0, HostCall.pendingCount());
  }

  @Test
  void unansweredCallFailsAtTheBackstopAndALateAnswerIsDropped() throws Exception {
    CompletableFuture<HostCall> parked = new CompletableFuture<>();
    long start = System.nanoTime();
    ExecutionFailedException e =
        assertThrows(ExecutionFailedException.class, () -> run(parked::complete, Duration.ofMillis(300), 1, 2, 3, 4));
    long elapsedMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    assertTrue(e.getMessage().contains("got no reply within 300 ms"), e.getMessage());
    assertEquals(ErrorCode.DEADLINE_EXCEEDED, e.code());
    assertTrue(elapsedMillis >= 300 && elapsedMillis < 5_000, "took " + elapsedMillis + " ms");
    HostCall late = parked.get(1, TimeUnit.SECONDS);
    assertFalse(late.complete(List.of(HostTensor.ofFloats(new float[4]))), "a late answer must be dropped");
    assertFalse(late.fail(ErrorCode.INTERNAL, "too late"));
    assertEquals(0, HostCall.pendingCount());
  }

  @Test
  void aSinkThatRunsAnotherProgramOnTheXlaThreadLeavesTheOuterRunIntact() {
    // The sink runs on the XLA thread of the outer run, which is this test's thread: the inner runs
    // (execute, and run()) start while the outer one is in progress on the same thread.
    try (Executable add = client.compile(TestPrograms.ADD_F32_4)) {
      HostCallSink sink =
          call -> {
            HostTensor in = call.inputs().get(0);
            float[] doubled;
            try (DeviceBuffer a = client.upload(in)) {
              List<DeviceBuffer> inner = add.execute(a, a);
              doubled = inner.get(0).toHost().toFloatArray();
              inner.forEach(DeviceBuffer::close);
            }
            float[] again = add.run(in, in).get(0).toFloatArray();
            assertArrayEquals(doubled, again, 0f);
            call.complete(List.of(HostTensor.ofFloats(doubled, 4)));
          };
      List<HostTensor> out = run(sink, Duration.ofSeconds(10), 1, 2, 3, 4);
      // x -> x + x -> (Java) doubled again -> negated
      assertArrayEquals(new float[] {-4, -8, -12, -16}, out.get(0).toFloatArray(), 0f);
    }
  }

  @Test
  void complexValuesCrossAHostCallBothWays() {
    String program =
        """
        func.func @main(%z: tensor<2xcomplex<f32>>) -> tensor<2xcomplex<f32>> {
          %0 = stablehlo.custom_call @xla_actors.host_callback(%z) {api_version = 4 : i32,
                 backend_config = {callback = "conjugate"}, has_side_effect = true}
               : (tensor<2xcomplex<f32>>) -> tensor<2xcomplex<f32>>
          return %0 : tensor<2xcomplex<f32>>
        }
        """;
    HostCallSink conjugate =
        call -> {
          float[] z = call.inputs().get(0).toComplex64Array();
          for (int i = 1; i < z.length; i += 2) {
            z[i] = -z[i];
          }
          call.complete(List.of(HostTensor.ofComplex64(z, 2)));
        };
    try (Executable exe = client.compile(program);
        RunContext context = RunContext.withHostCalls(client.plugin(), 3, conjugate, Duration.ofSeconds(10))) {
      HostTensor out = exe.run(List.of(HostTensor.ofComplex64(new float[] {1, 2, -3, 4}, 2)), context).get(0);
      assertArrayEquals(new float[] {1, -2, -3, -4}, out.toComplex64Array(), 0f);
    }
  }

  @Test
  void wrongResultTypeFailsTheRunWithExpectedAndGot() {
    HostCallSink sink = call -> answerers.submit(() -> call.complete(List.of(HostTensor.ofFloats(new float[3]))));
    ExecutionFailedException e =
        assertThrows(ExecutionFailedException.class, () -> run(sink, Duration.ofSeconds(10), 1, 2, 3, 4));
    assertTrue(
        e.getMessage().contains("callback 'double' returned f32[3] as output 0, expected f32[4]"), e.getMessage());
  }

  @Test
  void failedCallAbortsTheRunWithItsMessage() {
    HostCallSink sink = call -> call.fail(ErrorCode.ABORTED, "callback 'double' threw java.lang.ArithmeticException");
    ExecutionFailedException e =
        assertThrows(ExecutionFailedException.class, () -> run(sink, Duration.ofSeconds(10), 1, 2, 3, 4));
    assertTrue(e.getMessage().contains("ArithmeticException"), e.getMessage());
    assertEquals(ErrorCode.ABORTED, e.code());
  }

  @Test
  void sinkThatThrowsFailsTheRun() {
    HostCallSink sink =
        call -> {
          throw new IllegalStateException("mailbox closed");
        };
    ExecutionFailedException e =
        assertThrows(ExecutionFailedException.class, () -> run(sink, Duration.ofSeconds(10), 1, 2, 3, 4));
    assertTrue(e.getMessage().contains("could not be dispatched"), e.getMessage());
    assertTrue(e.getMessage().contains("mailbox closed"), e.getMessage());
  }

  @Test
  void programWithCallbacksRunWithoutSinkFailsClearly() {
    ExecutionFailedException e =
        assertThrows(ExecutionFailedException.class, () -> program.run(HostTensor.ofFloats(new float[4])));
    assertTrue(e.getMessage().contains("no host-callback sink"), e.getMessage());
  }

  @Test
  void cancelledRunFailsItsNextCallAtOnce() {
    try (RunContext context =
        RunContext.withHostCalls(client.plugin(), 7, call -> {}, Duration.ofSeconds(30))) {
      context.cancel();
      ExecutionFailedException e =
          assertThrows(
              ExecutionFailedException.class,
              () -> program.run(List.of(HostTensor.ofFloats(new float[4])), context));
      assertEquals(ErrorCode.CANCELLED, e.code());
    }
  }

  /** Runs the program with every call's inputs borrowed from XLA. */
  private static List<HostTensor> runBorrowing(HostCallSink sink, Duration backstop, float... x) {
    try (RunContext context = RunContext.withHostCalls(client.plugin(), 1, sink, name -> backstop, name -> true)) {
      return program.run(List.of(HostTensor.ofFloats(x)), context);
    }
  }

  @Test
  void aBorrowedInputIsXlasBufferAndTheCallWaitsForAReadInProgressBeforeGoingOn() throws Exception {
    AtomicReference<HostTensor> input = new AtomicReference<>();
    AtomicReference<Long> releasedAt = new AtomicReference<>();
    HostCallSink sink =
        call -> {
          HostTensor x = call.inputs().get(0);
          input.set(x);
          answerers.submit(
              () -> {
                // A read in progress (a hold) when the call is answered: XLA must not go on until it ends.
                HostTensor.Hold read = x.hold("read");
                assertTrue(call.complete(List.of(x)), "the borrowed input itself is a valid answer");
                sleep(400);
                releasedAt.set(System.nanoTime());
                read.close();
              });
        };
    float[] out = runBorrowing(sink, Duration.ofSeconds(10), 1, 2, 3, 4).get(0).toFloatArray();
    long returnedAt = System.nanoTime();
    assertArrayEquals(new float[] {-2, -4, -6, -8}, out, 0f);
    assertTrue(input.get().isBorrowed());
    assertTrue(releasedAt.get() != null && returnedAt >= releasedAt.get(), "the run went on before the read ended");
    IllegalStateException late = assertThrows(IllegalStateException.class, () -> input.get().toFloatArray());
    assertTrue(late.getMessage().contains("input 0 of host callback 'double'"), late.getMessage());
    assertEquals(0, HostCall.pendingCount());
  }

  @Test
  void whenTheBackstopGivesUpOnACallItsBorrowedInputsEndToo() throws Exception {
    AtomicReference<HostTensor> input = new AtomicReference<>();
    CompletableFuture<Long> readEnded = new CompletableFuture<>();
    HostCallSink sink =
        call -> {
          HostTensor x = call.inputs().get(0);
          input.set(x);
          answerers.submit(
              () -> {
                HostTensor.Hold read = x.hold("read"); // held past the 300 ms backstop
                sleep(600);
                readEnded.complete(System.nanoTime());
                read.close();
              });
        };
    long start = System.nanoTime();
    ExecutionFailedException e =
        assertThrows(ExecutionFailedException.class, () -> runBorrowing(sink, Duration.ofMillis(300), 1, 2, 3, 4));
    long returnedAt = System.nanoTime();
    assertEquals(ErrorCode.DEADLINE_EXCEEDED, e.code(), e.getMessage());
    assertTrue(returnedAt >= readEnded.get(1, TimeUnit.SECONDS), "the run went on before the read ended");
    assertTrue(TimeUnit.NANOSECONDS.toMillis(returnedAt - start) < 5_000);
    assertThrows(IllegalStateException.class, () -> input.get().toFloatArray());
    assertThrows(IllegalStateException.class, () -> input.get().copy());
    assertEquals(0, HostCall.pendingCount());
  }

  private static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
