package dev.xlaactors.actors;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import com.typesafe.config.ConfigValue;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.KnownConfigKeys;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.apache.pekko.actor.typed.ActorSystem;

/**
 * The actors module's settings, read once from {@code xla-actors.actors} (see its reference.conf) and
 * validated: a missing or unknown key, a wrong type or unit, or a non-positive duration is an {@link
 * XlaException} naming the key.
 *
 * @param defaultCallbackTimeout how long a callback may take unless overridden by name
 * @param callbackTimeouts per-callback-name overrides
 * @param callbackDispatcher config path of the dispatcher that runs callback functions
 * @param registrationTimeout how long a registration waits for the dispatcher's answer
 * @param runTimeout upper bound on one run
 * @param nativeBackstopSlack extra native wait beyond the actors' timeouts
 * @param runDispatcher config path of the dispatcher whose threads block in execute
 * @param logMetrics whether runtimes log their metrics periodically
 * @param metricsLogInterval how often they do
 * @param runMode how graphs run unless a run chooses ({@code runs.mode})
 */
public record ActorsSettings(
    Duration defaultCallbackTimeout,
    Map<String, Duration> callbackTimeouts,
    String callbackDispatcher,
    Duration registrationTimeout,
    Duration runTimeout,
    Duration nativeBackstopSlack,
    String runDispatcher,
    boolean logMetrics,
    Duration metricsLogInterval,
    RunMode runMode) {
  private static final String ROOT = "xla-actors.actors";

  public ActorsSettings {
    callbackTimeouts = Map.copyOf(callbackTimeouts);
    java.util.Objects.requireNonNull(runMode, "runMode");
  }

  /** Settings of graphs run fused (the Phase 1 constructor). */
  public ActorsSettings(Duration defaultCallbackTimeout, Map<String, Duration> callbackTimeouts, String callbackDispatcher,
      Duration registrationTimeout, Duration runTimeout, Duration nativeBackstopSlack, String runDispatcher,
      boolean logMetrics, Duration metricsLogInterval) {
    this(defaultCallbackTimeout, callbackTimeouts, callbackDispatcher, registrationTimeout, runTimeout,
        nativeBackstopSlack, runDispatcher, logMetrics, metricsLogInterval, RunMode.FUSED);
  }

  /** Settings from the actor system's config. */
  public static ActorsSettings create(ActorSystem<?> system) {
    return fromConfig(system.settings().config());
  }

  public static ActorsSettings fromConfig(Config config) {
    KnownConfigKeys.check(config);
    try {
      Config c = config.getConfig(ROOT);
      Map<String, Duration> overrides = new HashMap<>();
      Config timeouts = c.getConfig("callbacks.timeouts");
      for (Map.Entry<String, ConfigValue> e : c.getObject("callbacks.timeouts").entrySet()) {
        String name = e.getKey();
        overrides.put(name, positive(timeouts, "\"" + name + "\"", "callbacks.timeouts." + name));
      }
      return new ActorsSettings(
          positive(c, "callbacks.default-timeout", "callbacks.default-timeout"),
          overrides,
          c.getString("callbacks.dispatcher"),
          positive(c, "callbacks.registration-timeout", "callbacks.registration-timeout"),
          positive(c, "runs.timeout", "runs.timeout"),
          positive(c, "runs.native-backstop-slack", "runs.native-backstop-slack"),
          c.getString("runs.dispatcher"),
          c.getBoolean("metrics.log"),
          positive(c, "metrics.log-interval", "metrics.log-interval"),
          RunMode.parse(c.getString("runs.mode"), ROOT + ".runs.mode"));
    } catch (ConfigException e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, "bad configuration under " + ROOT + ": " + e.getMessage(), e);
    }
  }

  /** The timeout of the callback named {@code name}, and the config key it came from. */
  public Timeout callbackTimeout(String name) {
    Duration override = callbackTimeouts.get(name);
    return override != null
        ? new Timeout(override, ROOT + ".callbacks.timeouts." + name)
        : new Timeout(defaultCallbackTimeout, ROOT + ".callbacks.default-timeout");
  }

  /** A duration and the config key that set it, for error messages. */
  public record Timeout(Duration duration, String key) {}

  private static Duration positive(Config c, String path, String keyForMessage) {
    Duration d = c.getDuration(path);
    if (d.isNegative() || d.isZero()) {
      throw new XlaException(
          ErrorCode.INVALID_ARGUMENT, ROOT + "." + keyForMessage + " must be a positive duration, got " + d);
    }
    return d;
  }
}
