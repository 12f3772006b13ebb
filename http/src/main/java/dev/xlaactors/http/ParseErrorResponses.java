package dev.xlaactors.http;

import dev.xlaactors.error.ErrorCode;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Map;
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

  /**
   * The refusal counters of the servers started with a registry, by the settings object each was bound
   * with (identity): Pekko makes this handler from its class name, so it finds its server's counter here.
   */
  private static final Map<Object, HttpMetrics> METRICS = Collections.synchronizedMap(new IdentityHashMap<>());

  /** Counts the parser's refusals of the server bound with {@code settings} in {@code metrics}. */
  static void count(Object settings, HttpMetrics metrics) {
    METRICS.put(settings, metrics);
  }

  /** The server bound with {@code settings} is gone. */
  static void forget(Object settings) {
    METRICS.remove(settings);
  }

  @Override
  public HttpResponse handle(StatusCode status, ErrorInfo info, LoggingAdapter log, ServerSettings settings) {
    HttpResponse response = response(status, info, log);
    HttpMetrics metrics = METRICS.get(settings);
    if (metrics != null) { // refused before any route, so before the path is known: counted as this project's API
      metrics.refused("", response.status().intValue());
    }
    return response;
  }

  private static HttpResponse response(StatusCode status, ErrorInfo info, LoggingAdapter log) {
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
