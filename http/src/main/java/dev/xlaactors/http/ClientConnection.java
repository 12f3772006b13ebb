package dev.xlaactors.http;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletionStage;
import org.apache.pekko.http.javadsl.model.AttributeKey;

/**
 * One client's HTTP connection, as the routes see it: {@link HttpServer} makes one per connection and puts
 * it on each of the connection's requests (attribute {@link #KEY}); a route registers how to cancel the
 * work it started for a request ({@link #cancelOnClose}), and when the connection ends (the client closed
 * it, reset it, or the server ended it) every such work not yet answered is cancelled, since its answer
 * could no longer be delivered. Thread-safe.
 */
final class ClientConnection {
  /** The request attribute that carries the request's connection. */
  static final AttributeKey<ClientConnection> KEY = AttributeKey.create("xla-actors.client-connection", ClientConnection.class);

  private final Set<Runnable> open = new LinkedHashSet<>();
  private boolean closed;

  /**
   * Runs {@code cancel} when the connection ends before {@code answered} completes; at once when it has
   * ended already. Register right after the work was sent, so that a cancel never overtakes it.
   */
  void cancelOnClose(CompletionStage<?> answered, Runnable cancel) {
    boolean ended;
    synchronized (this) {
      ended = closed;
      if (!ended) {
        open.add(cancel);
      }
    }
    if (ended) {
      cancel.run();
      return;
    }
    answered.whenComplete((result, failure) -> {
      synchronized (this) {
        open.remove(cancel);
      }
    });
  }

  /** The connection ended: cancels the work still open (once; later calls do nothing). */
  void close() {
    List<Runnable> cancels;
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
      cancels = new ArrayList<>(open);
      open.clear();
    }
    cancels.forEach(Runnable::run);
  }
}
