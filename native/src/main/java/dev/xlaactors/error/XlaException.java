package dev.xlaactors.error;

/**
 * Root of the one exception hierarchy of xla-actors. Every failure of XLA, PJRT, the native bridge or
 * the runtime's own validation surfaces as a subclass, carrying an {@link ErrorCode} and a message that
 * says what was wrong and what was expected.
 *
 * <p>Misuse of a closed handle is not an {@code XlaException}: it is an {@link IllegalStateException}.
 */
public class XlaException extends RuntimeException {
  private final ErrorCode code;

  /** Which subclass a failure reported by the native bridge becomes (the bridge passes the ordinal). */
  enum Kind {
    GENERIC,
    PLUGIN,
    COMPILE,
    EXECUTION,
    INVALID_ARGUMENT
  }

  public XlaException(ErrorCode code, String message) {
    super(message);
    this.code = code;
  }

  public XlaException(ErrorCode code, String message, Throwable cause) {
    super(message, cause);
    this.code = code;
  }

  /** The status code, as XLA reported it or as the runtime classified its own failure. */
  public ErrorCode code() {
    return code;
  }

  /** Called by the native bridge (through JNI) to build the exception it throws. */
  static XlaException fromNative(int kind, int statusCode, String message) {
    ErrorCode code = ErrorCode.fromStatusCode(statusCode);
    Kind[] kinds = Kind.values();
    Kind k = kind >= 0 && kind < kinds.length ? kinds[kind] : Kind.GENERIC;
    return switch (k) {
      case PLUGIN -> new PluginException(code, message);
      case COMPILE -> new CompileException(code, message);
      case EXECUTION -> new ExecutionFailedException(code, message);
      case INVALID_ARGUMENT -> new InvalidArgumentException(message);
      case GENERIC -> new XlaException(code, message);
    };
  }
}
