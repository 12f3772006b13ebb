package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Callbacks registered with borrowed inputs get XLA's own input buffers, on the real plugin: they read
 * them, pass them through as outputs and copy them during the call; after the call every use fails
 * cleanly, and a reader racing with the end of the call sees either the call's exact values or that
 * error, never memory XLA has reused (nor a crash).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class BorrowedInputsTest {
  private static final int N = 1 << 20; // f32[1048576]: 4 MiB, far past the pool's smallest class
  private static final TensorType F32_N = TensorType.of(DType.F32, N);

  private ActorTestKit testKit;
  private XlaClient client;
  private CallbackRuntime callbacks;

  @BeforeEach
  void start() {
    testKit = ActorTestKit.create(ConfigFactory.parseString("""
        xla-actors.actors.callbacks.default-timeout = 10s
        xla-actors.actors.callbacks.timeouts { slow-reader = 300ms }
        """).withFallback(ConfigFactory.load()));
    client = XlaClient.create();
    callbacks = CallbackRuntime.create(testKit.system(), client);
  }

  @AfterEach
  void stop() {
    callbacks.close();
    client.close();
    testKit.shutdownTestKit();
  }

  /** {@code 2 * f(x + 1)}: the callback's input is a buffer XLA computed in this run. */
  private Model program(String callback) {
    String t = "tensor<" + N + "xf32>";
    return Model.compile(client, Programs.lines(
        "func.func @main(%x: " + t + ") -> " + t + " {",
        "  %one = stablehlo.constant dense<1.0> : " + t,
        "  %a = stablehlo.add %x, %one : " + t,
        Programs.call("%y", callback, List.of("%a"), List.of(t), List.of(t)),
        "  %r = stablehlo.add %y, %y : " + t,
        "  return %r : " + t,
        "}"));
  }

  /**
   * {@code g(f(x + 1) + 1)}: after the call of {@code f}, XLA computes {@code f(x + 1) + 1} into a new
   * buffer, which may take the memory of {@code f}'s (now dead) input.
   */
  private Model twoCalls(String f, String g) {
    String t = "tensor<" + N + "xf32>";
    return Model.compile(client, Programs.lines(
        "func.func @main(%x: " + t + ") -> " + t + " {",
        "  %one = stablehlo.constant dense<1.0> : " + t,
        "  %a = stablehlo.add %x, %one : " + t,
        Programs.call("%y", f, List.of("%a"), List.of(t), List.of(t)),
        "  %b = stablehlo.add %y, %one : " + t,
        Programs.call("%z", g, List.of("%b"), List.of(t), List.of(t)),
        "  return %z : " + t,
        "}"));
  }

  private static float[] ramp(float start) {
    float[] v = new float[N];
    for (int i = 0; i < N; i++) {
      v[i] = start + i;
    }
    return v;
  }

  private static float[] plus(float[] v, float d) {
    float[] out = v.clone();
    for (int i = 0; i < out.length; i++) {
      out[i] += d;
    }
    return out;
  }

  private static float[] times2(float[] v) {
    float[] out = v.clone();
    for (int i = 0; i < out.length; i++) {
      out[i] *= 2;
    }
    return out;
  }

  @Test
  void aBorrowedInputIsReadPassedThroughAndHasNoView() throws Exception {
    for (CallbackOptions options : List.of(
        CallbackOptions.DEFAULT.withBorrowedInputs(), CallbackOptions.DEFAULT.withBorrowedInputs().withInline())) {
      String name = options.inline() ? "inline-echo" : "echo";
      AtomicReference<String> seen = new AtomicReference<>();
      callbacks.register(new HostCallback(name, List.of(F32_N), null, (in, s) -> {
        HostTensor x = in.get(0);
        IllegalStateException noView = assertThrows(IllegalStateException.class, x::data);
        seen.set(x.isBorrowed() + " " + x.toFloatArray()[7] + " " + noView.getMessage());
        return in;
      }), options).toCompletableFuture().get(5, TimeUnit.SECONDS);
      float[] x = ramp(3);
      try (Model exe = program(name)) {
        List<HostTensor> out = callbacks.run(exe, Argument.of(List.of(HostTensor.ofFloats(x))));
        assertArrayEquals(times2(plus(x, 1)), out.get(0).toFloatArray(), 0f, name);
      }
      assertTrue(seen.get().startsWith("true 11.0 "), seen.get());
      assertTrue(seen.get().contains("input 0 of host callback '" + name + "'"), seen.get());
      assertTrue(seen.get().contains("copy()"), seen.get());
    }
  }

  @Test
  void aBorrowedInputFailsAfterItsCallAndItsCopyLivesOn() throws Exception {
    List<HostTensor> kept = new ArrayList<>();
    List<HostTensor> copies = new ArrayList<>();
    callbacks.register(new HostCallback("keeper", List.of(F32_N), null, (in, s) -> {
      kept.add(in.get(0));
      copies.add(in.get(0).copy());
      return List.of(in.get(0).copy());
    }), CallbackOptions.DEFAULT.withBorrowedInputs()).toCompletableFuture().get(5, TimeUnit.SECONDS);
    float[] x = ramp(-5);
    try (Model exe = program("keeper")) {
      assertArrayEquals(times2(plus(x, 1)), callbacks.run(exe, Argument.of(List.of(HostTensor.ofFloats(x)))).get(0).toFloatArray(), 0f);
    }
    IllegalStateException late = assertThrows(IllegalStateException.class, () -> kept.get(0).toFloatArray());
    assertTrue(late.getMessage().contains("input 0 of host callback 'keeper'")
        && late.getMessage().contains("answered or given up"), late.getMessage());
    assertThrows(IllegalStateException.class, () -> kept.get(0).copy());
    // Returning a borrowed input after its call has ended fails the new call, saying why.
    callbacks.register(new HostCallback("stale", List.of(F32_N), null, (in, s) -> List.of(kept.get(0))))
        .toCompletableFuture().get(5, TimeUnit.SECONDS);
    try (Model exe = program("stale")) {
      Exception e = assertThrows(Exception.class, () -> callbacks.run(exe, Argument.of(List.of(HostTensor.ofFloats(x)))));
      CallbackException cause = assertInstanceOf(CallbackException.class, e instanceof CallbackException ? e : e.getCause(), e::toString);
      assertEquals(ErrorCode.INVALID_ARGUMENT, cause.code(), cause.getMessage());
      assertTrue(cause.getMessage().contains("output 0 can no longer be read")
          && cause.getMessage().contains("input 0 of host callback 'keeper'"), cause.getMessage());
    }
    HostTensor copy = copies.get(0);
    assertFalse(copy.isBorrowed());
    assertArrayEquals(plus(x, 1), copy.toFloatArray(), 0f);
    assertEquals(-3f, copy.data().asFloatBuffer().get(1)); // a copy is an ordinary tensor, with views
    copy.close();
  }

  @Test
  void aReaderRacingWithTheEndOfTheCallSeesTheCallsValuesOrAnErrorNeverReusedMemory() throws Exception {
    ConcurrentLinkedQueue<String> problems = new ConcurrentLinkedQueue<>();
    AtomicInteger goodReads = new AtomicInteger();
    AtomicInteger endedReaders = new AtomicInteger();
    List<Thread> readers = new ArrayList<>();
    AtomicReference<float[]> expected = new AtomicReference<>();
    callbacks.register(new HostCallback("raced", List.of(F32_N), null, (in, s) -> {
      HostTensor x = in.get(0);
      float[] want = expected.get();
      java.util.concurrent.CountDownLatch reading = new java.util.concurrent.CountDownLatch(1);
      Thread reader = new Thread(() -> {
        while (true) {
          reading.countDown();
          float[] got;
          try {
            got = x.toFloatArray();
          } catch (IllegalStateException ended) {
            endedReaders.incrementAndGet();
            return;
          }
          if (!Arrays.equals(want, got)) {
            problems.add("a read saw other values than the call's: element 0 is " + got[0] + ", expected " + want[0]);
            return;
          }
          goodReads.incrementAndGet();
        }
      });
      synchronized (readers) {
        readers.add(reader);
      }
      reader.start();
      try {
        reading.await(5, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      return in; // the reader is reading: it races with the end of the call, and with the next run
    }), CallbackOptions.DEFAULT.withBorrowedInputs()).toCompletableFuture().get(5, TimeUnit.SECONDS);
    callbacks.register(new HostCallback("then", List.of(F32_N), null, (in, s) -> in)).toCompletableFuture().get(5, TimeUnit.SECONDS);
    int runs = 30;
    try (Model exe = twoCalls("raced", "then")) {
      for (int run = 0; run < runs; run++) {
        float[] x = ramp(run * 1000f);
        expected.set(plus(x, 1));
        assertArrayEquals(plus(x, 2), callbacks.run(exe, Argument.of(List.of(HostTensor.ofFloats(x)))).get(0).toFloatArray(), 0f);
      }
    }
    for (Thread reader : readers) {
      reader.join(TimeUnit.SECONDS.toMillis(20));
    }
    assertTrue(problems.isEmpty(), problems.toString());
    assertEquals(runs, endedReaders.get(), "every reader ended with IllegalStateException once its call was over");
    System.err.printf("borrowed inputs: %d reads of a 4 MiB input raced with the end of %d calls, all exact%n",
        goodReads.get(), runs);
  }

  @Test
  void aFunctionStillReadingWhenItsCallTimesOutGetsAnErrorAndTheRunFailsAtItsTimeout() throws Exception {
    AtomicInteger readsAfterTimeout = new AtomicInteger();
    AtomicReference<IllegalStateException> ended = new AtomicReference<>();
    callbacks.register(new HostCallback("slow-reader", List.of(F32_N), null, (in, s) -> {
      long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1500);
      long timeoutAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(300);
      while (System.nanoTime() < until) {
        try {
          in.get(0).toFloatArray();
          if (System.nanoTime() > timeoutAt + TimeUnit.MILLISECONDS.toNanos(500)) {
            readsAfterTimeout.incrementAndGet();
          }
        } catch (IllegalStateException e) {
          ended.set(e);
          break;
        }
        // A borrowed read ignores interrupts (it is a copy); the function keeps going as a stubborn one would.
        Thread.interrupted();
      }
      return in;
    }), CallbackOptions.DEFAULT.withBorrowedInputs()).toCompletableFuture().get(5, TimeUnit.SECONDS);
    try (Model exe = program("slow-reader")) {
      long t0 = System.nanoTime();
      Exception e = assertThrows(Exception.class, () -> callbacks.run(exe, Argument.of(List.of(HostTensor.ofFloats(ramp(0))))));
      long failedAfterMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      CallbackException cause = assertInstanceOf(CallbackException.class, e instanceof CallbackException ? e : e.getCause(), e::toString);
      assertEquals(ErrorCode.DEADLINE_EXCEEDED, cause.code(), cause.getMessage());
      assertTrue(failedAfterMs < 1400, "the run failed " + failedAfterMs + " ms after it started, not at its 300 ms timeout");
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
    while (ended.get() == null && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertTrue(ended.get() != null && ended.get().getMessage().contains("answered or given up"), String.valueOf(ended.get()));
    assertEquals(0, readsAfterTimeout.get(), "no read succeeded well after the call was given up");
  }

  @Test
  void aCallbackRegisteredWithoutTheOptionGetsCopies() throws Exception {
    AtomicReference<Boolean> borrowed = new AtomicReference<>();
    callbacks.register(new HostCallback("copied", List.of(F32_N), null, (in, s) -> {
      borrowed.set(in.get(0).isBorrowed());
      in.get(0).data(); // an owned tensor has views
      return in;
    })).toCompletableFuture().get(5, TimeUnit.SECONDS);
    float[] x = ramp(1);
    try (Model exe = program("copied")) {
      assertArrayEquals(times2(plus(x, 1)), callbacks.run(exe, Argument.of(List.of(HostTensor.ofFloats(x)))).get(0).toFloatArray(), 0f);
    }
    assertFalse(borrowed.get());
  }
}
