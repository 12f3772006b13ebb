package dev.xlaactors.http;

import dev.xlaactors.error.ErrorCode;
import org.apache.pekko.event.LoggingAdapter;
import org.apache.pekko.http.ParsingErrorHandler;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpEntities;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.StatusCodes;
import org.apache.pekko.http.javadsl.model.headers.RawHeader;
import org.apache.pekko.http.scaladsl.model.ErrorInfo;
import org.apache.pekko.http.scaladsl.model.StatusCode;
import org.apache.pekko.http.scaladsl.settings.ServerSettings;

/**
 * The answer to a request Pekko's parser refuses before any route sees it (pekko.http.server.parsing.error-handler,
 * set by {@link HttpServer#start}): the parser's status and message as our JSON error {@code {"error", "code"}}
 * rather than Pekko's plain text. One is changed: a method that takes no body sent with one ({@code TRACE}
 * with a body, which schemathesis sends to every path) is 422 for Pekko, but this server serves that method on
 * no path, so it is 405, with {@code Allow} naming the methods it serves ({@code GET, POST}: the parser
 * refuses before the path is known, so not the path's own). Stateless.
 */
public final class ParseErrorResponses extends ParsingErrorHandler {
  static final String FQCN = ParseErrorResponses.class.getName();

  @Override
  public HttpResponse handle(StatusCode status, ErrorInfo info, LoggingAdapter log, ServerSettings settings) {
    String message = info.summary().isEmpty() ? status.reason() : info.summary();
    if (!info.detail().isEmpty()) {
      message += ": " + info.detail();
    }
    if (status.intValue() == 422 && info.summary().endsWith("requests must not have an entity")) {
      return json(StatusCodes.METHOD_NOT_ALLOWED.intValue(), message + ": this server serves GET and POST only", ErrorCode.UNIMPLEMENTED)
          .addHeader(RawHeader.create("Allow", "GET, POST"));
    }
    log.warning("Illegal request, responding with status '{}': {}", status, message);
    return json(status.intValue(), message, status.intValue() == 501 ? ErrorCode.UNIMPLEMENTED : ErrorCode.INVALID_ARGUMENT);
  }

  private static HttpResponse json(int status, String message, ErrorCode code) {
    byte[] body = TensorJson.object(g -> {
      g.writeStringField("error", message);
      g.writeStringField("code", code.name());
    });
    return HttpResponse.create().withStatus(status).withEntity(HttpEntities.create(ContentTypes.APPLICATION_JSON, body));
  }
}
