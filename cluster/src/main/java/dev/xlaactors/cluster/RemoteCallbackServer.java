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
import org.apache.pekko.actor.Address;
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
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.slf4j.MDC;

/**
 * Serves one callback to programs running on other nodes: registered with the Receptionist under {@link
 * #serviceKey}, it answers each {@link Request} with exactly one {@link Reply}, running the function on
 * Pekko's blocking-IO dispatcher (it may block). The caller's side is a {@link
 * RemoteCallbackClient}; the messages cross JVMs through {@link RemoteCallbackSerializer}.
 *
 * <p>Only members are served: a request whose reply address is not a current member of the cluster is
 * dropped and logged, and with a callback secret configured ({@link CallbackSecret}) a request must carry
 * it. Keeping non-members from reaching the node at all is TLS's job ({@link ClusterSecuritySettings}).
 *
 * <p>Nothing of the caller's native bridge travels: a request names its call by a {@code callId} that
 * only the calling client understands, and carries copies of the inputs.
 */
public final class RemoteCallbackServer extends AbstractBehavior<RemoteCallbackServer.Request> {

  /** Marks the messages that cross JVMs; bound to {@link RemoteCallbackSerializer} in reference.conf. */
  public interface Message {}

  /**
   * One call to serve: the callback's inputs, answered to {@code replyTo} with the same {@code callId}, and
   * the caller's {@link CallbackSecret} (checked when the server's node has one).
   */
  public record Request(
      long callId, String callbackName, List<HostTensor> inputs, ActorRef<Reply> replyTo, CallbackSecret secret)
      implements Message {
    public Request {
      inputs = List.copyOf(inputs);
      Objects.requireNonNull(secret, "secret");
    }

    /** A request that carries no secret. */
    public Request(long callId, String callbackName, List<HostTensor> inputs, ActorRef<Reply> replyTo) {
      this(callId, callbackName, inputs, replyTo, CallbackSecret.NONE);
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
  private final CallbackSecret secret;
  private final boolean clustered;

  /** The Receptionist key under which the callback {@code name} is served. */
  public static ServiceKey<Request> serviceKey(ClusterSettings settings, String name) {
    return ServiceKey.create(Request.class, settings.serviceKeyPrefix() + name);
  }

  /** A server of the callback {@code name} that asks for no secret; see the other {@code create}. */
  public static Behavior<Request> create(
      ClusterSettings settings, String name, List<TensorType> outputTemplate, Object staticArgument, HostFunction function) {
    return create(settings, CallbackSecret.NONE, name, outputTemplate, staticArgument, function);
  }

  /**
   * A server of the callback {@code name}. It serves only requests whose reply address is this node or a
   * current member of the cluster (Up, WeaklyUp, Leaving or Exiting), and, when {@code secret} is not
   * {@link CallbackSecret#NONE}, that carry the same secret. A request from elsewhere is dropped without an
   * answer (its reply address is not to be trusted) and logged in one WARN line; a member's request with a
   * wrong secret is answered {@link ErrorCode#PERMISSION_DENIED}. A failure while handling a request
   * resumes it: the server holds no state a restart would repair, and the request's caller is bounded by
   * its own timeout.
   */
  public static Behavior<Request> create(
      ClusterSettings settings,
      CallbackSecret secret,
      String name,
      List<TensorType> outputTemplate,
      Object staticArgument,
      HostFunction function) {
    Objects.requireNonNull(function, "function");
    Objects.requireNonNull(secret, "secret");
    return Behaviors.<Request>supervise(
            Behaviors.setup(context -> new RemoteCallbackServer(context, settings, secret, name, outputTemplate, staticArgument, function)))
        .onFailure(SupervisorStrategy.resume());
  }

  private RemoteCallbackServer(
      ActorContext<Request> context,
      ClusterSettings settings,
      CallbackSecret secret,
      String name,
      List<TensorType> outputTemplate,
      Object staticArgument,
      HostFunction function) {
    super(context);
    this.secret = secret;
    this.clustered = XlaCluster.isClustered(context.getSystem());
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
    Address from = r.replyTo().path().address();
    if (!isMember(from)) {
      getContext().getLog().warn("callback '{}' refused a request from {}: not a member of the cluster (nothing was run"
          + " and nothing is answered)", name, from);
      return this;
    }
    if (!secret.matches(r.secret())) {
      getContext().getLog().warn("callback '{}' refused a request from {}: its callback secret {}", name, from,
          r.secret().isNone() ? "is missing" : "does not match");
      r.replyTo().tell(new Refused(r.callId(), ErrorCode.PERMISSION_DENIED, "callback '" + name + "' on node " + node
          + " refused the request: its secret " + (r.secret().isNone() ? "is missing" : "does not match")
          + " (xla-actors.cluster.security.callback-secret must be the same on every node)"));
      return this;
    }
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

  /**
   * Whether a request answered to {@code from} may be served: this JVM, or a current cluster member. A
   * remoting system that is no cluster ({@code provider = remote}) has no members: only itself.
   */
  private boolean isMember(Address from) {
    if (from.hasLocalScope() || from.equals(getContext().getSystem().address())) {
      return true;
    }
    if (!clustered) {
      return false;
    }
    for (Member m : Cluster.get(getContext().getSystem()).state().getMembers()) {
      if (m.address().equals(from)) {
        MemberStatus s = m.status();
        return s == MemberStatus.up() || s == MemberStatus.weaklyUp() || s == MemberStatus.leaving()
            || s == MemberStatus.exiting();
      }
    }
    return false;
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
