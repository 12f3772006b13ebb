package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.InvalidArgumentException;
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
import dev.xlaactors.runtime.model.Model;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * In-place host calls ({@link GraphBuilder#hostCallInPlace}): the program writes an output over an input's
 * buffer, on the real plugin. The values are those of the same program without aliasing, with copied and
 * with borrowed inputs; an input still used after the call keeps its value; outputs that are each other's
 * inputs are written correctly; and no reader of a borrowed input sees half an answer.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class InPlaceCallbacksTest {
  private static final int N = 1 << 20; // f32[1048576]: 4 MiB
  private static final TensorType F32_N = TensorType.of(DType.F32, N);

  private ActorTestKit testKit;
  private XlaClient client;
  private CallbackRuntime callbacks;

  @BeforeEach
  void start() {
    testKit = ActorTestKit.create(ConfigFactory.parseString("xla-actors.actors.callbacks.default-timeout = 20s")
        .withFallback(ConfigFactory.load()));
    client = XlaClient.create();
    callbacks = CallbackRuntime.create(testKit.system(), client);
  }

  @AfterEach
  void stop() {
    callbacks.close();
    client.close();
    testKit.shutdownTestKit();
  }

  private static float[] ramp(int n) {
    float[] x = new float[n];
    for (int i = 0; i < n; i++) {
      x[i] = i % 1000;
    }
    return x;
  }

  /** {@code k} iterations of {@code v = f(v) * 2}, {@code f} called in place or not. */
  private static Graph loop(HostCallback f, int k, boolean inPlace) {
    GraphBuilder b = new GraphBuilder(inPlace ? "loop_in_place" : "loop");
    Value x = b.parameter(F32_N);
    Value zero = b.constant(0);
    List<Value> out = b.whileLoop(List.of(zero, x),
        (r, c) -> r.less(c.get(0), r.constant(k)),
        (r, c) -> {
          Value y = inPlace ? r.hostCallInPlace(f, Map.of(0, 0), c.get(1)).get(0) : r.hostCall(f, c.get(1)).get(0);
          return List.of(r.add(c.get(0), r.constant(1)), r.multiply(y, r.constant(2f)));
        });
    return b.build(out.get(1));
  }

  @Test
  void aLoopOfInPlaceCallsComputesWhatTheCopyingProgramComputes() {
    // f(v) = v + 1, computed in Java; and an echo that returns its borrowed input itself.
    HostCallback plusOne = new HostCallback("plus-one", List.of(F32_N), null, (in, s) -> {
      float[] v = in.get(0).toFloatArray();
      for (int i = 0; i < v.length; i++) {
        v[i] += 1;
      }
      return List.of(HostTensor.ofFloats(v));
    });
    AtomicInteger borrowedCalls = new AtomicInteger();
    HostCallback echo = new HostCallback("borrowed-echo", List.of(F32_N), null, (in, s) -> {
      assertTrue(in.get(0).isBorrowed());
      borrowedCalls.incrementAndGet();
      return in;
    });
    callbacks.register(plusOne).toCompletableFuture().join();
    callbacks.register(echo, CallbackOptions.DEFAULT.withBorrowedInputs()).toCompletableFuture().join();
    float[] x = ramp(N);
    float[] plusOneExpected = x.clone();
    float[] echoExpected = x.clone();
    for (int i = 0; i < N; i++) {
      for (int k = 0; k < 4; k++) {
        plusOneExpected[i] = (plusOneExpected[i] + 1) * 2;
        echoExpected[i] *= 2;
      }
    }
    for (boolean inPlace : new boolean[] {false, true}) {
      try (Executable a = loop(plusOne, 4, inPlace).compile(client); Executable b = loop(echo, 4, inPlace).compile(client);
          Model aModel = Model.of(a); Model bModel = Model.of(b)) {
        // In place, the call's output is the loop's own buffer: XLA plans no 4 MiB buffer for it per run.
        long temp = a.compiledMemoryStats().tempBytes();
        assertTrue(inPlace ? temp < N : temp >= 4L * N, "in place: " + inPlace + ", temporary bytes per run: " + temp);
        assertArrayEquals(plusOneExpected, callbacks.run(aModel, Argument.of(List.of(HostTensor.ofFloats(x)))).get(0).toFloatArray(), 0f,
            "copied inputs, in place: " + inPlace);
        assertArrayEquals(echoExpected, callbacks.run(bModel, Argument.of(List.of(HostTensor.ofFloats(x)))).get(0).toFloatArray(), 0f,
            "borrowed inputs, in place: " + inPlace);
      }
    }
    assertEquals(8, borrowedCalls.get());
  }

  @Test
  void anInputStillUsedAfterTheCallKeepsItsValue() {
    TensorType f32x4 = TensorType.of(DType.F32, 4);
    HostCallback negate = new HostCallback("negate-in-place", List.of(f32x4), null, (in, s) -> {
      float[] v = in.get(0).toFloatArray();
      for (int i = 0; i < v.length; i++) {
        v[i] = -v[i];
      }
      return List.of(HostTensor.ofFloats(v));
    });
    callbacks.register(negate, CallbackOptions.DEFAULT.withBorrowedInputs()).toCompletableFuture().join();
    GraphBuilder b = new GraphBuilder("input_used_after");
    Value x = b.parameter(f32x4);
    Value doubled = b.multiply(x, b.constant(2f));
    Value negated = b.hostCallInPlace(negate, Map.of(0, 0), doubled).get(0);
    // XLA must copy `doubled` before the call writes over it, since the sum reads it afterwards.
    Graph graph = b.build(negated, b.add(doubled, b.constant(1f)));
    try (Model exe = Model.compile(client, graph.stablehlo())) {
      List<HostTensor> out = callbacks.run(exe, Argument.of(List.of(HostTensor.ofFloats(new float[] {1, 2, 3, 4}))));
      assertArrayEquals(new float[] {-2, -4, -6, -8}, out.get(0).toFloatArray(), 0f);
      assertArrayEquals(new float[] {3, 5, 7, 9}, out.get(1).toFloatArray(), 0f);
    }
  }

  @Test
  void outputsWrittenOverEachOthersInputsAreSwappedCorrectly() {
    // Each output is written over the input of the same index, and the answer is the inputs swapped:
    // writing output 0 first would destroy input 0 before it is copied into output 1.
    HostCallback swap = new HostCallback("swap", List.of(F32_N, F32_N), null,
        (in, s) -> List.of(in.get(1), in.get(0)));
    callbacks.register(swap, CallbackOptions.DEFAULT.withBorrowedInputs()).toCompletableFuture().join();
    GraphBuilder b = new GraphBuilder("swap_in_place");
    Value x = b.parameter(F32_N);
    Value y = b.parameter(F32_N);
    Value x1 = b.add(x, b.constant(1f));
    Value y1 = b.add(y, b.constant(1f));
    List<Value> swapped = b.hostCallInPlace(swap, Map.of(0, 0, 1, 1), x1, y1);
    Graph graph = b.build(swapped.get(0), swapped.get(1));
    float[] xs = ramp(N);
    float[] ys = new float[N];
    Arrays.fill(ys, 7f);
    float[] x1s = xs.clone();
    for (int i = 0; i < N; i++) {
      x1s[i] += 1;
    }
    float[] y1s = new float[N];
    Arrays.fill(y1s, 8f);
    try (Model exe = Model.compile(client, graph.stablehlo())) {
      for (int run = 0; run < 3; run++) {
        List<HostTensor> out = callbacks.run(exe, Argument.of(List.of(HostTensor.ofFloats(xs), HostTensor.ofFloats(ys))));
        assertArrayEquals(y1s, out.get(0).toFloatArray(), 0f);
        assertArrayEquals(x1s, out.get(1).toFloatArray(), 0f);
      }
    }
  }

  @Test
  void oneInputAnsweredAsTwoOutputsWrittenOverTheInputsGivesBothOutputsThatInput() {
    for (int n : new int[] {4, 1 << 16}) {
      oneInputAnsweredAsTwoOutputs(n);
    }
  }

  private void oneInputAnsweredAsTwoOutputs(int n) {
    // Outputs 0 and 1 are written over inputs 0 and 1; the answer is one input twice. Whichever it is,
    // both outputs must hold it (issue 24: output 0 came back wrong), with copied and with borrowed inputs.
    TensorType type = TensorType.of(DType.F32, n);
    float[] xs = ramp(n);
    float[] ys = new float[n];
    Arrays.fill(ys, 7f);
    float[] x1s = xs.clone();
    for (int i = 0; i < n; i++) {
      x1s[i] += 1;
    }
    float[] y1s = new float[n];
    Arrays.fill(y1s, 8f);
    for (boolean borrowed : new boolean[] {false, true}) {
      for (int which = 0; which < 2; which++) {
        int w = which;
        String name = "twice-" + n + "-" + which + (borrowed ? "-borrowed" : "-copied");
        HostCallback twice = new HostCallback(name, List.of(type, type), null, (in, s) -> List.of(in.get(w), in.get(w)));
        CallbackOptions options = borrowed ? CallbackOptions.DEFAULT.withBorrowedInputs() : CallbackOptions.DEFAULT;
        callbacks.register(twice, options).toCompletableFuture().join();
        for (Map<Integer, Integer> aliases : List.of(Map.of(0, 0, 1, 1), Map.of(0, 1, 1, 0), Map.of(0, 0), Map.of(1, 0))) {
          GraphBuilder b = new GraphBuilder("twice_in_place");
          Value x = b.parameter(type);
          Value y = b.parameter(type);
          List<Value> out = b.hostCallInPlace(twice, aliases, b.add(x, b.constant(1f)), b.add(y, b.constant(1f)));
          Graph graph = b.build(out.get(0), out.get(1));
          for (RunMode mode : RunMode.values()) {
            for (int run = 0; run < 2; run++) {
              List<HostTensor> result = SegmentedRunTest.run(callbacks, graph, List.of(HostTensor.ofFloats(xs), HostTensor.ofFloats(ys)), mode);
              float[] expected = which == 0 ? x1s : y1s;
              assertArrayEquals(expected, result.get(0).toFloatArray(), 0f, name + " " + aliases + " " + mode + ": output 0");
              assertArrayEquals(expected, result.get(1).toFloatArray(), 0f, name + " " + aliases + " " + mode + ": output 1");
            }
          }
        }
      }
    }
  }

  @Test
  void oneInputAnsweredAsBothOutputsOfACallWithOneInput() {
    for (int n : new int[] {4, 1 << 16}) {
      oneInputAsBothOutputs(n);
    }
  }

  private void oneInputAsBothOutputs(int n) {
    TensorType type = TensorType.of(DType.F32, n);
    float[] xs = ramp(n);
    float[] x1s = xs.clone();
    for (int i = 0; i < n; i++) {
      x1s[i] += 1;
    }
    for (boolean borrowed : new boolean[] {false, true}) {
      String name = "dup-" + n + (borrowed ? "-borrowed" : "-copied");
      HostCallback dup = new HostCallback(name, List.of(type, type), null, (in, s) -> List.of(in.get(0), in.get(0)));
      callbacks.register(dup, borrowed ? CallbackOptions.DEFAULT.withBorrowedInputs() : CallbackOptions.DEFAULT).toCompletableFuture().join();
      for (Map<Integer, Integer> aliases : List.of(Map.of(0, 0), Map.of(0, 1))) {
        GraphBuilder b = new GraphBuilder("dup_in_place");
        Value x = b.parameter(type);
        List<Value> out = b.hostCallInPlace(dup, aliases, b.add(x, b.constant(1f)));
        Graph graph = b.build(out.get(0), out.get(1));
        for (RunMode mode : RunMode.values()) {
          List<HostTensor> result = SegmentedRunTest.run(callbacks, graph, List.of(HostTensor.ofFloats(xs)), mode);
          assertArrayEquals(x1s, result.get(0).toFloatArray(), 0f, name + " " + aliases + " " + mode + ": output 0");
          assertArrayEquals(x1s, result.get(1).toFloatArray(), 0f, name + " " + aliases + " " + mode + ": output 1");
        }
      }
    }
  }

  @Test
  void aReaderOfABorrowedInputNeverSeesHalfAnAnswerWrittenOverIt() throws Exception {
    // The function hands its borrowed input to a reader thread, which copies it again and again, and
    // answers with a tensor of 7s that XLA writes over that very input. Every copy the reader gets must
    // be the input as XLA gave it; once the answer is being written, copies are refused.
    AtomicReference<String> wrong = new AtomicReference<>();
    AtomicInteger reads = new AtomicInteger();
    AtomicInteger refused = new AtomicInteger();
    List<Thread> readers = new ArrayList<>();
    HostCallback sevens = new HostCallback("sevens", List.of(F32_N), null, (in, s) -> {
      HostTensor input = in.get(0);
      float expected = input.copy().toFloatArray()[0];
      CountDownLatch reading = new CountDownLatch(1);
      Thread reader = new Thread(() -> {
        while (true) {
          float[] seen;
          try {
            seen = input.toFloatArray();
          } catch (IllegalStateException ended) {
            refused.incrementAndGet();
            reading.countDown();
            return;
          }
          reads.incrementAndGet();
          // Only after a read: the function waits for it, so each reader reads at least once while the call
          // is pending (signalled before the read, a busy machine could answer first: 19 reads of 20, seen once).
          reading.countDown();
          for (float v : seen) {
            if (v != expected) {
              wrong.compareAndSet(null, "a read saw " + v + " in an input of all " + expected);
              return;
            }
          }
        }
      });
      readers.add(reader);
      reader.start();
      try {
        reading.await();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      float[] answer = new float[N];
      Arrays.fill(answer, 7f);
      return List.of(HostTensor.ofFloats(answer));
    });
    callbacks.register(sevens, CallbackOptions.DEFAULT.withBorrowedInputs()).toCompletableFuture().join();
    GraphBuilder b = new GraphBuilder("sevens_in_place");
    Value x = b.parameter(F32_N);
    Value xPlusRun = b.add(x, b.constant(1f));
    Graph graph = b.build(b.hostCallInPlace(sevens, Map.of(0, 0), xPlusRun).get(0));
    float[] seven = new float[N];
    Arrays.fill(seven, 7f);
    try (Model exe = Model.compile(client, graph.stablehlo())) {
      for (int run = 0; run < 20; run++) {
        float[] xs = new float[N];
        Arrays.fill(xs, run);
        assertArrayEquals(seven, callbacks.run(exe, Argument.of(List.of(HostTensor.ofFloats(xs)))).get(0).toFloatArray(), 0f);
      }
    }
    for (Thread reader : readers) {
      reader.join(10_000);
      assertFalse(reader.isAlive(), "a reader still runs after its call ended");
    }
    assertEquals(null, wrong.get());
    assertEquals(20, refused.get(), "each reader ends refused once its call is answered");
    assertTrue(reads.get() >= 20, "each reader read the input at least once: " + reads.get());
  }

  @Test
  void badAliasesAreRefusedWhenTheGraphIsBuilt() {
    TensorType f32x4 = TensorType.of(DType.F32, 4);
    HostCallback f = new HostCallback("f", List.of(f32x4), null, (in, s) -> in);
    GraphBuilder b = new GraphBuilder("bad_aliases");
    Value x = b.parameter(f32x4);
    Value wide = b.parameter(TensorType.of(DType.F32, 8));
    InvalidArgumentException outOfRange =
        assertThrows(InvalidArgumentException.class, () -> b.hostCallInPlace(f, Map.of(0, 1), x));
    assertTrue(outOfRange.getMessage().contains("alias 0 -> 1 needs an input index below 1 and an output index below 1"),
        outOfRange.getMessage());
    InvalidArgumentException noInput =
        assertThrows(InvalidArgumentException.class, () -> b.hostCallInPlace(f, Map.of(2, 0), x));
    assertTrue(noInput.getMessage().contains("alias 2 -> 0"), noInput.getMessage());
    InvalidArgumentException twice =
        assertThrows(InvalidArgumentException.class, () -> b.hostCallInPlace(f, Map.of(0, 0, 1, 0), x, x));
    assertTrue(twice.getMessage().contains("output 0 of callback 'f' is aliased to inputs 0 and 1"), twice.getMessage());
    InvalidArgumentException type =
        assertThrows(InvalidArgumentException.class, () -> b.hostCallInPlace(f, Map.of(0, 0), wide));
    assertTrue(type.getMessage().contains("input 0 is f32[8] but output 0 of callback 'f', written over it, is f32[4]"),
        type.getMessage());
    InvalidArgumentException none =
        assertThrows(InvalidArgumentException.class, () -> b.hostCallInPlace(f, Map.of(), x));
    assertTrue(none.getMessage().contains("at least one input -> output alias"), none.getMessage());
  }
}
