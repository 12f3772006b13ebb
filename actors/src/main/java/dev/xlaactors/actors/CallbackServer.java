package dev.xlaactors.actors;

import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.HostTensor;
import java.util.List;
import org.apache.pekko.actor.typed.ActorRef;

/**
 * The protocol of an actor that serves a callback (registered with {@link
 * CallbackDispatcher.RegisterServer}): any actor, local or, with Pekko cluster, in another JVM. It answers
 * each {@link Request} with exactly one {@link Response}. If it stops while a call is pending, the run is
 * aborted with an error naming the callback.
 */
public final class CallbackServer {
  private CallbackServer() {}

  /**
   * One call to serve. A served callback has no static argument: the serving actor holds whatever state
   * it needs.
   */
  public record Request(HostCall call, ActorRef<Response> replyTo) {}

  /**
   * The answer to a request: outputs matching the callback's template, or the error that made it fail.
   *
   * @param tag the {@code call().tag()} of the request
   * @param outputs the results (null when {@code error} is set)
   * @param error why the callback failed, or null. A {@link dev.xlaactors.error.CallbackException} aborts
   *     the run as it is (its code and message); any other throwable as a callback that threw ({@code
   *     ABORTED}, naming its class and message)
   */
  public record Response(long tag, List<HostTensor> outputs, Throwable error) {
    public static Response ok(long tag, List<HostTensor> outputs) {
      return new Response(tag, outputs, null);
    }

    public static Response failed(long tag, Throwable error) {
      return new Response(tag, null, error);
    }
  }
}
