package dev.xlaactors.http;

import dev.xlaactors.error.XlaException;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import org.apache.pekko.http.scaladsl.model.EntityStreamSizeException;

/**
 * An error of the OpenAI API as its clients read it: an HTTP status and the body
 * {@code {"error": {"message", "type", "param", "code"}}} (openai-python picks its exception class by the
 * status: 400 {@code BadRequestError}, 404 {@code NotFoundError}, 413, 5xx; it retries 5xx). Thrown while
 * a request is checked, or made from an error of a server by {@link #of(Throwable)}.
 */
final class OpenAiError extends RuntimeException {
  static final String INVALID_REQUEST = "invalid_request_error";
  static final String SERVER_ERROR = "server_error";
  /** The code of a request cancelled because its client went away (logged at DEBUG: expected, not a failure). */
  static final String CANCELLED = "cancelled";

  private final int status;
  private final String type;
  private final String param;
  private final String code;

  OpenAiError(int status, String type, String param, String code, String message) {
    super(message);
    this.status = status;
    this.type = type;
    this.param = param;
    this.code = code;
  }

  /** 400: the request field {@code param} is wrong; the message says what was expected and what came. */
  static OpenAiError invalid(String param, String message) {
    return new OpenAiError(400, INVALID_REQUEST, param, null, message);
  }

  /** 400: a field this server does not implement; refused rather than ignored, so a client never gets less than it asked for. */
  static OpenAiError unsupported(String param, String why) {
    return new OpenAiError(400, INVALID_REQUEST, param, "unsupported_parameter", "'" + param + "' is not supported by this server: "
        + why);
  }

  /** The HTTP status. */
  int status() {
    return status;
  }

  /** OpenAI's error type ({@code invalid_request_error}, {@code server_error}, ...). */
  String type() {
    return type;
  }

  /** The request field at fault, or null. */
  String param() {
    return param;
  }

  /** A machine-readable code, or null. */
  String code() {
    return code;
  }

  /**
   * The error {@code thrown} answers with: itself when it is one; a body over its limit 413; the errors of
   * the servers by their kind (invalid 400, overloaded 503, timed out 504, stopped 503, a failed run 500).
   */
  static OpenAiError of(Throwable thrown) {
    Throwable e = thrown;
    while ((e instanceof CompletionException || e instanceof ExecutionException) && e.getCause() != null) {
      e = e.getCause();
    }
    if (e instanceof OpenAiError o) {
      return o;
    }
    if (e instanceof TensorJson.TooManyValues t) {
      return new OpenAiError(413, INVALID_REQUEST, null, "request_too_large", t.getMessage());
    }
    if (e instanceof BadRequestException b) {
      return new OpenAiError(400, INVALID_REQUEST, b.field().equals("body") ? null : b.field(), null, b.getMessage());
    }
    if (e instanceof XlaException x) {
      int status = ServingRoutes.status(x).intValue();
      String type = status == 400 ? INVALID_REQUEST : status == 504 ? "timeout_error" : SERVER_ERROR;
      return new OpenAiError(status, type, null, x.code().name().toLowerCase(java.util.Locale.ROOT), x.getMessage());
    }
    if (e instanceof java.util.concurrent.CancellationException) { // the client went away or its HTTP timeout fired: nobody reads this
      return new OpenAiError(503, SERVER_ERROR, null, CANCELLED, "the request was cancelled");
    }
    if (e instanceof EntityStreamSizeException) {
      return new OpenAiError(413, INVALID_REQUEST, null, "request_too_large", "the request body is larger than this route takes");
    }
    return new OpenAiError(500, SERVER_ERROR, null, null, "internal error: " + e);
  }

  /** The body {@code {"error": {...}}}, UTF-8 JSON. */
  byte[] body() {
    return TensorJson.object(g -> {
      g.writeObjectFieldStart("error");
      g.writeStringField("message", getMessage());
      g.writeStringField("type", type);
      if (param == null) {
        g.writeNullField("param");
      } else {
        g.writeStringField("param", param);
      }
      if (code == null) {
        g.writeNullField("code");
      } else {
        g.writeStringField("code", code);
      }
      g.writeEndObject();
    });
  }
}
