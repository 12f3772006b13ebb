package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A run whose callback ignores interrupts and outlives its timeout fails with DEADLINE_EXCEEDED; when
 * its caller learns of the failure, the run's host call is no longer counted as pending ({@link
 * HostCall#pendingCount()}): it was failed before the outcome was decided. Before, the count dropped
 * only once the run's XLA thread woke up and left the native handler, which the caller could beat (seen
 * in 1 of 2 runs of a single check; this repeats it 50 times).
 */
class TimedOutCallbackPendingTest {
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static final List<TensorType> F32_4 = List.of(TensorType.of(DType.F32, 4));
  private static final HostTensor INPUT = HostTensor.ofFloats(new float[] {1, 2, 3, 4});
  private static final int RUNS = 50;

  private static XlaClient client;
  private static CallbackRuntime callbacks;

  @BeforeAll
  static void start() {
    client = XlaClient.create();
    ActorsSettings settings = ActorsSettings.fromConfig(
        ConfigFactory.parseString("xla-actors.actors.callbacks.timeouts.stubborn = 50ms").withFallback(testKit.system().settings().config()));
    callbacks = CallbackRuntime.create(testKit.system(), client, settings);
    callbacks.register("stubborn", F32_4, null, (in, s) -> {
      // Sleeps 150 ms, three times its timeout, whatever interrupts it.
      long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(150);
      for (long left = until - System.nanoTime(); left > 0; left = until - System.nanoTime()) {
        try {
          TimeUnit.NANOSECONDS.sleep(left);
        } catch (InterruptedException ignored) {
          // on purpose: this callback does not stop when told to
        }
      }
      return in;
    }).toCompletableFuture().join();
  }

  @AfterAll
  static void stop() {
    callbacks.close();
    client.close();
    testKit.shutdownTestKit();
  }

  @Test
  void aRunFailedByItsTimedOutCallbackHoldsNoPendingHostCallWhenItsCallerLearnsOfIt() throws Exception {
    List<String> counted = new ArrayList<>();
    try (Model exe = Model.compile(client, Programs.oneCall("stubborn", "tensor<4xf32>"))) {
      // A first run warms the path up: on a cold JVM, spawning the first supervisor can take longer than
      // the callback's 150 ms, and its late answer then wins over the timeout.
      callbacks.start(exe, Argument.of(List.of(INPUT))).result().toCompletableFuture().handle((outputs, failure) -> null).get(10, TimeUnit.SECONDS);
      for (int i = 0; i < RUNS; i++) {
        RunHandle run = callbacks.start(exe, Argument.of(List.of(INPUT)));
        CompletableFuture<List<HostTensor>> result = run.result().toCompletableFuture();
        // Read at the very moment the failure is delivered (on the thread that completes the future) ...
        CompletableFuture<Integer> atFailure = result.handle((outputs, failure) -> HostCall.pendingCount());
        Throwable failure = null;
        try {
          result.get(10, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
          failure = e.getCause();
        }
        // ... and as the caller that waited on it sees it.
        int afterGet = HostCall.pendingCount();
        CallbackException e = assertInstanceOf(CallbackException.class, failure instanceof CompletionException c ? c.getCause() : failure);
        assertEquals(ErrorCode.DEADLINE_EXCEEDED, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains("callback 'stubborn' did not answer within 50ms"), e.getMessage());
        int whenFailed = atFailure.get(10, TimeUnit.SECONDS);
        if (whenFailed != 0 || afterGet != 0) {
          counted.add("run " + i + ": " + whenFailed + " pending as the failure was delivered, " + afterGet + " after get()");
        }
      }
    }
    assertEquals(List.of(), counted, "host calls still counted as pending when the caller learned of the failure");
  }
}
