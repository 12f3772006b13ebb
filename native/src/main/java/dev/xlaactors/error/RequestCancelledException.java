package dev.xlaactors.error;

/**
 * A request cancelled by its caller before it was answered: code {@code CANCELLED}. A queued request is
 * never computed; one in a running batch is answered at once and the batch goes on for the others.
 */
public class RequestCancelledException extends ServingException {
  public RequestCancelledException(String model, String requestId, String message) {
    super(ErrorCode.CANCELLED, model, requestId, message);
  }
}
