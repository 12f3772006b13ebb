package dev.xlaactors.runtime;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import java.time.Duration;

/**
 * The ranges numeric settings must lie in, and the checks every module's settings use: a value outside
 * its range is an {@link XlaException} (INVALID_ARGUMENT) naming the key, the value as written and the
 * range, when the settings are read rather than as a hang or a stopped actor later. Durations that an
 * actor times are bounded by {@link #longestDelay(Config)}, the longest delay Pekko's scheduler accepts.
 *
 * <p>Stateless and thread-safe.
 */
public final class SettingRanges {
  private SettingRanges() {}

  /** Pekko's default {@code pekko.scheduler.tick-duration}. */
  public static final Duration DEFAULT_TICK = Duration.ofMillis(10);
  /** The most threads any one pool of this project may be configured with. */
  public static final int MAX_THREADS = 1024;
  /** The longest queue any one queue of this project may be configured with. */
  public static final int MAX_QUEUE = 1_000_000;

  /**
   * The longest delay Pekko's scheduler can time with {@code config}'s tick: its
   * LightArrayRevolverScheduler refuses a delay of more than {@code 2^31 - 1} ticks ("too far in future"),
   * which at the default 10 ms tick is 21,474,836 s, about 248.5 days. Rounded down to whole seconds.
   */
  public static Duration longestDelay(Config config) {
    Duration tick = config.hasPath("pekko.scheduler.tick-duration") ? config.getDuration("pekko.scheduler.tick-duration") : DEFAULT_TICK;
    return Duration.ofSeconds(tick.multipliedBy(Integer.MAX_VALUE).toSeconds());
  }

  /** How {@link #longestDelay(Config)} reads in a message: the seconds, the days and where it comes from. */
  public static String describeLongest(Config config) {
    Duration longest = longestDelay(config);
    String tick = config.hasPath("pekko.scheduler.tick-duration") ? String.valueOf(config.getValue("pekko.scheduler.tick-duration").unwrapped())
        : DEFAULT_TICK.toMillis() + "ms";
    return longest.toSeconds() + "s (" + longest.toDays() + " days, the longest delay Pekko's scheduler can time at "
        + "pekko.scheduler.tick-duration = " + tick + ")";
  }

  /**
   * The duration at {@code path} of {@code c} (whose full key is {@code key}): refused unless it is positive
   * ({@code allowZero}: or zero) and at most {@code max}; {@code maxText} says what {@code max} is.
   */
  public static Duration duration(Config c, String path, String key, boolean allowZero, Duration max, String maxText) {
    Duration d = c.getDuration(path);
    if (d.isNegative() || (!allowZero && d.isZero())) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, key + " must be a " + (allowZero ? "duration >= 0 (e.g. 50us, or 0)"
          : "positive duration (e.g. 30s)") + ", got " + asWritten(c, path));
    }
    if (d.compareTo(max) > 0) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, key + " = " + asWritten(c, path) + " is longer than the largest accepted, "
          + maxText);
    }
    return d;
  }

  /** A duration an actor times: positive and at most {@link #longestDelay(Config)} of {@code root}. */
  public static Duration timed(Config root, Config c, String path, String key) {
    return duration(c, path, key, false, longestDelay(root), describeLongest(root));
  }

  /** The integer at {@code path}, refused unless it is from {@code min} to {@code max}; {@code what} says what it counts. */
  public static int count(Config c, String path, String key, int min, int max, String what) {
    long n;
    try {
      n = c.getLong(path); // a -D value arrives as a string: getLong parses it
    } catch (ConfigException.WrongType e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, key + " must be a whole number from " + min + " to " + max + " (" + what
          + "), got " + asWritten(c, path), e);
    }
    check(n, key, asWritten(c, path), min, max, what);
    return (int) n;
  }

  /** Refuses {@code value} (written as {@code written}) unless it is from {@code min} to {@code max}. */
  public static void check(long value, String key, String written, long min, long max, String what) {
    if (value < min || value > max) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, key + " = " + written + " is out of range: it must be from " + min + " to "
          + max + " (" + what + ")");
    }
  }

  /** A value as the user wrote it ({@code -5s}, not {@code PT-5S}). */
  public static String asWritten(Config c, String path) {
    return String.valueOf(c.getValue(path).unwrapped());
  }
}
