package dev.xlaactors.error;

/**
 * A run of a compiled program failed inside XLA, for example because an FFI handler or a host callback
 * returned an error. None of the run's outputs are available.
 */
public class ExecutionFailedException extends XlaException {
  public ExecutionFailedException(ErrorCode code, String message) {
    super(code, message);
  }

  public ExecutionFailedException(ErrorCode code, String message, Throwable cause) {
    super(code, message, cause);
  }
}
