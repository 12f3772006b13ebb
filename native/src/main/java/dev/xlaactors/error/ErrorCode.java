package dev.xlaactors.error;

/**
 * Status codes carried by every {@link XlaException}. The first seventeen are the codes XLA and PJRT
 * report (the absl status codes, same numbers); the runtime uses the same vocabulary for its own
 * failures so callers can branch on one enum.
 */
public enum ErrorCode {
  OK,
  CANCELLED,
  UNKNOWN,
  INVALID_ARGUMENT,
  DEADLINE_EXCEEDED,
  NOT_FOUND,
  ALREADY_EXISTS,
  PERMISSION_DENIED,
  RESOURCE_EXHAUSTED,
  FAILED_PRECONDITION,
  ABORTED,
  OUT_OF_RANGE,
  UNIMPLEMENTED,
  INTERNAL,
  UNAVAILABLE,
  DATA_LOSS,
  UNAUTHENTICATED;

  /** The code for a numeric PJRT/XLA status code; {@link #UNKNOWN} for numbers outside the range. */
  public static ErrorCode fromStatusCode(int code) {
    ErrorCode[] codes = values();
    return code >= 0 && code < codes.length ? codes[code] : UNKNOWN;
  }
}
