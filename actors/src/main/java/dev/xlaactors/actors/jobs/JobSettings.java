package dev.xlaactors.actors.jobs;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import dev.xlaactors.runtime.SettingRanges;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import java.time.Duration;
import org.apache.pekko.actor.typed.ActorSystem;

/**
 * Settings of computations and jobs, read once from {@code xla-actors.actors.computations} and {@code
 * xla-actors.actors.jobs} (see the actors module's reference.conf) and validated: a missing key, a wrong
 * type, a non-positive duration or an out-of-range count is an {@link XlaException} naming the key.
 *
 * @param poolSize workers in a {@link ComputationPool}
 * @param queueCapacity requests one {@link ComputationActor} holds while busy or compiling
 * @param maxRetries retries of a failed item before the job fails
 * @param backoffMin wait before the first retry of an item
 * @param backoffMax longest wait between two attempts of an item
 * @param timeout upper bound on a whole job
 * @param progressInterval shortest interval between two progress messages
 * @param syncEvery items between two forces of a batch job's output file to disk
 */
public record JobSettings(
    int poolSize,
    int queueCapacity,
    int maxRetries,
    Duration backoffMin,
    Duration backoffMax,
    Duration timeout,
    Duration progressInterval,
    int syncEvery) {
  static final String ROOT = "xla-actors.actors";
  static final String TIMEOUT_KEY = ROOT + ".jobs.timeout";
  static final String MAX_RETRIES_KEY = ROOT + ".jobs.max-retries";

  /** Validates every value; the message names the key a bad value would have come from. */
  public JobSettings {
    atLeast(poolSize, 1, SettingRanges.MAX_THREADS, "computations.pool-size", "computations run at once");
    atLeast(queueCapacity, 1, SettingRanges.MAX_QUEUE, "computations.queue-capacity", "computations waiting");
    atLeast(maxRetries, 0, MAX_RETRIES, "jobs.max-retries", "retries of one item");
    positive(backoffMin, "jobs.backoff-min");
    positive(backoffMax, "jobs.backoff-max");
    positive(timeout, "jobs.timeout");
    positive(progressInterval, "jobs.progress-interval");
    atLeast(syncEvery, 1, SettingRanges.MAX_QUEUE, "jobs.sync-every", "items appended between forces to disk");
    if (backoffMax.compareTo(backoffMin) < 0) {
      throw new XlaException(
          ErrorCode.INVALID_ARGUMENT,
          ROOT + ".jobs.backoff-max (" + backoffMax + ") must not be shorter than " + ROOT + ".jobs.backoff-min (" + backoffMin + ")");
    }
  }

  /** Settings from the actor system's config. */
  public static JobSettings create(ActorSystem<?> system) {
    return fromConfig(system.settings().config());
  }

  public static JobSettings fromConfig(Config config) {
    try {
      Config c = config.getConfig(ROOT);
      for (String timed : new String[] {"jobs.backoff-min", "jobs.backoff-max", "jobs.timeout", "jobs.progress-interval"}) {
        if (!c.getDuration(timed).isNegative()) { // a negative one gets its own message below
          SettingRanges.duration(c, timed, ROOT + "." + timed, true, SettingRanges.longestDelay(config),
              SettingRanges.describeLongest(config));
        }
      }
      for (String count : new String[] {"computations.pool-size", "computations.queue-capacity", "jobs.max-retries", "jobs.sync-every"}) {
        long n = c.getLong(count);
        if (n > Integer.MAX_VALUE) { // the constructor names the range of an int that is too big
          SettingRanges.check(n, ROOT + "." + count, SettingRanges.asWritten(c, count), 0, Integer.MAX_VALUE, "a count");
        }
      }
      return new JobSettings(
          c.getInt("computations.pool-size"),
          c.getInt("computations.queue-capacity"),
          c.getInt("jobs.max-retries"),
          c.getDuration("jobs.backoff-min"),
          c.getDuration("jobs.backoff-max"),
          c.getDuration("jobs.timeout"),
          c.getDuration("jobs.progress-interval"),
          c.getInt("jobs.sync-every"));
    } catch (ConfigException e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, "bad configuration under " + ROOT + ": " + e.getMessage(), e);
    }
  }

  /** These settings with another job timeout (for one job that needs a tighter or looser bound). */
  public JobSettings withTimeout(Duration newTimeout) {
    return new JobSettings(poolSize, queueCapacity, maxRetries, backoffMin, backoffMax, newTimeout, progressInterval, syncEvery);
  }

  /** These settings with another retry count. */
  public JobSettings withMaxRetries(int newMaxRetries) {
    return new JobSettings(poolSize, queueCapacity, newMaxRetries, backoffMin, backoffMax, timeout, progressInterval, syncEvery);
  }

  /** The wait before retry number {@code retry} (1 for the first): backoff-min doubled per retry, capped at backoff-max. */
  public Duration backoff(int retry) {
    Duration d = backoffMin;
    for (int i = 1; i < retry && d.compareTo(backoffMax) < 0; i++) {
      d = d.multipliedBy(2);
    }
    return d.compareTo(backoffMax) <= 0 ? d : backoffMax;
  }

  private static final int MAX_RETRIES = 1000;
  /** The longest duration at Pekko's default scheduler tick (fromConfig checks against the configured tick). */
  private static final Duration LONGEST = SettingRanges.longestDelay(com.typesafe.config.ConfigFactory.empty());

  private static void atLeast(int value, int min, int max, String key, String what) {
    if (value < min) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, ROOT + "." + key + " must be at least " + min + ", got " + value);
    }
    SettingRanges.check(value, ROOT + "." + key, Integer.toString(value), min, max, what);
  }

  /** A duration the way HOCON writes it ({@code -5s}, {@code 250ms}), not ISO-8601 ({@code PT-5S}). */
  private static String asWritten(Duration d) {
    if (d == null) {
      return "nothing";
    }
    return d.toNanos() % 1_000_000 != 0 ? d.toNanos() + "ns" : d.toMillis() % 1000 != 0 ? d.toMillis() + "ms" : d.toSeconds() + "s";
  }

  private static void positive(Duration d, String key) {
    if (d == null || d.isNegative() || d.isZero()) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, ROOT + "." + key + " must be a positive duration (e.g. 30s), got " + asWritten(d));
    }
    if (d.compareTo(LONGEST) > 0) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, ROOT + "." + key + " = " + asWritten(d) + " is longer than the largest accepted, "
          + SettingRanges.describeLongest(com.typesafe.config.ConfigFactory.empty()));
    }
  }
}
