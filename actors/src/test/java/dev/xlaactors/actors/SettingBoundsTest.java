package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.actors.jobs.JobSettings;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.SettingRanges;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.Test;

/**
 * Every numeric and duration setting of the actors module has a range, and a value outside it is refused
 * when the settings are read, naming the key, the value and the range: a duration longer than Pekko's
 * scheduler can time ({@code runs.timeout = 365d} stopped run supervisors) and an absurd count ({@code
 * callbacks.threads = 100000} hung {@code create()}).
 */
class SettingBoundsTest {
  private static final String ROOT = "xla-actors.actors.";

  private static Config with(String hocon) {
    return ConfigFactory.parseString(hocon).withFallback(ConfigFactory.defaultReference()).resolve();
  }

  private static XlaException refusedActors(String key, String value) {
    return assertThrows(XlaException.class, () -> ActorsSettings.fromConfig(with(ROOT + key + " = " + value)), key);
  }

  @Test
  void theLongestDelayIsWhatPekkosSchedulerReallyAccepts() {
    Duration longest = SettingRanges.longestDelay(ConfigFactory.load());
    // 10 ms ticks x (2^31 - 1), in whole seconds: about 248.5 days.
    assertEquals(Duration.ofSeconds(21_474_836), longest);
    ActorTestKit kit = ActorTestKit.create();
    try {
      var scheduler = kit.system().scheduler();
      scheduler.scheduleOnce(longest, () -> {}, kit.system().executionContext()).cancel(); // whole seconds: 0.47 s below the limit
      IllegalArgumentException tooFar = assertThrows(IllegalArgumentException.class,
          () -> scheduler.scheduleOnce(longest.plusSeconds(1), () -> {}, kit.system().executionContext()));
      assertTrue(tooFar.getMessage().contains("too far in future"), tooFar.getMessage());
    } finally {
      kit.shutdownTestKit();
    }
    Config fineTicks = ConfigFactory.parseString("pekko.scheduler.tick-duration = 1ms").withFallback(ConfigFactory.load());
    assertEquals(Duration.ofSeconds(2_147_483), SettingRanges.longestDelay(fineTicks));
  }

  @Test
  void everyDurationLongerThanTheSchedulerCanTimeIsRefusedNamingKeyValueAndLargest() {
    for (String key : List.of("callbacks.default-timeout", "callbacks.registration-timeout", "runs.timeout",
        "runs.native-backstop-slack", "metrics.log-interval", "callbacks.timeouts.tokenize")) {
      XlaException e = refusedActors(key, "365d");
      assertTrue(e.getMessage().contains(ROOT + key + " = 365d is longer than the largest accepted, 21474836s (248 days"),
          e.getMessage());
      assertTrue(e.getMessage().contains("pekko.scheduler.tick-duration"), e.getMessage());
    }
    for (String key : List.of("jobs.backoff-min", "jobs.backoff-max", "jobs.timeout", "jobs.progress-interval")) {
      XlaException e = assertThrows(XlaException.class, () -> JobSettings.fromConfig(with(ROOT + key + " = 365d")), key);
      assertTrue(e.getMessage().contains(ROOT + key + " = 365d is longer than the largest accepted, 21474836s"), e.getMessage());
    }
    // The job's step timeout is the run timeout plus the slack plus a minute: together they must fit too.
    XlaException sum = assertThrows(XlaException.class,
        () -> ActorsSettings.fromConfig(with(ROOT + "runs.timeout = 248d\n" + ROOT + "runs.native-backstop-slack = 1d")));
    assertTrue(sum.getMessage().contains(ROOT + "runs.timeout (248d) + " + ROOT + "runs.native-backstop-slack (1d) + 1m"),
        sum.getMessage());
    // Years would even overflow a long of nanoseconds (an ArithmeticException before).
    assertTrue(refusedActors("runs.timeout", "1000000d").getMessage().contains("is longer than the largest accepted"));
  }

  @Test
  void everyCountOutsideItsRangeIsRefusedNamingKeyValueAndRange() {
    Map<String, String> actors = Map.of(
        "callbacks.threads", "100000",
        "callbacks.max-stuck-threads", "100000",
        "runs.queue-capacity", "2000000000");
    actors.forEach((key, value) -> {
      XlaException e = refusedActors(key, value);
      assertTrue(e.getMessage().startsWith(ROOT + key + " = " + value + " is out of range"), e.getMessage());
    });
    assertTrue(refusedActors("callbacks.spin", "10s").getMessage()
        .contains(ROOT + "callbacks.spin = 10s is longer than the largest accepted, 100ms"));
    assertTrue(refusedActors("callbacks.threads", "100000").getMessage()
        .contains("must be from 1 to 1024 (threads that run callback functions)"));
    Map<String, String> jobs = Map.of(
        "computations.pool-size", "100000",
        "computations.queue-capacity", "2000000000",
        "jobs.max-retries", "1000000",
        "jobs.sync-every", "2000000000");
    jobs.forEach((key, value) -> {
      XlaException e = assertThrows(XlaException.class, () -> JobSettings.fromConfig(with(ROOT + key + " = " + value)), key);
      assertTrue(e.getMessage().startsWith(ROOT + key + " = " + value + " is out of range"), e.getMessage());
    });
    String pool = ROOT + "run-dispatcher.thread-pool-executor.fixed-pool-size";
    XlaException e = assertThrows(XlaException.class, () -> ActorsSettings.fromConfig(with(pool + " = 100000")));
    assertTrue(e.getMessage().contains(pool + " (the dispatcher named by " + ROOT + "runs.dispatcher) must be a count from 1 to 1024, got 100000"),
        e.getMessage());
  }

  @Test
  void theLargestAcceptedDurationsStillRunProgramsAndEnforceCallbackTimeouts() throws Exception {
    Config config = ConfigFactory.parseString(ROOT + "runs.timeout = 248d\n" + ROOT + "callbacks.default-timeout = 248d\n"
        + ROOT + "callbacks.timeouts.slow = 300ms").withFallback(ConfigFactory.load());
    ActorTestKit kit = ActorTestKit.create(config);
    try (XlaClient client = XlaClient.create();
        CallbackRuntime callbacks = CallbackRuntime.create(kit.system(), client);
        Model identity = Model.compile(client, Programs.oneCall("twice", "tensor<2xf32>"));
        Model slow = Model.compile(client, Programs.oneCall("slow", "tensor<2xf32>"))) {
      TensorType f32x2 = TensorType.of(DType.F32, 2);
      callbacks.register("twice", List.of(f32x2), null, (in, s) -> List.of(HostTensor.ofFloats(new float[] {2, 4})))
          .toCompletableFuture().join();
      callbacks.register("slow", List.of(f32x2), null, (in, s) -> {
        Thread.sleep(5_000);
        return in;
      }).toCompletableFuture().join();
      for (int i = 0; i < 40; i++) {
        assertArrayEquals(new float[] {6, 12}, callbacks.start(identity, Argument.of(List.of(HostTensor.ofFloats(new float[] {1, 2}))))
            .result().toCompletableFuture().get().get(0).toFloatArray(), 0f);
      }
      long start = System.nanoTime();
      XlaException timedOut = assertThrows(XlaException.class, () -> callbacks.run(slow, Argument.of(List.of(HostTensor.ofFloats(new float[2])))));
      assertTrue(timedOut.getMessage().contains("callbacks.timeouts.slow"), timedOut.getMessage());
      assertTrue(System.nanoTime() - start < 4_000_000_000L, "the callback timeout was enforced");
    } finally {
      kit.shutdownTestKit();
    }
  }
}
