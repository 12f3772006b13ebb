package dev.xlaactors.error;

/**
 * A request to a model server (dev.xlaactors.actors.serve.ModelServer) that was answered without a result:
 * refused because the server was overloaded, timed out, cancelled, or part of a batch whose run failed.
 * {@link #model()} and {@link #requestId()} say which request; {@link #code()} says which outcome it was.
 */
public class ServingException extends XlaException {
  private final String model;
  private final String requestId;

  public ServingException(ErrorCode code, String model, String requestId, String message, Throwable cause) {
    super(code, message, cause);
    this.model = model;
    this.requestId = requestId;
  }

  public ServingException(ErrorCode code, String model, String requestId, String message) {
    this(code, model, requestId, message, null);
  }

  /** The name of the model the request was for. */
  public String model() {
    return model;
  }

  /** The request's id, as the caller gave it or the server made it. */
  public String requestId() {
    return requestId;
  }
}
