package dev.xlaactors.http;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.http.javadsl.Http;
import org.apache.pekko.http.javadsl.ServerBinding;
import org.apache.pekko.http.javadsl.server.Route;

/**
 * A bound HTTP server: {@link #start} binds {@code route} (usually {@link ServingRoutes#route()}) at
 * {@code xla-actors.http.host} and {@code port}; {@link #close()} unbinds it and ends open connections.
 * Thread-safe.
 */
public final class HttpServer implements AutoCloseable {
  private static final Duration BIND_WAIT = Duration.ofSeconds(30);
  private final ServerBinding binding;

  private HttpServer(ServerBinding binding) {
    this.binding = binding;
  }

  /** Binds {@code route}; fails (naming the address) when the port is taken or the host cannot be bound. */
  public static HttpServer start(ActorSystem<?> system, HttpSettings settings, Route route) {
    try {
      ServerBinding binding = Http.get(system).newServerAt(settings.host(), settings.port()).bind(route)
          .toCompletableFuture().get(BIND_WAIT.toSeconds(), TimeUnit.SECONDS);
      return new HttpServer(binding);
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
    try {
      binding.terminate(Duration.ofSeconds(5)).toCompletableFuture().get(30, TimeUnit.SECONDS);
    } catch (ExecutionException | TimeoutException e) {
      throw new XlaException(ErrorCode.INTERNAL, "unbinding " + url() + " failed: " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
