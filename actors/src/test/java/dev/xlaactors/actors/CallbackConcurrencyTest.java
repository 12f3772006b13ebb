package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Many runs at once: all correct, callbacks of different runs in parallel, each run's calls in order. */
class CallbackConcurrencyTest {
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static final TensorType F32 = TensorType.of(DType.F32);
  private static XlaClient client;
  private static CallbackRuntime callbacks;

  private static final AtomicInteger running = new AtomicInteger();
  private static final AtomicInteger peak = new AtomicInteger();
  /** Per run (keyed by its input), the sequence of step numbers its callbacks saw. */
  private static final Map<Float, List<Integer>> stepsByRun = new ConcurrentHashMap<>();

  /** Three callbacks per loop iteration, five iterations: out = x + 15, with each step journaled. */
  private static final String LOOP =
      Programs.lines(
          "func.func @main(%x: tensor<f32>) -> tensor<f32> {",
          "  %zero = stablehlo.constant dense<0> : tensor<i32>",
          "  %one = stablehlo.constant dense<1> : tensor<i32>",
          "  %n = stablehlo.constant dense<5> : tensor<i32>",
          "  %r:3 = stablehlo.while(%i = %zero, %acc = %x, %step = %x) : tensor<i32>, tensor<f32>, tensor<f32>",
          "    cond {",
          "      %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>",
          "      stablehlo.return %p : tensor<i1>",
          "    } do {",
          Programs.call("%a", "step", List.of("%acc", "%x"), List.of("tensor<f32>", "tensor<f32>"), List.of("tensor<f32>")),
          Programs.call("%b", "step", List.of("%a", "%x"), List.of("tensor<f32>", "tensor<f32>"), List.of("tensor<f32>")),
          Programs.call("%c", "step", List.of("%b", "%x"), List.of("tensor<f32>", "tensor<f32>"), List.of("tensor<f32>")),
          "      %next = stablehlo.add %i, %one : tensor<i32>",
          "      stablehlo.return %next, %c, %step : tensor<i32>, tensor<f32>, tensor<f32>",
          "    }",
          "  return %r#1 : tensor<f32>",
          "}");

  private static final String ONE_SLEEP =
      Programs.lines(
          "func.func @main(%x: tensor<f32>) -> tensor<f32> {",
          Programs.call("%a", "sleep-200ms", List.of("%x"), List.of("tensor<f32>"), List.of("tensor<f32>")),
          "  return %a : tensor<f32>",
          "}");

  @BeforeAll
  static void start() {
    client = XlaClient.create();
    callbacks = CallbackRuntime.create(testKit.system(), client);
    callbacks
        .register("step", List.of(F32), null, (in, s) -> {
          float acc = in.get(0).toFloatArray()[0];
          float runKey = in.get(1).toFloatArray()[0];
          stepsByRun.computeIfAbsent(runKey, k -> new ArrayList<>()).add(Math.round(acc - runKey));
          return List.of(HostTensor.scalar(acc + 1));
        })
        .toCompletableFuture()
        .join();
    callbacks
        .register("sleep-200ms", List.of(F32), null, (in, s) -> {
          int now = running.incrementAndGet();
          peak.accumulateAndGet(now, Math::max);
          Thread.sleep(200);
          running.decrementAndGet();
          return in;
        })
        .toCompletableFuture()
        .join();
  }

  @AfterAll
  static void stop() {
    callbacks.close();
    client.close();
    testKit.shutdownTestKit();
  }

  @Test
  void thirtyTwoConcurrentRunsWithFifteenCallbacksEachAreAllCorrectAndInOrder() throws Exception {
    stepsByRun.clear();
    try (Model exe = Model.compile(client, LOOP)) {
      List<CompletableFuture<List<HostTensor>>> runs = new ArrayList<>();
      for (int r = 0; r < 32; r++) {
        runs.add(callbacks.start(exe, Argument.of(List.of(HostTensor.scalar(1000f * r)))).result().toCompletableFuture());
      }
      for (int r = 0; r < 32; r++) {
        assertEquals(1000f * r + 15, runs.get(r).get(60, TimeUnit.SECONDS).get(0).toFloatArray()[0], "run " + r);
        List<Integer> steps = stepsByRun.get(1000f * r);
        List<Integer> expected = new ArrayList<>();
        for (int i = 0; i < 15; i++) {
          expected.add(i);
        }
        assertEquals(expected, steps, "the callbacks of run " + r + " must see their steps in program order");
      }
    }
    RuntimeMetrics.Snapshot step = callbacks.metrics().callbacks().get("step");
    assertEquals(32 * 15, step.count(), "metrics count every call");
    assertEquals(0, step.failures());
  }

  @Test
  void callbacksOfDifferentRunsExecuteInParallelUpToTheConfiguredParallelism() throws Exception {
    int parallelism =
        testKit.system().settings().config().getInt("xla-actors.actors.callbacks.threads");
    peak.set(0);
    int runs = 2 * parallelism;
    long start = System.nanoTime();
    try (Model exe = Model.compile(client, ONE_SLEEP)) {
      List<CompletableFuture<List<HostTensor>>> futures = new ArrayList<>();
      for (int r = 0; r < runs; r++) {
        futures.add(callbacks.start(exe, Argument.of(List.of(HostTensor.scalar((float) r)))).result().toCompletableFuture());
      }
      for (int r = 0; r < runs; r++) {
        assertEquals((float) r, futures.get(r).get(30, TimeUnit.SECONDS).get(0).toFloatArray()[0]);
      }
    }
    long tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    assertEquals(parallelism, peak.get(), "callbacks running at once");
    // Serial execution would take runs * 200 ms; in parallel it takes about runs / parallelism * 200 ms.
    assertTrue(tookMillis < runs * 200 / 2, "took " + tookMillis + " ms for " + runs + " runs");
  }
}
