package dev.xlaactors.error;

/**
 * A run was aborted because of one of its host callbacks: the callback threw (the Java exception is the
 * cause), returned a result that does not match its template, did not answer in time, is unknown, or the
 * actor serving it stopped. The message names the callback and what went wrong; {@link #code()} says
 * which of these it was ({@code ABORTED}, {@code INVALID_ARGUMENT}, {@code DEADLINE_EXCEEDED}, {@code
 * NOT_FOUND}, {@code UNAVAILABLE}, {@code CANCELLED}).
 */
public class CallbackException extends ExecutionFailedException {
  private final String callbackName;

  public CallbackException(String callbackName, ErrorCode code, String message, Throwable cause) {
    super(code, message, cause);
    this.callbackName = callbackName;
  }

  public CallbackException(String callbackName, ErrorCode code, String message) {
    this(callbackName, code, message, null);
  }

  /** The name of the callback that failed (null for failures of the run as a whole). */
  public String callbackName() {
    return callbackName;
  }
}
