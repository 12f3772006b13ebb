package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.util.List;
import java.util.concurrent.CompletionException;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.junit.jupiter.api.Test;

/**
 * Misspellings that would otherwise be silently ignored: the {@code xla-actors} prefix itself, a module
 * name under it, and a callback's name under {@code callbacks.timeouts}. Each is refused naming the key
 * and the nearest valid one.
 */
class MisspeltSettingsTest {
  private static Config with(String hocon) {
    return ConfigFactory.parseString(hocon).withFallback(ConfigFactory.defaultReference()).resolve();
  }

  @Test
  void aMisspeltPrefixIsRefusedNamingTheNearestOne() {
    for (String prefix : List.of("xla-actor", "xla_actors", "xlaactors", "xla-actorz")) {
      XlaException e = assertThrows(XlaException.class,
          () -> ActorsSettings.fromConfig(with(prefix + ".actors.runs.timeout = 1m")));
      assertEquals(ErrorCode.INVALID_ARGUMENT, e.code());
      assertTrue(e.getMessage().startsWith("unknown configuration key prefix " + prefix + " ("), e.getMessage());
      assertTrue(e.getMessage().contains("did you mean xla-actors?"), e.getMessage());
    }
  }

  @Test
  void aMisspeltModuleIsRefusedWithTheSameKeyUnderTheRightModule() {
    XlaException e = assertThrows(XlaException.class,
        () -> ActorsSettings.fromConfig(with("xla-actors.actorz.callbacks.timeouts.tokenize = 2s")));
    assertTrue(e.getMessage().contains("unknown configuration key xla-actors.actorz.callbacks.timeouts.tokenize"), e.getMessage());
    assertTrue(e.getMessage().contains("did you mean xla-actors.actors.callbacks.timeouts.tokenize?"), e.getMessage());
  }

  @Test
  void unrelatedTopLevelKeysAreLeftAlone() {
    ActorsSettings s = ActorsSettings.fromConfig(with("my-app.timeout = 3s\nxla.other = 1"));
    assertEquals(java.time.Duration.ofMinutes(10), s.runTimeout());
  }

  @Test
  void aMisspeltCallbackNameUnderTimeoutsIsRefusedAtRegistration() {
    Config config = ConfigFactory.parseString("""
        xla-actors.actors.callbacks.timeouts { tokenise = 2s, step2 = 3s, encode = 4s }
        """).withFallback(ConfigFactory.load());
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "misspelt", config);
    try (XlaClient client = XlaClient.create();
        CallbackRuntime callbacks = CallbackRuntime.create(system, client)) {
      List<TensorType> out = List.of(TensorType.of(DType.F32, 2));
      CompletionException e = assertThrows(CompletionException.class,
          () -> callbacks.register(HostCallback.of("tokenize", out, null, (in, s) -> in)).toCompletableFuture().join());
      assertTrue(e.getCause() instanceof XlaException x && x.code() == ErrorCode.INVALID_ARGUMENT, String.valueOf(e.getCause()));
      String message = e.getCause().getMessage();
      assertTrue(message.contains("the key xla-actors.actors.callbacks.timeouts.tokenise names no registered callback"), message);
      assertTrue(message.contains("did you mean xla-actors.actors.callbacks.timeouts.tokenize?"), message);

      // Names that differ only in digits are distinct callbacks; distant names are left alone; and once
      // 'tokenise' is a registered callback, 'tokenize' is accepted too.
      callbacks.register(HostCallback.of("step1", out, null, (in, s) -> in)).toCompletableFuture().join();
      callbacks.register(HostCallback.of("decode", out, null, (in, s) -> in)).toCompletableFuture().join();
      callbacks.register(HostCallback.of("tokenise", out, null, (in, s) -> in)).toCompletableFuture().join();
      callbacks.register(HostCallback.of("tokenize", out, null, (in, s) -> in)).toCompletableFuture().join();
      assertEquals(java.time.Duration.ofSeconds(2), callbacks.settings().callbackTimeout("tokenise").duration());
    } finally {
      system.terminate();
    }
  }
}
