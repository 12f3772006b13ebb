package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** A null argument to register fails the registration at once, naming the argument (it timed out after 10 s). */
class RegisterArgumentsTest {
  private static ActorTestKit testKit;
  private static XlaClient client;
  private static CallbackRuntime callbacks;

  @BeforeAll
  static void start() {
    testKit = ActorTestKit.create();
    client = XlaClient.create();
    callbacks = CallbackRuntime.create(testKit.system(), client);
  }

  @AfterAll
  static void stop() {
    callbacks.close();
    client.close();
    testKit.shutdownTestKit();
  }

  private static void failsAtOnce(Supplier<CompletionStage<?>> register, String message) {
    long start = System.nanoTime();
    ExecutionException e = assertThrows(ExecutionException.class,
        () -> register.get().toCompletableFuture().get(5, TimeUnit.SECONDS));
    assertTrue(System.nanoTime() - start < 1_000_000_000L, "failed after " + (System.nanoTime() - start) / 1_000_000 + " ms");
    InvalidArgumentException cause = assertInstanceOf(InvalidArgumentException.class, e.getCause());
    assertTrue(cause.getMessage().contains(message), cause.getMessage());
  }

  @Test
  void nullArgumentsFailAtOnceNamingWhatIsMissing() {
    List<TensorType> f4 = List.of(TensorType.of(DType.F32, 4));
    failsAtOnce(() -> callbacks.register("f", null, null, (in, s) -> in), "register of callback 'f' needs an output template");
    failsAtOnce(() -> callbacks.register("f", f4, null, null), "register of callback 'f' needs a function, got null");
    failsAtOnce(() -> callbacks.register("f", Arrays.asList((TensorType) null), null, (in, s) -> in),
        "register of callback 'f' has a null output type at index 0");
    failsAtOnce(() -> callbacks.register(null), "register needs a callback, got null");
    failsAtOnce(() -> callbacks.register(new dev.xlaactors.runtime.HostCallback("g", f4, null, (in, s) -> in), null),
        "register of callback 'g' needs options");
    failsAtOnce(() -> callbacks.registerServer("h", f4, null), "registerServer of callback 'h' needs a server actor, got null");
  }
}
