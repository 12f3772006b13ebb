package dev.xlaactors.error;

/**
 * A caller passed something the runtime cannot use (wrong argument count, shape or dtype, unsupported
 * dtype, malformed data). Raised in Java before anything reaches the plugin.
 */
public class InvalidArgumentException extends XlaException {
  public InvalidArgumentException(String message) {
    super(ErrorCode.INVALID_ARGUMENT, message);
  }
}
