package dev.xlaactors.error;

/**
 * A request whose batch failed to run (a host callback threw or timed out, XLA failed): every request of
 * that batch gets one, with the run's error as {@link #getCause()} (a {@link CallbackException} names the
 * callback) and the same {@link #code()}; requests of other batches are not touched.
 */
public class BatchFailedException extends ServingException {
  private final long batch;

  public BatchFailedException(ErrorCode code, String model, String requestId, long batch, String message, Throwable cause) {
    super(code, model, requestId, message, cause);
    this.batch = batch;
  }

  /** The number of the failed batch (the server numbers its batches 1, 2, ...). */
  public long batch() {
    return batch;
  }
}
