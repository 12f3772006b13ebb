package dev.xlaactors.cluster;

import dev.xlaactors.cluster.ShardedComputations.Accepted;
import dev.xlaactors.cluster.ShardedComputations.Failed;
import dev.xlaactors.cluster.ShardedComputations.Outputs;
import dev.xlaactors.cluster.ShardedComputations.Reply;
import dev.xlaactors.cluster.ShardedComputations.Run;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.HostTensor;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.Address;
import org.apache.pekko.actor.AddressFromURIString;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
import org.apache.pekko.cluster.ClusterEvent;
import org.apache.pekko.cluster.sharding.typed.javadsl.ClusterSharding;
import org.apache.pekko.cluster.typed.Cluster;
import org.apache.pekko.cluster.typed.Subscribe;
import org.apache.pekko.pattern.StatusReply;

/**
 * The requesting side of {@link ShardedComputations} on one node: it sends each run to its entity
 * through sharding, and answers the caller once, with the outputs or an error. It owns every run's
 * timeout timer and watches the node that accepted the run: when that node becomes unreachable or is
 * removed from the cluster before answering, the run fails at once with {@code UNAVAILABLE} naming it.
 *
 * <p>A run no entity has accepted yet is sent again every {@link #RESEND_INTERVAL} until one does or the
 * run times out. Pekko delivers at most once, and a run sent to the shard of a node that died (before
 * sharding knows it, up to the moment this node has processed that node's removal) is lost; sent again,
 * it reaches the entity sharding starts on another node. Entities ignore the copies of a run they
 * already accepted (same reply address and request id), so a run executes once per entity.
 *
 * <p>Replies from the entities come back through a message adapter (it is an actor ref other nodes can
 * send to); cluster events through adapters as well.
 */
final class ComputationRequester extends AbstractBehavior<ComputationRequester.Command> {

  /** Messages of the requester. */
  sealed interface Command {}

  /** Runs computation {@code id}; {@code replyTo} gets its outputs or its error. */
  record Submit(String id, List<HostTensor> inputs, Duration timeout, ActorRef<StatusReply<List<HostTensor>>> replyTo)
      implements Command {}

  private record Replied(Reply reply) implements Command {}

  private record TimedOut(long requestId) implements Command {}

  private record Resend(long requestId) implements Command {}

  private record NodeUnreachable(Address node) implements Command {}

  private record NodeReachable(Address node) implements Command {}

  private record NodeRemoved(Address node) implements Command {}

  /** How long a run may wait to be accepted before it is sent again (and again, until accepted or timed out). */
  static final Duration RESEND_INTERVAL = Duration.ofSeconds(1);

  /** A run sent and not answered yet; {@code node} is null until an entity accepted it. */
  private static final class Pending {
    final Submit submit;
    final Run run;
    final long sentNanos = System.nanoTime();
    int sends = 1;
    Address node;

    Pending(Submit submit, Run run) {
      this.submit = submit;
      this.run = run;
    }
  }

  private final ClusterSharding sharding;
  private final TimerScheduler<Command> timers;
  private final ActorRef<Reply> replies;
  private final Map<Long, Pending> pending = new HashMap<>();
  private final Set<Address> unreachable = new HashSet<>();
  private long nextRequestId = 1;

  /** A requester sending through {@code sharding}. Not supervised: it holds no state worth a restart. */
  static Behavior<Command> create(ClusterSharding sharding) {
    return Behaviors.setup(context -> Behaviors.withTimers(timers -> new ComputationRequester(context, timers, sharding)));
  }

  private ComputationRequester(ActorContext<Command> context, TimerScheduler<Command> timers, ClusterSharding sharding) {
    super(context);
    this.sharding = sharding;
    this.timers = timers;
    this.replies = context.messageAdapter(Reply.class, Replied::new);
    Cluster cluster = Cluster.get(context.getSystem());
    cluster.subscriptions().tell(Subscribe.create(
        context.messageAdapter(ClusterEvent.ReachabilityEvent.class, ComputationRequester::reachability),
        ClusterEvent.ReachabilityEvent.class));
    cluster.subscriptions().tell(Subscribe.create(
        context.messageAdapter(ClusterEvent.MemberRemoved.class, e -> new NodeRemoved(e.member().address())),
        ClusterEvent.MemberRemoved.class));
  }

  private static Command reachability(ClusterEvent.ReachabilityEvent e) {
    return e instanceof ClusterEvent.UnreachableMember ? new NodeUnreachable(e.member().address()) : new NodeReachable(e.member().address());
  }

  @Override
  public Receive<Command> createReceive() {
    return newReceiveBuilder()
        .onMessage(Submit.class, this::onSubmit)
        .onMessage(Replied.class, this::onReplied)
        .onMessage(TimedOut.class, this::onTimedOut)
        .onMessage(Resend.class, this::onResend)
        .onMessage(NodeUnreachable.class, this::onNodeUnreachable)
        .onMessage(NodeReachable.class, this::onNodeReachable)
        .onMessage(NodeRemoved.class, this::onNodeRemoved)
        .build();
  }

  private Behavior<Command> onSubmit(Submit s) {
    long requestId = nextRequestId++;
    Pending p = new Pending(s, new Run(requestId, s.inputs(), replies));
    pending.put(requestId, p);
    timers.startSingleTimer(requestId, new TimedOut(requestId), s.timeout());
    send(p);
    return this;
  }

  private void send(Pending p) {
    sharding.entityRefFor(ShardedComputations.TYPE_KEY, p.submit.id()).tell(p.run);
    timers.startSingleTimer(resendKey(p.run.requestId()), new Resend(p.run.requestId()), RESEND_INTERVAL);
  }

  private Behavior<Command> onResend(Resend r) {
    Pending p = pending.get(r.requestId());
    if (p != null && p.node == null) {
      p.sends++;
      getContext().getLog().debug("run {} of computation '{}' not accepted after {} ms; sending it again (send {})",
          r.requestId(), p.submit.id(), TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - p.sentNanos), p.sends);
      send(p);
    }
    return this;
  }

  /** The resend timer's key: distinct from the timeout timer's, which is the request id itself. */
  private static String resendKey(long requestId) {
    return "resend-" + requestId;
  }

  private Behavior<Command> onReplied(Replied r) {
    Reply reply = r.reply();
    if (reply instanceof Accepted a) {
      Pending p = pending.get(a.requestId());
      if (p != null && p.node == null) {
        p.node = AddressFromURIString.parse(a.node());
        timers.cancel(resendKey(a.requestId()));
        if (unreachable.contains(p.node)) {
          finish(a.requestId(), StatusReply.error(unavailable(p, "is unreachable")));
        }
      }
    } else if (reply instanceof Outputs o) {
      finish(o.requestId(), StatusReply.success(o.outputs()));
    } else if (reply instanceof Failed f) {
      finish(f.requestId(), StatusReply.error(ShardedComputations.failure(f)));
    }
    return this;
  }

  private Behavior<Command> onTimedOut(TimedOut t) {
    Pending p = pending.remove(t.requestId());
    if (p != null) {
      String where = p.node == null
          ? "no node accepted it (the node holding the computation may be dead and not yet removed from the cluster;"
              + " sharding moves the computation once it is)"
          : "it was accepted by node " + p.node;
      timers.cancel(resendKey(t.requestId()));
      p.submit.replyTo().tell(StatusReply.error(new XlaException(ErrorCode.DEADLINE_EXCEEDED,
          "a run of computation '" + p.submit.id() + "' got no answer within " + asWritten(p.submit.timeout()) + "; " + where)));
    }
    return this;
  }

  private Behavior<Command> onNodeUnreachable(NodeUnreachable u) {
    unreachable.add(u.node());
    failRunsOn(u.node(), "became unreachable during the run");
    return this;
  }

  private Behavior<Command> onNodeReachable(NodeReachable r) {
    unreachable.remove(r.node());
    return this;
  }

  private Behavior<Command> onNodeRemoved(NodeRemoved r) {
    unreachable.remove(r.node());
    failRunsOn(r.node(), "left the cluster during the run");
    return this;
  }

  private void failRunsOn(Address node, String what) {
    for (Iterator<Map.Entry<Long, Pending>> i = pending.entrySet().iterator(); i.hasNext(); ) {
      Map.Entry<Long, Pending> e = i.next();
      Pending p = e.getValue();
      if (node.equals(p.node)) {
        i.remove();
        timers.cancel(e.getKey());
        timers.cancel(resendKey(e.getKey()));
        XlaException error = unavailable(p, what);
        getContext().getLog().warn("{}", error.getMessage());
        p.submit.replyTo().tell(StatusReply.error(error));
      }
    }
  }

  private static XlaException unavailable(Pending p, String what) {
    return new XlaException(ErrorCode.UNAVAILABLE, "computation '" + p.submit.id() + "': node " + p.node + " running it "
        + what + "; once that node is removed from the cluster, the computation starts on another node of its role,"
        + " so the run may be tried again");
  }

  /** {@code 500 ms}, {@code 20 s}: how people write a timeout, not ISO-8601. */
  private static String asWritten(Duration d) {
    long ms = d.toMillis();
    return ms % 1000 == 0 ? ms / 1000 + " s" : ms + " ms";
  }

  private void finish(long requestId, StatusReply<List<HostTensor>> answer) {
    Pending p = pending.remove(requestId);
    if (p != null) {
      timers.cancel(requestId);
      timers.cancel(resendKey(requestId));
      p.submit.replyTo().tell(answer);
    }
  }
}
