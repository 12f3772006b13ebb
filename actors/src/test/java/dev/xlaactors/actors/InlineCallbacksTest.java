package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Callbacks registered inline run on the thread that made the call, give the same values in program
 * order, and keep their timeouts: an inline function that overruns fails the run at its deadline, and
 * its late answer is neither seen by XLA nor counted.
 */
class InlineCallbacksTest {
  private static final TensorType F32 = TensorType.of(DType.F32);

  private ActorTestKit testKit;
  private XlaClient client;
  private CallbackRuntime callbacks;

  @BeforeEach
  void start() {
    testKit = ActorTestKit.create(ConfigFactory.parseString("""
        xla-actors.actors.callbacks.default-timeout = 5s
        xla-actors.actors.callbacks.timeouts { slow = 200ms }
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

  /** K calls of {@code name} in sequence, each adding what the function returns to the running value. */
  private Model chain(String name, int k) {
    StringBuilder body = new StringBuilder();
    String x = "%x";
    for (int i = 0; i < k; i++) {
      body.append(Programs.call("%c" + i, name, List.of(x), List.of("tensor<f32>"), List.of("tensor<f32>"))).append('\n');
      x = "%c" + i;
    }
    return Model.compile(client, "func.func @main(%x: tensor<f32>) -> tensor<f32> {\n" + body + "  return " + x + " : tensor<f32>\n}");
  }

  @Test
  void anInlineCallbackRunsOnTheCallingThreadInProgramOrder() throws Exception {
    Set<String> threads = ConcurrentHashMap.newKeySet();
    AtomicInteger calls = new AtomicInteger();
    callbacks.registerInline(new HostCallback("double", List.of(F32), null, (in, s) -> {
      threads.add(Thread.currentThread().getName());
      calls.incrementAndGet();
      return List.of(HostTensor.scalar(in.get(0).toFloatArray()[0] * 2));
    })).toCompletableFuture().get(5, TimeUnit.SECONDS);
    try (Model exe = chain("double", 10)) {
      for (int run = 0; run < 20; run++) {
        List<HostTensor> out = callbacks.run(exe, Argument.of(List.of(HostTensor.scalar((float) run))));
        assertEquals(run * 1024f, out.get(0).toFloatArray()[0], "run " + run);
      }
    }
    assertEquals(200, calls.get());
    for (String name : threads) {
      assertFalse(name.startsWith("xla-callbacks-"), "ran on a callback thread: " + threads);
    }
    RuntimeMetrics.Snapshot m = callbacks.metrics().callbacks().get("double");
    assertEquals(200, m.count());
    assertEquals(0, m.failures());
  }

  @Test
  void anInlineFunctionThatOverrunsFailsTheRunAtItsDeadlineAndItsLateAnswerIsDropped() throws Exception {
    AtomicInteger returned = new AtomicInteger();
    callbacks.registerInline(new HostCallback("slow", List.of(F32), null, (in, s) -> {
      try {
        Thread.sleep(800);
      } catch (InterruptedException e) {
        throw new IllegalStateException("an inline function is never interrupted", e);
      }
      returned.incrementAndGet();
      return List.of(in.get(0));
    })).toCompletableFuture().get(5, TimeUnit.SECONDS);
    try (Model exe = chain("slow", 1)) {
      long t0 = System.nanoTime();
      RunHandle handle = callbacks.start(exe, Argument.of(List.of(HostTensor.scalar(1f))));
      CompletionException e = assertThrows(CompletionException.class, () -> handle.result().toCompletableFuture().join());
      long failedAfterMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      CallbackException cause = assertInstanceOf(CallbackException.class, e.getCause());
      assertEquals(ErrorCode.DEADLINE_EXCEEDED, cause.code());
      assertTrue(cause.getMessage().contains("slow"), cause.getMessage());
      assertTrue(failedAfterMs < 700, "the caller learned of the timeout after " + failedAfterMs + " ms, before the function returned");
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
      while (returned.get() == 0 && System.nanoTime() < deadline) {
        Thread.sleep(10);
      }
      assertEquals(1, returned.get(), "the function ran to its end: it is not interrupted");
      Thread.sleep(100);
      RuntimeMetrics.Snapshot m = callbacks.metrics().callbacks().get("slow");
      assertEquals(1, m.count(), "the late answer is not an extra call");
      assertEquals(1, m.timeouts());
      assertEquals(0, callbacks.metrics().stuckCallbackThreads(), "XLA's thread is not a callback thread");
    }
  }

  @Test
  void aNameRegisteredInlineIsNotTheSameCallbackAsOneOnTheCallbackThreads() throws Exception {
    HostCallback echo = new HostCallback("echo", List.of(F32), null, (in, s) -> in);
    callbacks.registerInline(echo).toCompletableFuture().get(5, TimeUnit.SECONDS);
    assertEquals("echo", callbacks.registerInline(echo).toCompletableFuture().get(5, TimeUnit.SECONDS).name(),
        "registering the same inline callback again is harmless");
    CompletionException e = assertThrows(CompletionException.class, () -> callbacks.register(echo).toCompletableFuture().join());
    XlaException cause = assertInstanceOf(XlaException.class, e.getCause());
    assertEquals(ErrorCode.ALREADY_EXISTS, cause.code());
  }
}
