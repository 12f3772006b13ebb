package dev.xlaactors.actors.serve;

import java.time.Duration;

/**
 * Deadlines of the serving actors as {@link System#nanoTime()} values that never wrap: a timeout too long
 * for a long of nanoseconds (about 292 years) is no deadline at all ({@link Long#MAX_VALUE}), so a caller's
 * {@code Duration.ofSeconds(Long.MAX_VALUE)} is served rather than overflowing {@link Duration#toNanos()}.
 * Compare a deadline with {@code deadline <= now}, never with a difference (which wraps at the maximum).
 */
final class Deadlines {
  private static final Duration NO_DEADLINE_BEYOND = Duration.ofDays(365L * 200);

  private Deadlines() {}

  /** The deadline {@code timeout} after {@code now}, saturated at {@link Long#MAX_VALUE}. */
  static long after(long now, Duration timeout) {
    return timeout.compareTo(NO_DEADLINE_BEYOND) > 0 ? Long.MAX_VALUE : saturatedAdd(now, timeout.toNanos());
  }

  /** {@code a + b}, or {@link Long#MAX_VALUE} where it would overflow upwards. */
  static long saturatedAdd(long a, long b) {
    long r = a + b;
    return ((a ^ r) & (b ^ r)) < 0 ? Long.MAX_VALUE : r;
  }
}
