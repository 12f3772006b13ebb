package dev.xlaactors.cluster;

import dev.xlaactors.actors.ActorsSettings;
import dev.xlaactors.actors.CallbackServer;
import dev.xlaactors.cluster.RemoteCallbackServer.Refused;
import dev.xlaactors.cluster.RemoteCallbackServer.Reply;
import dev.xlaactors.cluster.RemoteCallbackServer.Request;
import dev.xlaactors.cluster.RemoteCallbackServer.Served;
import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.HostTensor;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
import org.apache.pekko.actor.typed.receptionist.Receptionist;
import org.apache.pekko.actor.typed.receptionist.ServiceKey;
import org.apache.pekko.cluster.ClusterEvent;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Subscribe;
import org.apache.pekko.pattern.StatusReply;

/**
 * The local stand-in for a callback served on other nodes: registered with this node's {@link
 * dev.xlaactors.actors.CallbackDispatcher} as the {@link CallbackServer} of the callback, it forwards each
 * call to a reachable {@link RemoteCallbackServer} (found through the Receptionist, chosen round robin)
 * and completes the call from the reply. The {@link HostCall}, whose tag belongs to this node's native
 * bridge, never leaves the node: the request names the call by a {@code callId} of this client.
 *
 * <p>It watches the servers it calls and the cluster's reachability: when the node serving a call
 * becomes unreachable, leaves the cluster or its server stops, the call fails at once with {@link
 * ErrorCode#UNAVAILABLE} naming the node, which aborts that run only. Calls made while no reachable node
 * serves the callback fail the same way. Slow answers are bounded by the run's callback timeout (the
 * {@code RunSupervisor}'s), as for local callbacks.
 *
 * <p>Its messages are {@link CallbackServer.Request} (from the dispatcher), {@link AwaitServers}, and
 * private ones; the behavior is typed {@code Object} because the first is a type of the actors module.
 */
public final class RemoteCallbackClient extends AbstractBehavior<Object> {

  /** Answers {@code replyTo} with the number of reachable servers once there are at least {@code count}. */
  public record AwaitServers(int count, ActorRef<StatusReply<Integer>> replyTo) {}

  private sealed interface Internal {}

  private record CallForgotten(long callId) implements Internal {}

  private record ServerTerminated(ActorRef<Request> server) implements Internal {}

  private record Pending(HostCall call, ActorRef<CallbackServer.Response> replyTo, ActorRef<Request> server) {}

  private final String name;
  private final ServiceKey<Request> key;
  private final ClusterSettings settings;
  private final CallbackSecret secret;
  private final ActorsSettings actors;
  private final TimerScheduler<Object> timers;
  private final List<ActorRef<Request>> servers = new ArrayList<>();
  private final Set<ActorRef<Request>> watched = new HashSet<>();
  private final Set<Address> unreachable = new HashSet<>();
  private final Map<Long, Pending> pending = new HashMap<>();
  private final List<AwaitServers> awaiting = new ArrayList<>();
  private long nextCallId = 1;
  private int nextServer;

  /**
   * A client of the callback {@code name}. No supervision strategy: if it fails it stops, and the
   * RunSupervisor of each run waiting on it fails that run (it watches the server it was given).
   */
  public static Behavior<Object> create(ClusterSettings settings, ActorsSettings actors, String name) {
    return create(settings, CallbackSecret.NONE, actors, name);
  }

  /** A client of the callback {@code name} whose requests carry {@code secret}. */
  public static Behavior<Object> create(ClusterSettings settings, CallbackSecret secret, ActorsSettings actors, String name) {
    return Behaviors.setup(context -> Behaviors.withTimers(timers -> new RemoteCallbackClient(context, timers, settings, secret, actors, name)));
  }

  private RemoteCallbackClient(
      ActorContext<Object> context,
      TimerScheduler<Object> timers,
      ClusterSettings settings,
      CallbackSecret secret,
      ActorsSettings actors,
      String name) {
    super(context);
    this.name = name;
    this.settings = settings;
    this.secret = secret;
    this.actors = actors;
    this.timers = timers;
    this.key = RemoteCallbackServer.serviceKey(settings, name);
    context.getSystem().receptionist().tell(Receptionist.subscribe(key, context.getSelf().narrow()));
    if (XlaCluster.isClustered(context.getSystem())) {
      Cluster.get(context.getSystem()).subscriptions()
          .tell(Subscribe.create(context.getSelf().narrow(), ClusterEvent.ReachabilityEvent.class));
      Cluster.get(context.getSystem()).subscriptions()
          .tell(Subscribe.create(context.getSelf().narrow(), ClusterEvent.MemberRemoved.class));
    }
  }

  @Override
  public Receive<Object> createReceive() {
    return newReceiveBuilder()
        .onMessage(CallbackServer.Request.class, this::onCall)
        .onMessage(Served.class, this::onServed)
        .onMessage(Refused.class, this::onRefused)
        .onMessage(Receptionist.Listing.class, this::onListing)
        .onMessage(ClusterEvent.UnreachableMember.class, this::onUnreachable)
        .onMessage(ClusterEvent.ReachableMember.class, this::onReachable)
        .onMessage(ClusterEvent.MemberRemoved.class, this::onRemoved)
        .onMessage(ServerTerminated.class, this::onServerTerminated)
        .onMessage(CallForgotten.class, this::onCallForgotten)
        .onMessage(AwaitServers.class, this::onAwaitServers)
        .build();
  }

  private Behavior<Object> onCall(CallbackServer.Request r) {
    HostCall call = r.call();
    List<ActorRef<Request>> reachable = reachable();
    if (reachable.isEmpty()) {
      r.replyTo().tell(CallbackServer.Response.failed(call.tag(), unavailable(
          "callback '" + name + "': no reachable node serves it (service key '" + key.id() + "')"
              + (unreachable.isEmpty() ? "" : "; unreachable nodes: " + new TreeSet<>(unreachable.stream().map(Address::toString).toList())))));
      return this;
    }
    long bytes = call.inputs().stream().mapToLong(t -> t.type().byteSize()).sum();
    if (bytes > settings.maximumFrameBytes()) {
      r.replyTo().tell(CallbackServer.Response.failed(call.tag(), new CallbackException(name, ErrorCode.RESOURCE_EXHAUSTED,
          "callback '" + name + "': its inputs take " + bytes + " bytes, more than a message between nodes may carry ("
              + settings.maximumFrameBytes() + " bytes, pekko.remote.artery.advanced.maximum-frame-size)")));
      return this;
    }
    ActorRef<Request> server = reachable.get(Math.floorMod(nextServer++, reachable.size()));
    long callId = nextCallId++;
    pending.put(callId, new Pending(call, r.replyTo(), server));
    if (watched.add(server)) {
      getContext().watchWith(server, new ServerTerminated(server));
    }
    // Forget the call a little after the run's own timeout has failed it, in case no reply ever comes
    // (a reply the serializer refused is dropped by Pekko).
    Duration timeout = actors.callbackTimeoutOf(call.callbackName());
    timers.startSingleTimer(callId, new CallForgotten(callId), timeout.plus(actors.nativeBackstopSlack()));
    server.tell(new Request(callId, name, call.inputs(), getContext().getSelf().narrow(), secret));
    return this;
  }

  private Behavior<Object> onServed(Served s) {
    Pending p = pending.remove(s.callId());
    if (p != null) {
      timers.cancel(s.callId());
      p.replyTo().tell(CallbackServer.Response.ok(p.call().tag(), s.outputs()));
    }
    return this;
  }

  private Behavior<Object> onRefused(Refused f) {
    Pending p = pending.remove(f.callId());
    if (p != null) {
      timers.cancel(f.callId());
      p.replyTo().tell(CallbackServer.Response.failed(p.call().tag(), new CallbackException(name, f.code(), f.message())));
    }
    return this;
  }

  @SuppressWarnings("unchecked")
  private Behavior<Object> onListing(Receptionist.Listing listing) {
    if (listing.isForKey(key)) {
      servers.clear();
      // All instances, reachable or not: this client keeps its own view of reachability, which it acts on
      // as soon as the failure detector reports, so the two never disagree about a pending call.
      servers.addAll((Set<ActorRef<Request>>) (Set<?>) listing.getAllServiceInstances(key));
      servers.sort((a, b) -> a.path().toString().compareTo(b.path().toString()));
      answerAwaiting();
    }
    return this;
  }

  private Behavior<Object> onUnreachable(ClusterEvent.UnreachableMember m) {
    Address node = m.member().address();
    unreachable.add(node);
    failCallsOn(node, "became unreachable");
    return this;
  }

  private Behavior<Object> onReachable(ClusterEvent.ReachableMember m) {
    unreachable.remove(m.member().address());
    answerAwaiting();
    return this;
  }

  private Behavior<Object> onRemoved(ClusterEvent.MemberRemoved m) {
    Address node = m.member().address();
    unreachable.remove(node);
    servers.removeIf(s -> node.equals(s.path().address()));
    failCallsOn(node, "left the cluster");
    return this;
  }

  private Behavior<Object> onServerTerminated(ServerTerminated t) {
    watched.remove(t.server());
    servers.remove(t.server());
    for (Iterator<Map.Entry<Long, Pending>> i = pending.entrySet().iterator(); i.hasNext(); ) {
      Map.Entry<Long, Pending> e = i.next();
      if (e.getValue().server().equals(t.server())) {
        i.remove();
        timers.cancel(e.getKey());
        fail(e.getValue(), "callback '" + name + "': the actor serving it on node " + t.server().path().address() + " stopped");
      }
    }
    return this;
  }

  private Behavior<Object> onCallForgotten(CallForgotten f) {
    pending.remove(f.callId());
    return this;
  }

  private Behavior<Object> onAwaitServers(AwaitServers a) {
    awaiting.add(a);
    answerAwaiting();
    return this;
  }

  private void failCallsOn(Address node, String what) {
    for (Iterator<Map.Entry<Long, Pending>> i = pending.entrySet().iterator(); i.hasNext(); ) {
      Map.Entry<Long, Pending> e = i.next();
      if (node.equals(e.getValue().server().path().address())) {
        i.remove();
        timers.cancel(e.getKey());
        fail(e.getValue(), "callback '" + name + "': node " + node + " serving it " + what + " during the call");
      }
    }
  }

  private void fail(Pending p, String message) {
    getContext().getLog().warn("{}", message);
    p.replyTo().tell(CallbackServer.Response.failed(p.call().tag(), unavailable(message)));
  }

  private CallbackException unavailable(String message) {
    return new CallbackException(name, ErrorCode.UNAVAILABLE, message);
  }

  private List<ActorRef<Request>> reachable() {
    return servers.stream().filter(s -> !unreachable.contains(s.path().address())).toList();
  }

  private void answerAwaiting() {
    int count = reachable().size();
    awaiting.removeIf(a -> {
      if (count >= a.count()) {
        a.replyTo().tell(StatusReply.success(count));
        return true;
      }
      return false;
    });
  }
}
