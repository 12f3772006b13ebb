package dev.xlaactors.http;

import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import com.typesafe.config.Config;
import io.micrometer.core.instrument.MeterRegistry;
import com.typesafe.config.ConfigFactory;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.http.javadsl.Http;
import org.apache.pekko.http.javadsl.ServerBinding;
import org.apache.pekko.http.javadsl.model.HttpMethod;
import org.apache.pekko.http.javadsl.model.HttpMethods;
import org.apache.pekko.http.javadsl.model.HttpRequest;
import org.apache.pekko.http.javadsl.model.RequestEntityAcceptances;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.server.Route;
import org.apache.pekko.http.javadsl.settings.ServerSettings;
import org.apache.pekko.stream.javadsl.Flow;

/**
 * A bound HTTP server: {@link #start} binds {@code route} (usually {@link ServingRoutes#route()}) at
 * {@code xla-actors.http.host} and {@code port}; {@link #close()} unbinds it and ends open connections.
 * Each connection gets a {@link ClientConnection} on its requests, ended with the connection, so that
 * {@link ServingRoutes} cancels the requests of a client that went away. Thread-safe.
 */
public final class HttpServer implements AutoCloseable {
  private static final Duration BIND_WAIT = Duration.ofSeconds(30);
  /**
   * QUERY (the IETF's safe method with a body, OpenAPI 3.2's {@code query} operation): known to the parser, so
   * that a request with it reaches the routes and is answered 405 (no route takes it), not 501 as an
   * unrecognized method is (schemathesis sends it to every path).
   */
  static final HttpMethod QUERY = HttpMethods.custom("QUERY", true, true, RequestEntityAcceptances.Expected);
  private final ServerBinding binding;
  private final ServerSettings settings; // what the parser's refusals are counted by (ParseErrorResponses)

  private HttpServer(ServerBinding binding, ServerSettings settings) {
    this.binding = binding;
    this.settings = settings;
  }

  /**
   * Binds {@code route}, its rejections and Pekko's own timeouts answered in each protocol's JSON error
   * shape ({@link RouteErrors}), behind the API keys of the system's config ({@link ApiKeys#create}: none by
   * default); fails (naming the address) when the port is taken or the host cannot be bound.
   */
  public static HttpServer start(ActorSystem<?> system, HttpSettings settings, Route route) {
    return start(system, settings, ApiKeys.create(system), route, null);
  }

  /**
   * As {@link #start(ActorSystem, HttpSettings, Route)}, counting every error response in {@code registry}
   * ({@code xla_http_refusals_total{api, status}}; null: not counted). Give it the registry that
   * {@code GET /metrics} scrapes.
   */
  public static HttpServer start(ActorSystem<?> system, HttpSettings settings, Route route, MeterRegistry registry) {
    return start(system, settings, ApiKeys.create(system), route, registry);
  }

  /**
   * As {@link #start(ActorSystem, HttpSettings, Route, MeterRegistry)}, behind {@code keys} ({@link ApiKeys#guard})
   * instead of the config's. Warns, naming the setting, when the address is reachable from other machines:
   * without a key anyone there can use every route, and with one the key still crosses the network in clear
   * (this server has no TLS).
   */
  public static HttpServer start(ActorSystem<?> system, HttpSettings settings, ApiKeys keys, Route route, MeterRegistry registry) {
    try {
      // Requests the parser refuses before any route: JSON too, and TRACE with a body 405 (ParseErrorResponses).
      ServerSettings server = ServerSettings.create(ConfigFactory.parseString("pekko.http.server.parsing.error-handler = \""
          + ParseErrorResponses.FQCN + "\"").withFallback(serverConfig(system.settings().config(), settings)));
      server = server.withParserSettings(server.getParserSettings().withCustomMethods(QUERY));
      HttpMetrics metrics = registry == null ? null : new HttpMetrics(registry);
      if (metrics != null) {
        ParseErrorResponses.count(server, metrics);
      }
      ServerBinding binding;
      try {
        binding = Http.get(system).newServerAt(settings.host(), settings.port()).withSettings(server)
            .bindFlow(perConnection(system, RouteErrors.around(keys.guard(route), metrics)))
            .toCompletableFuture().get(BIND_WAIT.toSeconds(), TimeUnit.SECONDS);
      } catch (ExecutionException | TimeoutException | InterruptedException | RuntimeException e) {
        ParseErrorResponses.forget(server);
        throw e;
      }
      exposure(binding.localAddress(), keys).ifPresent(warning -> system.log().warn(warning));
      return new HttpServer(binding, server);
    } catch (ExecutionException e) {
      throw new XlaException(ErrorCode.UNAVAILABLE, "cannot listen on " + settings.host() + ":" + settings.port() + " ("
          + HttpSettings.ROOT + ".host/port): " + e.getCause().getMessage() + "; choose another port (0: any free one)", e.getCause());
    } catch (TimeoutException e) {
      throw new XlaException(ErrorCode.DEADLINE_EXCEEDED, "binding " + settings.host() + ":" + settings.port() + " took longer than "
          + BIND_WAIT.toSeconds() + " s", e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new XlaException(ErrorCode.CANCELLED, "interrupted while binding " + settings.host() + ":" + settings.port(), e);
    }
  }

  /**
   * The warning for a server bound at {@code address} with {@code keys}: none on a loopback address (only this
   * machine reaches it); else what is exposed and the setting that closes it.
   */
  static Optional<String> exposure(InetSocketAddress address, ApiKeys keys) {
    InetAddress ip = address.getAddress();
    if (ip != null && ip.isLoopbackAddress()) {
      return Optional.empty();
    }
    String where = "HTTP listens on " + address.getHostString() + ":" + address.getPort() + " (" + HttpSettings.ROOT
        + ".host), which other machines can reach";
    if (!keys.required()) {
      return Optional.of(where + ", without an API key: anyone who reaches it can run every model; set "
          + HttpSettings.ROOT + ".api-key or api-keys-file (serve --api-key), and put a TLS proxy in front, or bind 127.0.0.1");
    }
    return Optional.of(where + ", without TLS: the API key and every request cross the network in clear; put a TLS-terminating"
        + " proxy in front and bind " + HttpSettings.ROOT + ".host to 127.0.0.1");
  }

  /**
   * {@code config} with {@code pekko.http.server.idle-timeout} at least {@code max-request-timeout} plus
   * {@code request-timeout-margin} and a second: a connection whose request waits for its answer sends and
   * receives nothing, so a shorter idle timeout would close it before the request's own deadline.
   */
  static Config serverConfig(Config config, HttpSettings settings) {
    String key = "pekko.http.server.idle-timeout";
    Duration floor = settings.maxRequestTimeout().plus(settings.requestTimeoutMargin()).plusSeconds(1);
    boolean infinite = config.hasPath(key) && "infinite".equals(config.getString(key));
    if (infinite || config.getDuration(key).compareTo(floor) >= 0) {
      return config;
    }
    return ConfigFactory.parseString(key + " = " + floor.toMillis() + "ms").withFallback(config);
  }

  /**
   * The handler of one connection (materialized once per connection): {@code route} over its requests,
   * each carrying the connection's {@link ClientConnection}, which is closed when the requests stop coming:
   * the client closed or reset the connection, or the server ended it. The termination is watched ahead
   * of the route, which holds its completion back until the pending response is done; a client that only
   * sent {@code Connection: close} does not end it.
   */
  private static Flow<HttpRequest, HttpResponse, ?> perConnection(ActorSystem<?> system, Route route) {
    Flow<HttpRequest, HttpResponse, ?> routeFlow = route.flow(system);
    return Flow.fromMaterializer((materializer, attributes) -> {
      ClientConnection connection = new ClientConnection();
      return Flow.<HttpRequest>create()
          .watchTermination((notUsed, ended) -> {
            ended.whenComplete((done, failure) -> connection.close());
            return notUsed;
          })
          .map(request -> request.addAttribute(ClientConnection.KEY, connection))
          .via(routeFlow);
    });
  }

  /** The port the server listens on (the chosen one when the settings said 0). */
  public int port() {
    return binding.localAddress().getPort();
  }

  /** {@code http://host:port}, the base of every route. */
  public String url() {
    return "http://" + binding.localAddress().getHostString() + ":" + port();
  }

  /** Stops accepting connections and ends the open ones (waiting up to 5 s for requests in progress). */
  @Override
  public void close() {
    ParseErrorResponses.forget(settings);
    try {
      binding.terminate(Duration.ofSeconds(5)).toCompletableFuture().get(30, TimeUnit.SECONDS);
    } catch (ExecutionException | TimeoutException e) {
      throw new XlaException(ErrorCode.INTERNAL, "unbinding " + url() + " failed: " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
