package dev.xlaactors.actors.jobs;

import java.time.Duration;
import java.util.Optional;

/**
 * How far a job is, sent to its subscribers at most once per {@code xla-actors.actors.jobs.progress-interval}
 * (the first and the last always).
 *
 * @param job the job's name
 * @param done items finished, including those a previous run of the job finished
 * @param total items in the job (for a generation, its step limit)
 * @param itemsPerSecond items finished per second by this run of the job (0 before the first)
 * @param elapsed time since this run of the job started
 * @param estimatedTimeLeft remaining items at the current rate; empty until the rate is known
 */
public record Progress(
    String job, long done, long total, double itemsPerSecond, Duration elapsed, Optional<Duration> estimatedTimeLeft) {

  /** A single line for a terminal: {@code 120/300 (40%) 85.2 items/s, ETA 2s}. */
  public String line() {
    long percent = total == 0 ? 100 : done * 100 / total;
    String eta = estimatedTimeLeft.map(d -> d.toSeconds() + "s").orElse("?");
    return String.format(java.util.Locale.ROOT, "%d/%d (%d%%) %.1f items/s, ETA %s", done, total, percent, itemsPerSecond, eta);
  }
}
