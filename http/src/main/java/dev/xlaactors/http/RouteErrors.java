package dev.xlaactors.http;

import dev.xlaactors.error.ErrorCode;
import java.util.List;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpEntities;
import org.apache.pekko.http.javadsl.model.HttpEntity;
import org.apache.pekko.http.javadsl.model.HttpMethod;
import org.apache.pekko.http.javadsl.model.HttpRequest;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.MediaTypes;
import org.apache.pekko.http.javadsl.model.StatusCodes;
import org.apache.pekko.http.javadsl.model.headers.Allow;
import org.apache.pekko.http.javadsl.model.headers.TimeoutAccess;
import org.apache.pekko.http.javadsl.server.Directives;
import org.apache.pekko.http.javadsl.server.MethodRejection;
import org.apache.pekko.http.javadsl.server.RejectionHandler;
import org.apache.pekko.http.javadsl.server.Route;

/**
 * The answers no route writes itself, in the error shape of the protocol the request's path speaks:
 * Pekko HTTP's rejections (no such path: 404; a method the path does not declare, TRACE and QUERY
 * included: 405 with {@code Allow}; any other rejection with the status Pekko gives it) and its
 * request-timeout response (for a request whose route did not set its own), which Pekko writes as
 * text/plain. {@code /v2...} answers the Open Inference Protocol's {@code {"error": "..."}}, the OpenAI
 * API's paths ({@code /v1/completions}, {@code /v1/chat/completions}, {@code /v1/embeddings},
 * {@code /v1/models[/<id>]}) {@code {"error": {"message", "type", "param", "code"}}}, every other path
 * this project's {@code {"error": "...", "code": "..."}}. {@link HttpServer} wraps every route in it.
 */
final class RouteErrors {
  private RouteErrors() {}

  /** The protocols' error shapes, chosen by path. */
  enum Shape {
    /** The Open Inference Protocol's {@code {"error": "..."}}. */
    OPEN_INFERENCE,
    /** OpenAI's {@code {"error": {"message", "type", "param", "code"}}}. */
    OPENAI,
    /** This project's {@code {"error": "...", "code": "..."}}. */
    OURS;

    /** The shape of the errors of {@code path}. */
    static Shape of(String path) {
      if (path.equals("/v2") || path.startsWith("/v2/")) {
        return OPEN_INFERENCE;
      }
      if (List.of("/v1/completions", "/v1/chat/completions", "/v1/embeddings", "/v1/models").contains(path)
          || (path.startsWith("/v1/models/") && path.indexOf('/', "/v1/models/".length()) < 0)) {
        return OPENAI;
      }
      return OURS;
    }
  }

  /**
   * {@code route} with its rejections and Pekko's request timeout answered in the path's error shape, and
   * every error response counted in {@code metrics} (null: not counted).
   */
  static Route around(Route route, HttpMetrics metrics) {
    return Directives.extractRequest(request -> Directives.mapResponse(response -> {
      if (metrics != null && response.status().intValue() >= 400) {
        metrics.refused(request.getUri().path(), response.status().intValue());
      }
      return response;
    }, () -> Directives.mapRequest(r -> countingTimeouts(r, metrics), () -> Directives.handleRejections(rejections(request),
        () -> Directives.withRequestTimeoutResponse(RouteErrors::timedOut, () -> route)))));
  }

  /**
   * {@code request} with its {@code Timeout-Access} made to count what its timeout answers: Pekko's server
   * stage writes that answer itself, outside every route (so outside the count above), whichever handler a
   * route set (the routes' own 504s when a server misses its deadline, or {@link #timedOut}).
   */
  private static HttpRequest countingTimeouts(HttpRequest request, HttpMetrics metrics) {
    if (metrics == null) {
      return request;
    }
    return request.getHeader(TimeoutAccess.class)
        .map(header -> request.removeHeader(header.name()).addHeader(TimeoutAccess.create(new CountedTimeout(
            (org.apache.pekko.http.scaladsl.TimeoutAccess) header.timeoutAccess(), metrics, request.getUri().path()))))
        .orElse(request);
  }

  /** A request's timeout access that counts, in {@code metrics}, each error its handler answers with. */
  private static final class CountedTimeout implements org.apache.pekko.http.scaladsl.TimeoutAccess {
    private final org.apache.pekko.http.scaladsl.TimeoutAccess access;
    private final HttpMetrics metrics;
    private final String path;

    CountedTimeout(org.apache.pekko.http.scaladsl.TimeoutAccess access, HttpMetrics metrics, String path) {
      this.access = access;
      this.metrics = metrics;
      this.path = path;
    }

    private <R extends HttpResponse> R counted(R response) {
      if (response.status().intValue() >= 400) {
        metrics.refused(path, response.status().intValue());
      }
      return response;
    }

    private scala.Function1<org.apache.pekko.http.scaladsl.model.HttpRequest, org.apache.pekko.http.scaladsl.model.HttpResponse> counting(
        scala.Function1<org.apache.pekko.http.scaladsl.model.HttpRequest, org.apache.pekko.http.scaladsl.model.HttpResponse> handler) {
      return r -> counted(handler.apply(r));
    }

    @Override
    public scala.concurrent.duration.Duration timeout() {
      return access.timeout();
    }

    @Override
    public void updateTimeout(scala.concurrent.duration.Duration timeout) {
      access.updateTimeout(timeout);
    }

    @Override
    public void updateTimeout(java.time.Duration timeout) {
      access.updateTimeout(timeout);
    }

    @Override
    public void updateHandler(scala.Function1<org.apache.pekko.http.scaladsl.model.HttpRequest,
        org.apache.pekko.http.scaladsl.model.HttpResponse> handler) {
      access.updateHandler(counting(handler));
    }

    @Override
    public void update(scala.concurrent.duration.Duration timeout, scala.Function1<org.apache.pekko.http.scaladsl.model.HttpRequest,
        org.apache.pekko.http.scaladsl.model.HttpResponse> handler) {
      access.update(timeout, counting(handler));
    }

    @Override
    public void updateHandler(org.apache.pekko.japi.Function<HttpRequest, HttpResponse> handler) {
      access.updateHandler((org.apache.pekko.japi.Function<HttpRequest, HttpResponse>) r -> counted(handler.apply(r)));
    }

    @Override
    public void update(scala.concurrent.duration.Duration timeout, org.apache.pekko.japi.Function<HttpRequest, HttpResponse> handler) {
      access.update(timeout, (org.apache.pekko.japi.Function<HttpRequest, HttpResponse>) r -> counted(handler.apply(r)));
    }

    @Override
    public void update(java.time.Duration timeout, org.apache.pekko.japi.Function<HttpRequest, HttpResponse> handler) {
      access.update(timeout, (org.apache.pekko.japi.Function<HttpRequest, HttpResponse>) r -> counted(handler.apply(r)));
    }
  }

  private static RejectionHandler rejections(HttpRequest request) {
    return RejectionHandler.newBuilder()
        .handleAll(MethodRejection.class, rejected -> {
          List<HttpMethod> allowed = rejected.stream().map(MethodRejection::supported).distinct().toList();
          String names = String.join(", ", allowed.stream().map(HttpMethod::name).toList());
          return Directives.complete(error(request, StatusCodes.METHOD_NOT_ALLOWED.intValue(), request.method().name() + " "
              + request.getUri().path() + ": method not allowed; this path takes " + names).addHeader(Allow.create(allowed.toArray(HttpMethod[]::new))));
        })
        .handleNotFound(Directives.complete(error(request, 404, request.method().name() + " " + request.getUri().path()
            + ": no such route; GET /openapi.json lists the routes")))
        .build()
        // Every other rejection (a malformed header, an unsupported content type, ...) keeps Pekko's status and text as the message.
        .withFallback(RejectionHandler.defaultHandler())
        .mapRejectionResponse(response -> reshaped(request, response));
  }

  /** A response Pekko made as text/plain, made again in {@code request}'s error shape (the same status and headers). */
  private static HttpResponse reshaped(HttpRequest request, HttpResponse response) {
    if (response.status().intValue() < 400 || !(response.entity() instanceof HttpEntity.Strict strict)
        || strict.getContentType().mediaType().equals(MediaTypes.APPLICATION_JSON)) {
      return response;
    }
    return response.withEntity(error(request, response.status().intValue(), strict.getData().utf8String()).entity());
  }

  /** Pekko's request timeout, for a request whose route did not set its own: 503 in the path's shape. */
  private static HttpResponse timedOut(HttpRequest request) { // counted by CountedTimeout
    return error(request, StatusCodes.SERVICE_UNAVAILABLE.intValue(), request.method().name() + " " + request.getUri().path()
        + ": no answer within pekko.http.server.request-timeout");
  }

  /** A JSON error response of {@code status} with {@code message}, in the shape of {@code request}'s path. */
  static HttpResponse error(HttpRequest request, int status, String message) {
    byte[] body = switch (Shape.of(request.getUri().path())) {
      case OPEN_INFERENCE -> TensorJson.object(g -> g.writeStringField("error", message));
      case OPENAI -> new OpenAiError(status, status >= 500 ? OpenAiError.SERVER_ERROR : OpenAiError.INVALID_REQUEST, null,
          status == 404 ? "not_found" : status == 405 ? "method_not_allowed" : null, message).body();
      case OURS -> TensorJson.object(g -> {
        g.writeStringField("error", message);
        g.writeStringField("code", code(status).name());
      });
    };
    return HttpResponse.create().withStatus(status).withEntity(HttpEntities.create(ContentTypes.APPLICATION_JSON, body));
  }

  private static ErrorCode code(int status) {
    return switch (status) {
      case 400, 413, 415, 422 -> ErrorCode.INVALID_ARGUMENT;
      case 404 -> ErrorCode.NOT_FOUND;
      case 405, 501 -> ErrorCode.UNIMPLEMENTED;
      case 503 -> ErrorCode.UNAVAILABLE;
      case 504 -> ErrorCode.DEADLINE_EXCEEDED;
      default -> status < 500 ? ErrorCode.INVALID_ARGUMENT : ErrorCode.INTERNAL;
    };
  }
}
