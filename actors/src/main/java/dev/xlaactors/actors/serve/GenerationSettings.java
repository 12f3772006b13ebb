package dev.xlaactors.actors.serve;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.KnownConfigKeys;
import dev.xlaactors.runtime.SettingRanges;
import java.time.Duration;
import org.apache.pekko.actor.typed.ActorSystem;

/**
 * The settings of {@link GenerationServer}, read once from {@code xla-actors.actors.generation} (see the
 * actors module's reference.conf) and range-checked; a bad value fails naming the key.
 *
 * @param maxWaiting requests that may wait for a free slot at once; past it a request is refused (overloaded)
 * @param defaultTimeout how long a request without its own timeout may take, waiting included
 * @param dispatcher config path of the dispatcher whose threads run the iterations (they block in PJRT)
 * @param promptCache whether a request reuses the prompt prefix a free slot's KV-cache row still holds (only with
 *     a decoder that {@link SlotDecoder#keepsFreeRows keeps free rows}; elsewhere it has no effect)
 */
public record GenerationSettings(int maxWaiting, Duration defaultTimeout, String dispatcher, boolean promptCache) {
  private static final String ROOT = "xla-actors.actors.generation";
  private static final String RUNS_DISPATCHER = "xla-actors.actors.runs.dispatcher";

  /** Settings with the prompt cache on (the default). */
  public GenerationSettings(int maxWaiting, Duration defaultTimeout, String dispatcher) {
    this(maxWaiting, defaultTimeout, dispatcher, true);
  }

  public GenerationSettings {
    SettingRanges.check(maxWaiting, ROOT + ".max-waiting", String.valueOf(maxWaiting), 0, SettingRanges.MAX_QUEUE,
        "requests waiting for a slot");
    if (defaultTimeout == null || defaultTimeout.isNegative() || defaultTimeout.isZero()) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, ROOT + ".default-timeout must be a positive duration, got " + defaultTimeout);
    }
  }

  /** Settings from the actor system's config. */
  public static GenerationSettings create(ActorSystem<?> system) {
    return fromConfig(system.settings().config());
  }

  /** Settings from {@code config} (which must hold the actors module's reference.conf). */
  public static GenerationSettings fromConfig(Config config) {
    KnownConfigKeys.check(config);
    try {
      Config c = config.getConfig(ROOT);
      String dispatcher = c.getString("dispatcher");
      if (!config.hasPath(dispatcher) || !config.getConfig(dispatcher).hasPath("type")) {
        throw new XlaException(ErrorCode.INVALID_ARGUMENT, ROOT + ".dispatcher must be the config path of a dispatcher section "
            + "(with type = Dispatcher), got \"" + dispatcher + "\"; e.g. \"xla-actors.actors.generation-dispatcher\"");
      }
      String runs = config.hasPath(RUNS_DISPATCHER) ? config.getString(RUNS_DISPATCHER) : null;
      if (dispatcher.equals(runs)) {
        throw new XlaException(ErrorCode.INVALID_ARGUMENT, ROOT + ".dispatcher = \"" + dispatcher + "\" is also " + RUNS_DISPATCHER
            + ": a generation step blocks its thread until its runs finish, and they wait for a thread of that same pool, so with "
            + "as many served models as threads every thread waits and nothing runs; give generation its own pool, e.g. "
            + "\"xla-actors.actors.generation-dispatcher\" (the default)");
      }
      return new GenerationSettings(
          SettingRanges.count(c, "max-waiting", ROOT + ".max-waiting", 0, SettingRanges.MAX_QUEUE, "requests waiting for a slot"),
          SettingRanges.timed(config, c, "default-timeout", ROOT + ".default-timeout"),
          dispatcher,
          onOff(c, "prompt-cache", ROOT + ".prompt-cache"));
    } catch (ConfigException e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, "bad configuration under " + ROOT + ": " + e.getMessage(), e);
    }
  }

  private static boolean onOff(Config c, String key, String path) {
    try {
      return c.getBoolean(key);
    } catch (ConfigException.WrongType e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, path + " must be on or off, got " + c.getValue(key).render());
    }
  }

  /** These settings with {@code maxWaiting} requests allowed to wait. */
  public GenerationSettings withMaxWaiting(int maxWaiting) {
    return new GenerationSettings(maxWaiting, defaultTimeout, dispatcher, promptCache);
  }

  /** These settings with {@code timeout} for requests that give none. */
  public GenerationSettings withDefaultTimeout(Duration timeout) {
    return new GenerationSettings(maxWaiting, timeout, dispatcher, promptCache);
  }

  /** These settings with the prompt cache on or off. */
  public GenerationSettings withPromptCache(boolean on) {
    return new GenerationSettings(maxWaiting, defaultTimeout, dispatcher, on);
  }
}
