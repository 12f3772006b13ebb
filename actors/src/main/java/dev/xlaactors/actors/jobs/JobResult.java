package dev.xlaactors.actors.jobs;

import java.time.Duration;
import java.util.Optional;

/** How a job ended; sent once to everyone who started or cancelled it. */
public sealed interface JobResult {

  /** The job's name. */
  String job();

  /** Items finished, including those of earlier runs of the same job. */
  long done();

  /** Every item is done (or a generation's stop condition said so). */
  record Completed(String job, long done, Duration elapsed) implements JobResult {}

  /** An item failed fatally, or more than {@code max-retries} times; {@code report} says which and why. */
  record Failed(String job, long done, FailureReport report) implements JobResult {}

  /** A {@code Cancel} stopped the job; the step in progress was cancelled and its callbacks unblocked. */
  record Cancelled(String job, long done, String reason) implements JobResult {}

  /** The job ran past its timeout; {@code message} names the duration and the config key. */
  record TimedOut(String job, long done, String message) implements JobResult {}

  /**
   * Why a job failed.
   *
   * @param item the item whose failure ended the job (-1 when the job failed before its first item)
   * @param attempts how many times it was tried
   * @param fatal whether the error was fatal (not retried)
   * @param cause the last error (empty when the job's step computation stopped by itself)
   * @param message a sentence naming the item, the attempts and the cause
   */
  record FailureReport(long item, int attempts, boolean fatal, Optional<Throwable> cause, String message) {}
}
