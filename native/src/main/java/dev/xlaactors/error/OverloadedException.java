package dev.xlaactors.error;

/**
 * A request refused at once, with nothing computed, because the model's queue was full (or the server was
 * stopping): code {@code RESOURCE_EXHAUSTED}. Retry later, with backoff, or raise the model's {@code
 * queue-capacity} if the machine has room.
 */
public class OverloadedException extends ServingException {
  public OverloadedException(String model, String requestId, String message) {
    super(ErrorCode.RESOURCE_EXHAUSTED, model, requestId, message);
  }
}
