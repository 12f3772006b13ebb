package dev.xlaactors.cluster;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.runtime.HostFunction;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.actor.typed.SupervisorStrategy;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.apache.pekko.actor.typed.receptionist.ServiceKey;
import org.slf4j.MDC;

/**
 * Serves one callback to programs running on other nodes: registered with the Receptionist under {@link
 * #serviceKey}, it answers each {@link Request} with exactly one {@link Reply}, running the function on
 * Pekko's blocking-IO dispatcher (it may block). The caller's side is a {@link
 * RemoteCallbackClient}; the messages cross JVMs through {@link RemoteCallbackSerializer}.
 *
 * <p>Nothing of the caller's native bridge travels: a request names its call by a {@code callId} that
 * only the calling client understands, and carries copies of the inputs.
 */
public final class RemoteCallbackServer extends AbstractBehavior<RemoteCallbackServer.Request> {

  /** Marks the messages that cross JVMs; bound to {@link RemoteCallbackSerializer} in reference.conf. */
  public interface Message {}

  /** One call to serve: the callback's inputs, answered to {@code replyTo} with the same {@code callId}. */
  public record Request(long callId, String callbackName, List<HostTensor> inputs, ActorRef<Reply> replyTo)
      implements Message {
    public Request {
      inputs = List.copyOf(inputs);
    }
  }

  /** The answer to a request. */
  public sealed interface Reply extends Message {
    /** The {@code callId} of the request answered. */
    long callId();
  }

  /** The callback's outputs, checked against the template it is served with. */
  public record Served(long callId, List<HostTensor> outputs) implements Reply {
    public Served {
      outputs = List.copyOf(outputs);
    }
  }

  /** The callback failed: {@code message} names it, the node and what went wrong. */
  public record Refused(long callId, ErrorCode code, String message) implements Reply {}

  private final String name;
  private final List<TensorType> outputTemplate;
  private final Object staticArgument;
  private final HostFunction function;
  private final Executor executor;
  private final String node;

  /** The Receptionist key under which the callback {@code name} is served. */
  public static ServiceKey<Request> serviceKey(ClusterSettings settings, String name) {
    return ServiceKey.create(Request.class, settings.serviceKeyPrefix() + name);
  }

  /**
   * A server of the callback {@code name}. A failure while handling a request resumes it: the server
   * holds no state a restart would repair, and the request's caller is bounded by its own timeout.
   */
  public static Behavior<Request> create(
      ClusterSettings settings, String name, List<TensorType> outputTemplate, Object staticArgument, HostFunction function) {
    Objects.requireNonNull(function, "function");
    return Behaviors.<Request>supervise(
            Behaviors.setup(context -> new RemoteCallbackServer(context, settings, name, outputTemplate, staticArgument, function)))
        .onFailure(SupervisorStrategy.resume());
  }

  private RemoteCallbackServer(
      ActorContext<Request> context,
      ClusterSettings settings,
      String name,
      List<TensorType> outputTemplate,
      Object staticArgument,
      HostFunction function) {
    super(context);
    this.name = name;
    this.outputTemplate = List.copyOf(outputTemplate);
    this.staticArgument = staticArgument;
    this.function = function;
    // Functions may block: Pekko's blocking-IO dispatcher, never the default one.
    this.executor = context.getSystem().dispatchers().lookup(DispatcherSelector.blocking());
    this.node = context.getSystem().address().toString();
    context.getSystem().receptionist().tell(Receptionist.register(serviceKey(settings, name), context.getSelf()));
  }

  @Override
  public Receive<Request> createReceive() {
    return newReceiveBuilder().onMessage(Request.class, this::onRequest).build();
  }

  private Behavior<Request> onRequest(Request r) {
    if (!name.equals(r.callbackName())) {
      r.replyTo().tell(new Refused(r.callId(), ErrorCode.NOT_FOUND,
          "node " + node + " serves callback '" + name + "' here, not '" + r.callbackName() + "'"));
      return this;
    }
    try {
      executor.execute(() -> answer(r));
    } catch (RejectedExecutionException e) {
      r.replyTo().tell(new Refused(r.callId(), ErrorCode.UNAVAILABLE,
          "callback '" + name + "' could not be scheduled on node " + node + ": " + e));
    }
    return this;
  }

  /** Runs on the blocking-IO dispatcher and answers from there: no further hop through this actor. */
  private void answer(Request r) {
    MDC.put("callback", name);
    try {
      r.replyTo().tell(reply(r));
    } finally {
      MDC.remove("callback");
    }
  }

  private Reply reply(Request r) {
    List<HostTensor> outputs;
    try {
      outputs = function.apply(r.inputs(), staticArgument);
    } catch (Throwable thrown) {
      return new Refused(r.callId(), ErrorCode.ABORTED, "callback '" + name + "' threw " + thrown.getClass().getName()
          + ": " + thrown.getMessage() + " (on node " + node + ")");
    }
    List<TensorType> types = new ArrayList<>();
    if (outputs != null) {
      for (HostTensor t : outputs) {
        types.add(t == null ? null : t.type());
      }
    }
    if (outputs == null || !types.equals(outputTemplate)) {
      return new Refused(r.callId(), ErrorCode.INVALID_ARGUMENT, "callback '" + name + "' returned "
          + (outputs == null ? "null" : types) + ", expected " + outputTemplate + " (on node " + node + ")");
    }
    return new Served(r.callId(), outputs);
  }
}
