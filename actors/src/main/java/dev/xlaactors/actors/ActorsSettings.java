package dev.xlaactors.actors;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import com.typesafe.config.ConfigValue;
import com.typesafe.config.ConfigValueType;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.KnownConfigKeys;
import dev.xlaactors.runtime.SettingRanges;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.apache.pekko.actor.typed.ActorSystem;

/**
 * The actors module's settings, read once from {@code xla-actors.actors} (see its reference.conf) and
 * validated: a missing or unknown key, a wrong type or unit, a non-positive duration, a duration longer
 * than Pekko's scheduler can time ({@link SettingRanges#longestDelay}) or a count outside its range is an
 * {@link XlaException} naming the key, the value and the range.
 *
 * @param defaultCallbackTimeout how long a callback may take unless overridden by name
 * @param callbackTimeouts per-callback-name overrides
 * @param callbackThreads threads that run callback functions
 * @param maxStuckThreads how many threads stuck in given-up functions are replaced by new ones
 * @param callbackSpin how long an idle callback thread, and an XLA thread waiting for an answer, spin
 * @param registrationTimeout how long a registration waits for the dispatcher's answer
 * @param runTimeout upper bound on one run
 * @param nativeBackstopSlack extra native wait beyond the actors' timeouts
 * @param runDispatcher config path of the dispatcher whose threads block in execute
 * @param runQueueCapacity runs started with {@code start} that may wait for a run thread at once
 * @param logMetrics whether runtimes log their metrics periodically
 * @param metricsLogInterval how often they do
 * @param runMode how graphs run unless a run chooses ({@code runs.mode})
 */
public record ActorsSettings(
    Duration defaultCallbackTimeout,
    Map<String, Duration> callbackTimeouts,
    int callbackThreads,
    int maxStuckThreads,
    Duration callbackSpin,
    Duration registrationTimeout,
    Duration runTimeout,
    Duration nativeBackstopSlack,
    String runDispatcher,
    int runQueueCapacity,
    boolean logMetrics,
    Duration metricsLogInterval,
    RunMode runMode) {
  private static final String ROOT = "xla-actors.actors";

  public ActorsSettings {
    callbackTimeouts = Map.copyOf(callbackTimeouts);
    java.util.Objects.requireNonNull(runMode, "runMode");
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
        overrides.put(name, timed(config, timeouts, "\"" + name + "\"", "callbacks.timeouts." + name));
      }
      String runDispatcher = dispatcher(config, c, "runs.dispatcher");
      Duration runTimeout = timed(config, c, "runs.timeout", "runs.timeout");
      Duration slack = timed(config, c, "runs.native-backstop-slack", "runs.native-backstop-slack");
      // A batch job times one step as the run timeout plus the slack plus a minute (InferenceJob).
      if (runTimeout.plus(slack).plusMinutes(1).compareTo(SettingRanges.longestDelay(config)) > 0) {
        throw new XlaException(ErrorCode.INVALID_ARGUMENT, ROOT + ".runs.timeout (" + asWritten(c.getValue("runs.timeout")) + ") + "
            + ROOT + ".runs.native-backstop-slack (" + asWritten(c.getValue("runs.native-backstop-slack"))
            + ") + 1m (a batch job's step timeout) is longer than the largest accepted, " + SettingRanges.describeLongest(config));
      }
      return new ActorsSettings(
          timed(config, c, "callbacks.default-timeout", "callbacks.default-timeout"),
          overrides,
          count(c, "callbacks.threads", 1, SettingRanges.MAX_THREADS, "threads that run callback functions"),
          count(c, "callbacks.max-stuck-threads", 0, SettingRanges.MAX_THREADS, "replacement threads for stuck callbacks"),
          SettingRanges.duration(c, "callbacks.spin", ROOT + ".callbacks.spin", true, MAX_SPIN,
              "100ms (spinning longer only burns a core; blocking is cheaper by then)"),
          timed(config, c, "callbacks.registration-timeout", "callbacks.registration-timeout"),
          runTimeout,
          slack,
          runDispatcher,
          count(c, "runs.queue-capacity", 1, SettingRanges.MAX_QUEUE, "runs waiting for a run thread"),
          c.getBoolean("metrics.log"),
          timed(config, c, "metrics.log-interval", "metrics.log-interval"),
          RunMode.parse(c.getString("runs.mode"), ROOT + ".runs.mode"));
    } catch (ConfigException e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, "bad configuration under " + ROOT + ": " + e.getMessage(), e);
    }
  }

  /** The timeout of the callback named {@code name}, and the config key it came from (for messages). */
  public Timeout callbackTimeout(String name) {
    Duration override = callbackTimeouts.get(name);
    return override != null
        ? new Timeout(override, ROOT + ".callbacks.timeouts." + name)
        : new Timeout(defaultCallbackTimeout, ROOT + ".callbacks.default-timeout");
  }

  /** The timeout of the callback named {@code name}: a map lookup, for the per-call paths. */
  public Duration callbackTimeoutOf(String name) {
    return callbackTimeouts.getOrDefault(name, defaultCallbackTimeout);
  }

  /** A duration and the config key that set it, for error messages. */
  public record Timeout(Duration duration, String key) {}

  private static final Duration MAX_SPIN = Duration.ofMillis(100);

  /** A duration an actor times: positive, and no longer than Pekko's scheduler can time. */
  private static Duration timed(Config root, Config c, String path, String keyForMessage) {
    return SettingRanges.timed(root, c, path, ROOT + "." + keyForMessage);
  }

  private static int count(Config c, String path, int min, int max, String what) {
    int n;
    try {
      n = c.getInt(path); // a -D value arrives as a string: getInt parses it
    } catch (ConfigException.WrongType e) {
      n = Integer.MIN_VALUE;
    }
    if (n < min) {
      throw new XlaException(
          ErrorCode.INVALID_ARGUMENT, ROOT + "." + path + " must be a count >= " + min + ", got " + asWritten(c.getValue(path)));
    }
    SettingRanges.check(n, ROOT + "." + path, asWritten(c.getValue(path)), min, max, what);
    return n;
  }

  /** A value as the user wrote it ({@code -5s}, not {@code PT-5S}). */
  static String asWritten(ConfigValue v) {
    return String.valueOf(v.unwrapped());
  }

  /**
   * The dispatcher named by {@code key}, checked now so that a bad one fails at start naming the key: it
   * must be the config path of a Pekko dispatcher section ({@code type = Dispatcher}), and a thread pool's
   * {@code fixed-pool-size} in it must be at least 1.
   */
  private static String dispatcher(Config config, Config c, String key) {
    String path = c.getString(key);
    String full = ROOT + "." + key;
    boolean isSection = !path.isBlank() && config.hasPath(path) && config.getValue(path).valueType() == ConfigValueType.OBJECT;
    if (!isSection || !config.getConfig(path).hasPath("type")) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT,
          full + " must be the config path of a dispatcher section (with type = Dispatcher), got \"" + path
              + "\", which " + (isSection ? "has no type key" : "is not a section of the configuration")
              + "; e.g. " + full + " = \"" + ROOT + ".run-dispatcher\"");
    }
    Config d = config.getConfig(path);
    for (String pool : new String[] {"thread-pool-executor.fixed-pool-size", "fork-join-executor.parallelism-min"}) {
      if (!d.hasPath(pool)) {
        continue;
      }
      int size;
      try {
        size = d.getInt(pool); // a -D value arrives as a string: getInt parses it
      } catch (ConfigException e) {
        size = 0;
      }
      if (size < 1 || size > SettingRanges.MAX_THREADS) {
        throw new XlaException(ErrorCode.INVALID_ARGUMENT, path + "." + pool + " (the dispatcher named by " + full + ") must be a count "
            + (size < 1 ? ">= 1" : "from 1 to " + SettingRanges.MAX_THREADS) + ", got " + asWritten(d.getValue(pool)));
      }
    }
    return path;
  }
}
