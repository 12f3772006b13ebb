package dev.xlaactors.cluster;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Optional;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;

/**
 * Starts the actor system of one node from configuration: a cluster node when {@code
 * xla-actors.cluster.seed-nodes} is set (it joins the seeds at start), a plain single-JVM system
 * otherwise; either way with the batch jobs' journal configured from {@code xla-actors.cluster.jobs}
 * (the database is only opened when a job needs it), and with TLS between nodes when {@code
 * xla-actors.cluster.security.tls} is on (see {@link ClusterSecuritySettings}). Everything else (callback runtimes, jobs) runs on the returned system as in one JVM.
 */
public final class XlaCluster {
  private XlaCluster() {}

  /** A node from the default configuration (application.conf, system properties, reference.conf). */
  public static ActorSystem<Void> start() {
    return start(ConfigFactory.load());
  }

  /** A node from {@code config}, which must include the reference configuration (ConfigFactory.load does). */
  public static ActorSystem<Void> start(Config config) {
    return start(Behaviors.empty(), config);
  }

  /** A node whose guardian is {@code guardian}, from {@code config}. */
  public static <T> ActorSystem<T> start(Behavior<T> guardian, Config config) {
    ClusterSettings settings = ClusterSettings.fromConfig(config);
    Config journal = JobJournalSettings.fromConfig(config).pekkoOverrides();
    // Checked even for a single JVM, so a bad key store shows before the node is moved to a cluster.
    ClusterSecuritySettings security = ClusterSecuritySettings.fromConfig(config);
    Config overrides = settings.clustered()
        ? settings.pekkoOverrides().withFallback(security.pekkoOverrides())
        : settings.pekkoOverrides();
    ActorSystem<T> system = ActorSystem.create(
        guardian, settings.systemName(), overrides.withFallback(journal).withFallback(config).resolve());
    if (settings.clustered()) {
      exposure(settings, security).ifPresent(warning -> system.log().warn(warning));
    }
    return system;
  }

  /**
   * The warning for a cluster node listening at {@code settings}' hostname with {@code security}: none with
   * TLS (only nodes with a certificate of the cluster's CA get in) or on a loopback address; else what is
   * exposed and the setting that closes it. A host name that does not resolve is taken as reachable.
   */
  static Optional<String> exposure(ClusterSettings settings, ClusterSecuritySettings security) {
    if (security.tls()) {
      return Optional.empty();
    }
    try {
      if (InetAddress.getByName(settings.hostname()).isLoopbackAddress()) {
        return Optional.empty();
      }
    } catch (UnknownHostException e) {
      // Warn: Pekko binds it once it resolves.
    }
    return Optional.of("the cluster listens on " + settings.hostname() + ":" + settings.port() + " (xla-actors.cluster.hostname), which"
        + " other machines can reach, with xla-actors.cluster.security.tls = off: any process that reaches that port can join the"
        + " cluster and send to its actors (run programs, serve or call callbacks, start jobs); set xla-actors.cluster.security.tls ="
        + " on with key-store and trust-store (tools/cluster-certs.sh makes them), see docs/cluster.md, \"Secure a cluster\"");
  }

  /** Whether {@code system} is a cluster node (its provider is {@code cluster}). */
  public static boolean isClustered(ActorSystem<?> system) {
    return "cluster".equals(system.settings().config().getString("pekko.actor.provider"));
  }

  /** How many members of {@code system}'s cluster are Up, as this node sees them. */
  public static int membersUp(ActorSystem<?> system) {
    int up = 0;
    for (var member : Cluster.get(system).state().getMembers()) {
      up += member.status() == MemberStatus.up() ? 1 : 0;
    }
    return up;
  }

  /**
   * This node's membership status as Pekko names it ({@code Joining}, {@code WeaklyUp}, {@code Up}, {@code
   * Leaving}, ...): only an {@code Up} node hosts sharded entities and is routed to by the others.
   */
  public static String selfStatus(ActorSystem<?> system) {
    return Cluster.get(system).selfMember().status().toString();
  }

  /** Whether this node is {@code Up} in its cluster (see {@link #selfStatus}). */
  public static boolean isUp(ActorSystem<?> system) {
    return Cluster.get(system).selfMember().status() == MemberStatus.up();
  }

  /** The address other nodes reach {@code system} at, e.g. {@code pekko://xla-actors@10.0.0.5:25520}. */
  public static String selfAddress(ActorSystem<?> system) {
    return Cluster.get(system).selfMember().address().toString();
  }
}
