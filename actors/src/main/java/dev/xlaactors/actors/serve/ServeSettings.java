package dev.xlaactors.actors.serve;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigUtil;
import com.typesafe.config.ConfigValue;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.KnownConfigKeys;
import dev.xlaactors.runtime.SettingRanges;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.apache.pekko.actor.typed.ActorSystem;

/**
 * Settings of model servers, read once from {@code xla-actors.actors.serve} (see the actors module's
 * reference.conf): {@code defaults} for every model, and {@code models.<name>} overriding some of them for
 * the model of that name ({@link BatchedModel#name()}). Every value is range-checked when read; a bad or
 * misspelt key is an {@link XlaException} naming the key, expected vs got.
 *
 * @param defaults the settings of a model without overrides
 * @param models the settings of each model that has overrides, by name
 */
public record ServeSettings(Model defaults, Map<String, Model> models) {
  static final String ROOT = "xla-actors.actors.serve";
  /** The largest batch a server forms (the compiled sizes bound it further). */
  public static final int MAX_BATCH = 4096;
  /** The most batches of one model that may run at once. */
  public static final int MAX_BATCHES_IN_FLIGHT = 64;
  /** The longest {@code max-delay}: a longer wait is a timeout, not a batching delay. */
  public static final Duration MAX_DELAY = Duration.ofMinutes(1);
  private static final List<String> KEYS =
      List.of("max-batch-size", "max-delay", "queue-capacity", "default-timeout", "max-batches-in-flight");

  public ServeSettings {
    Objects.requireNonNull(defaults, "defaults");
    models = Map.copyOf(models);
  }

  /**
   * How one model is served.
   *
   * @param maxBatchSize most requests in one batch (a batch is padded to the smallest compiled size that
   *     holds it; the largest compiled size bounds this too)
   * @param maxDelay longest time the oldest queued request waits for others before its batch runs (zero:
   *     a batch runs as soon as the model has room, with whatever is queued)
   * @param queueCapacity most requests waiting for a batch; one more is refused at once ({@link
   *     dev.xlaactors.error.OverloadedException})
   * @param defaultTimeout deadline of a request that carries none, counted from its arrival
   * @param maxBatchesInFlight batches of this model running at once
   */
  public record Model(int maxBatchSize, Duration maxDelay, int queueCapacity, Duration defaultTimeout, int maxBatchesInFlight) {
    /** Checks every value (for settings built in code); the message names the key it stands for. */
    public Model {
      Objects.requireNonNull(maxDelay, "maxDelay");
      Objects.requireNonNull(defaultTimeout, "defaultTimeout");
      SettingRanges.check(maxBatchSize, "max-batch-size", String.valueOf(maxBatchSize), 1, MAX_BATCH, "requests in one batch");
      SettingRanges.check(queueCapacity, "queue-capacity", String.valueOf(queueCapacity), 1, SettingRanges.MAX_QUEUE,
          "requests waiting for a batch");
      SettingRanges.check(maxBatchesInFlight, "max-batches-in-flight", String.valueOf(maxBatchesInFlight), 1,
          MAX_BATCHES_IN_FLIGHT, "batches of one model running at once");
      if (maxDelay.isNegative() || maxDelay.compareTo(MAX_DELAY) > 0) {
        throw new XlaException(ErrorCode.INVALID_ARGUMENT, "max-delay must be from 0 to 1m, got " + maxDelay);
      }
      if (defaultTimeout.isNegative() || defaultTimeout.isZero()) {
        throw new XlaException(ErrorCode.INVALID_ARGUMENT, "default-timeout must be a positive duration, got " + defaultTimeout);
      }
    }

    /** The same settings with {@code maxBatchSize} instead. */
    public Model withMaxBatchSize(int n) {
      return new Model(n, maxDelay, queueCapacity, defaultTimeout, maxBatchesInFlight);
    }

    /** The same settings with {@code maxDelay} instead. */
    public Model withMaxDelay(Duration d) {
      return new Model(maxBatchSize, d, queueCapacity, defaultTimeout, maxBatchesInFlight);
    }

    /** The same settings with {@code queueCapacity} instead. */
    public Model withQueueCapacity(int n) {
      return new Model(maxBatchSize, maxDelay, n, defaultTimeout, maxBatchesInFlight);
    }

    /** The same settings with {@code defaultTimeout} instead. */
    public Model withDefaultTimeout(Duration d) {
      return new Model(maxBatchSize, maxDelay, queueCapacity, d, maxBatchesInFlight);
    }

    /** The same settings with {@code maxBatchesInFlight} instead. */
    public Model withMaxBatchesInFlight(int n) {
      return new Model(maxBatchSize, maxDelay, queueCapacity, defaultTimeout, n);
    }
  }

  /** Settings from the actor system's config. */
  public static ServeSettings create(ActorSystem<?> system) {
    return fromConfig(system.settings().config());
  }

  /** Settings from {@code config} (which must include the actors module's reference.conf). */
  public static ServeSettings fromConfig(Config config) {
    KnownConfigKeys.check(config);
    try {
      Config serve = config.getConfig(ROOT);
      Model defaults = read(config, serve.getConfig("defaults"), ROOT + ".defaults");
      Map<String, Model> models = new LinkedHashMap<>();
      for (Map.Entry<String, ConfigValue> e : serve.getObject("models").entrySet()) {
        String name = e.getKey();
        String prefix = ROOT + ".models." + ConfigUtil.joinPath(name);
        if (!(e.getValue().unwrapped() instanceof Map)) {
          throw new XlaException(ErrorCode.INVALID_ARGUMENT, prefix + " must be an object of settings (" + String.join(", ", KEYS)
              + "), got " + e.getValue().unwrapped());
        }
        Config own = serve.getConfig("models." + ConfigUtil.joinPath(name));
        for (String key : own.root().keySet()) {
          if (!KEYS.contains(key)) {
            String nearest = nearest(key);
            throw new XlaException(ErrorCode.INVALID_ARGUMENT, "unknown key " + prefix + "." + key + " ("
                + own.root().get(key).origin().description() + ")" + (nearest != null ? ", did you mean " + nearest + "?" : "")
                + " A model's settings are " + String.join(", ", KEYS));
          }
        }
        models.put(name, read(config, own.withFallback(serve.getConfig("defaults")), prefix));
      }
      return new ServeSettings(defaults, models);
    } catch (ConfigException e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, "bad configuration under " + ROOT + ": " + e.getMessage(), e);
    }
  }

  /** The settings of the model named {@code name}: its overrides over the defaults. */
  public Model forModel(String name) {
    return models.getOrDefault(name, defaults);
  }

  private static Model read(Config root, Config c, String prefix) {
    return new Model(
        SettingRanges.count(c, "max-batch-size", prefix + ".max-batch-size", 1, MAX_BATCH, "requests in one batch"),
        SettingRanges.duration(c, "max-delay", prefix + ".max-delay", true, MAX_DELAY,
            "1m (a longer wait is a timeout, not a batching delay)"),
        SettingRanges.count(c, "queue-capacity", prefix + ".queue-capacity", 1, SettingRanges.MAX_QUEUE, "requests waiting for a batch"),
        SettingRanges.timed(root, c, "default-timeout", prefix + ".default-timeout"),
        SettingRanges.count(c, "max-batches-in-flight", prefix + ".max-batches-in-flight", 1, MAX_BATCHES_IN_FLIGHT,
            "batches of one model running at once"));
  }

  private static String nearest(String key) {
    String best = null;
    int bestDistance = Integer.MAX_VALUE;
    for (String k : KEYS) {
      int d = KnownConfigKeys.distance(key, k);
      if (d < bestDistance) {
        best = k;
        bestDistance = d;
      }
    }
    return bestDistance <= Math.max(2, key.length() / 3) ? best : null;
  }

  /** For tests and tools: settings from {@code overrides} (HOCON) over the reference defaults. */
  public static ServeSettings parse(String overrides) {
    return fromConfig(ConfigFactory.parseString(overrides).withFallback(ConfigFactory.defaultReference()).resolve());
  }

}
