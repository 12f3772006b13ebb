package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostFunction;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** What users of Nx.runtime_call and jax.pure_callback expect, on the real plugin. */
class CallbackSemanticsTest {
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static final TensorType F32 = TensorType.of(DType.F32);
  private static XlaClient client;
  private static CallbackRuntime callbacks;

  private static final List<String> journal = Collections.synchronizedList(new ArrayList<>());
  private static final AtomicInteger effects = new AtomicInteger();

  @BeforeAll
  static void start() {
    client = XlaClient.create();
    callbacks = CallbackRuntime.create(testKit.system(), client);
    register("inc", List.of(F32), null, (in, s) -> {
      journal.add("inc " + in.get(0).toFloatArray()[0]);
      return List.of(HostTensor.scalar(in.get(0).toFloatArray()[0] + 1));
    });
    register("double", List.of(F32), null, (in, s) -> {
      journal.add("double " + in.get(0).toFloatArray()[0]);
      return List.of(HostTensor.scalar(in.get(0).toFloatArray()[0] * 2));
    });
    register("scale-by-static", List.of(F32), 10f, (in, s) -> List.of(HostTensor.scalar(in.get(0).toFloatArray()[0] * (Float) s)));
    register(
        "split-and-count",
        List.of(TensorType.of(DType.F32, 2), TensorType.of(DType.S32)),
        null,
        (in, s) -> {
          float[] x = in.get(0).toFloatArray();
          int[] n = in.get(1).toIntArray();
          return List.of(HostTensor.ofFloats(new float[] {x[0] + x[1], x[2] + x[3]}, 2), HostTensor.scalar(n[0] + x.length));
        });
    register("to-s64", List.of(TensorType.of(DType.S64, 3)), null, (in, s) -> {
      float[] x = in.get(0).toFloatArray();
      return List.of(HostTensor.ofLongs(new long[] {Math.round(x[0]), Math.round(x[1]), Math.round(x[2])}, 3));
    });
    register("constant-source", List.of(TensorType.of(DType.F32, 3)), null, (in, s) -> {
      assertEquals(0, in.size());
      return List.of(HostTensor.ofFloats(new float[] {7, 8, 9}));
    });
    register("side-effect", List.of(F32), null, (in, s) -> {
      effects.incrementAndGet();
      return List.of(in.get(0));
    });
  }

  @AfterAll
  static void stop() {
    callbacks.close();
    client.close();
    testKit.shutdownTestKit();
  }

  private static void register(String name, List<TensorType> template, Object staticArg, HostFunction f) {
    callbacks.register(name, template, staticArg, f).toCompletableFuture().join();
  }

  private static List<HostTensor> run(String program, HostTensor... inputs) {
    try (Model exe = Model.compile(client, program)) {
      return callbacks.run(exe, Argument.of(List.of(inputs)));
    }
  }

  private static String call(String result, String name, String operand) {
    return Programs.call(result, name, operand.isEmpty() ? List.of() : List.of(operand),
        operand.isEmpty() ? List.of() : List.of("tensor<f32>"), List.of("tensor<f32>"));
  }

  @Test
  void severalCallbacksInOneProgramRunInProgramOrder() {
    journal.clear();
    String program = Programs.lines(
        "func.func @main(%x: tensor<f32>) -> tensor<f32> {",
        call("%a", "inc", "%x"),
        call("%b", "double", "%a"),
        call("%c", "inc", "%b"),
        "  return %c : tensor<f32>",
        "}");
    assertEquals(9f, run(program, HostTensor.scalar(3f)).get(0).toFloatArray()[0]);
    assertEquals(List.of("inc 3.0", "double 4.0", "inc 8.0"), journal);
  }

  @Test
  void staticArgumentReachesTheFunction() {
    String program = Programs.lines(
        "func.func @main(%x: tensor<f32>) -> tensor<f32> {",
        call("%a", "scale-by-static", "%x"),
        "  return %a : tensor<f32>",
        "}");
    assertEquals(25f, run(program, HostTensor.scalar(2.5f)).get(0).toFloatArray()[0]);
  }

  /** A while loop of n iterations with two callbacks per body: acc = (acc + 1) * 2. */
  private static String loop(String n, String bodyPrefix) {
    return Programs.lines(
        "    %r:2 = stablehlo.while(%i = %zero, %acc = %x) : tensor<i32>, tensor<f32>",
        "      cond {",
        "        %p = stablehlo.compare LT, %i, %" + n + " : (tensor<i32>, tensor<i32>) -> tensor<i1>",
        "        stablehlo.return %p : tensor<i1>",
        "      } do {",
        "  " + call("%" + bodyPrefix + "a", "inc", "%acc"),
        "  " + call("%" + bodyPrefix + "b", "double", "%" + bodyPrefix + "a"),
        "        %next = stablehlo.add %i, %one : tensor<i32>",
        "        stablehlo.return %next, %" + bodyPrefix + "b : tensor<i32>, tensor<f32>",
        "      }");
  }

  @Test
  void callbacksInsideAWhileLoopTwicePerIteration() {
    journal.clear();
    String program = Programs.lines(
        "func.func @main(%x: tensor<f32>) -> tensor<f32> {",
        "  %zero = stablehlo.constant dense<0> : tensor<i32>",
        "  %one = stablehlo.constant dense<1> : tensor<i32>",
        "  %n = stablehlo.constant dense<4> : tensor<i32>",
        loop("n", "body"),
        "  return %r#1 : tensor<f32>",
        "}");
    float expected = 1;
    for (int i = 0; i < 4; i++) {
      expected = (expected + 1) * 2;
    }
    assertEquals(expected, run(program, HostTensor.scalar(1f)).get(0).toFloatArray()[0]);
    assertEquals(8, journal.size());
    assertEquals("inc 1.0", journal.get(0));
    assertEquals("double 2.0", journal.get(1));
  }

  @Test
  void callbacksInsideNestedLoops() {
    String program = Programs.lines(
        "func.func @main(%x: tensor<f32>) -> tensor<f32> {",
        "  %zero = stablehlo.constant dense<0> : tensor<i32>",
        "  %one = stablehlo.constant dense<1> : tensor<i32>",
        "  %outer_n = stablehlo.constant dense<3> : tensor<i32>",
        "  %inner_n = stablehlo.constant dense<2> : tensor<i32>",
        "  %o:2 = stablehlo.while(%j = %zero, %y = %x) : tensor<i32>, tensor<f32>",
        "    cond {",
        "      %q = stablehlo.compare LT, %j, %outer_n : (tensor<i32>, tensor<i32>) -> tensor<i1>",
        "      stablehlo.return %q : tensor<i1>",
        "    } do {",
        "      %r:2 = stablehlo.while(%i = %zero, %acc = %y) : tensor<i32>, tensor<f32>",
        "        cond {",
        "          %p = stablehlo.compare LT, %i, %inner_n : (tensor<i32>, tensor<i32>) -> tensor<i1>",
        "          stablehlo.return %p : tensor<i1>",
        "        } do {",
        "    " + call("%a", "inc", "%acc"),
        "          %next = stablehlo.add %i, %one : tensor<i32>",
        "          stablehlo.return %next, %a : tensor<i32>, tensor<f32>",
        "        }",
        "  " + call("%d", "double", "%r#1"),
        "      %jn = stablehlo.add %j, %one : tensor<i32>",
        "      stablehlo.return %jn, %d : tensor<i32>, tensor<f32>",
        "    }",
        "  return %o#1 : tensor<f32>",
        "}");
    float expected = 0.5f;
    for (int j = 0; j < 3; j++) {
      expected = (expected + 2) * 2;
    }
    assertEquals(expected, run(program, HostTensor.scalar(0.5f)).get(0).toFloatArray()[0]);
  }

  @Test
  void callbacksInsideConditionalBranches() {
    String program = Programs.lines(
        "func.func @main(%x: tensor<f32>, %p: tensor<i1>) -> tensor<f32> {",
        "  %r = \"stablehlo.if\"(%p) ({",
        "  " + call("%a", "inc", "%x"),
        "    \"stablehlo.return\"(%a) : (tensor<f32>) -> ()",
        "  }, {",
        "  " + call("%b", "double", "%x"),
        "    \"stablehlo.return\"(%b) : (tensor<f32>) -> ()",
        "  }) : (tensor<i1>) -> tensor<f32>",
        "  return %r : tensor<f32>",
        "}");
    assertEquals(6f, run(program, HostTensor.scalar(5f), HostTensor.ofBooleans(new boolean[] {true})).get(0).toFloatArray()[0]);
    assertEquals(10f, run(program, HostTensor.scalar(5f), HostTensor.ofBooleans(new boolean[] {false})).get(0).toFloatArray()[0]);
  }

  @Test
  void tupleInputsAndOutputs() {
    String program = Programs.lines(
        "func.func @main(%x: tensor<4xf32>, %n: tensor<i32>) -> (tensor<2xf32>, tensor<i32>) {",
        "  " + Programs.call("%r:2", "split-and-count", List.of("%x", "%n"), List.of("tensor<4xf32>", "tensor<i32>"),
            List.of("tensor<2xf32>", "tensor<i32>")),
        "  return %r#0, %r#1 : tensor<2xf32>, tensor<i32>",
        "}");
    List<HostTensor> out = run(program, HostTensor.ofFloats(new float[] {1, 2, 3, 4}), HostTensor.scalar(10));
    assertArrayEquals(new float[] {3, 7}, out.get(0).toFloatArray(), 0f);
    assertArrayEquals(new int[] {14}, out.get(1).toIntArray());
  }

  @Test
  void dtypeChangesBetweenInputAndOutput() {
    String program = Programs.lines(
        "func.func @main(%x: tensor<3xf32>) -> tensor<3xi64> {",
        "  " + Programs.call("%r", "to-s64", List.of("%x"), List.of("tensor<3xf32>"), List.of("tensor<3xi64>")),
        "  %two = stablehlo.constant dense<2> : tensor<3xi64>",
        "  %y = stablehlo.multiply %r, %two : tensor<3xi64>",
        "  return %y : tensor<3xi64>",
        "}");
    assertArrayEquals(new long[] {2, -4, 8}, run(program, HostTensor.ofFloats(new float[] {1.2f, -2.4f, 3.6f})).get(0).toLongArray());
  }

  @Test
  void callbackWithNoInputs() {
    String program = Programs.lines(
        "func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {",
        "  " + Programs.call("%c", "constant-source", List.of(), List.of(), List.of("tensor<3xf32>")),
        "  %y = stablehlo.add %x, %c : tensor<3xf32>",
        "  return %y : tensor<3xf32>",
        "}");
    assertArrayEquals(new float[] {8, 9, 10}, run(program, HostTensor.ofFloats(new float[] {1, 1, 1})).get(0).toFloatArray(), 0f);
  }

  @Test
  void effectfulCallbackWhoseResultIsUnusedStillRuns() {
    effects.set(0);
    String program = Programs.lines(
        "func.func @main(%x: tensor<f32>) -> tensor<f32> {",
        call("%unused", "side-effect", "%x"),
        "  %y = stablehlo.negate %x : tensor<f32>",
        "  return %y : tensor<f32>",
        "}");
    assertEquals(-2f, run(program, HostTensor.scalar(2f)).get(0).toFloatArray()[0]);
    assertEquals(1, effects.get());
  }

  @Test
  void callbackThatRunsAnotherProgramOnTheSameClientDoesNotDeadlock() {
    String inner = Programs.lines(
        "func.func @main(%x: tensor<f32>) -> tensor<f32> {",
        "  %y = stablehlo.multiply %x, %x : tensor<f32>",
        "  return %y : tensor<f32>",
        "}");
    String innerWithCallback = Programs.lines(
        "func.func @main(%x: tensor<f32>) -> tensor<f32> {",
        call("%a", "inc", "%x"),
        "  return %a : tensor<f32>",
        "}");
    try (Executable square = client.compile(inner); Model incInside = Model.compile(client, innerWithCallback)) {
      register("square-on-xla", List.of(F32), null, (in, s) -> {
        HostTensor squared = square.run(in.get(0)).get(0);
        return callbacks.run(incInside, Argument.of(List.of(squared))); // a nested run with its own callback
      });
      String outer = Programs.lines(
          "func.func @main(%x: tensor<f32>) -> tensor<f32> {",
          call("%a", "square-on-xla", "%x"),
          call("%b", "double", "%a"),
          "  return %b : tensor<f32>",
          "}");
      assertEquals(20f, run(outer, HostTensor.scalar(3f)).get(0).toFloatArray()[0]);
    }
  }
}
