package dev.xlaactors.error;

/**
 * A request whose deadline passed before it was answered: code {@code DEADLINE_EXCEEDED}. A request that
 * expires while queued is never computed; one that expires while its batch runs is answered at once and its
 * slice of the batch is dropped.
 */
public class RequestTimeoutException extends ServingException {
  public RequestTimeoutException(String model, String requestId, String message) {
    super(ErrorCode.DEADLINE_EXCEEDED, model, requestId, message);
  }
}
