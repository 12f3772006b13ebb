package dev.xlaactors.cluster;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigValueFactory;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.KnownConfigKeys;
import dev.xlaactors.runtime.SettingRanges;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import org.apache.pekko.actor.typed.ActorSystem;

/**
 * The cluster module's settings, read once from {@code xla-actors.cluster} (see its reference.conf) and
 * validated: a missing or unknown key, a wrong type, a malformed seed node or port is an {@link
 * XlaException} naming the key.
 *
 * @param systemName name of the actor system on every node
 * @param seedNodes seed nodes as {@code host:port}; empty: a single JVM, no cluster
 * @param hostname the host name or address other nodes reach this node at
 * @param port this node's TCP port (0: chosen at start)
 * @param roles this node's roles
 * @param serviceKeyPrefix prefix of the Receptionist key of a served callback
 * @param awaitTimeout how long {@link ClusterCallbacks#awaitServers} waits
 * @param maximumFrameBytes the largest message Artery sends ({@code
 *     pekko.remote.artery.advanced.maximum-frame-size}): a call whose tensors do not fit is refused
 */
public record ClusterSettings(
    String systemName,
    List<String> seedNodes,
    String hostname,
    int port,
    List<String> roles,
    String serviceKeyPrefix,
    Duration awaitTimeout,
    long maximumFrameBytes) {
  private static final String ROOT = "xla-actors.cluster";
  private static final Pattern NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9_-]*");
  private static final Pattern HOST_PORT = Pattern.compile("[^:/@\\s]+:\\d{1,5}");

  public ClusterSettings {
    seedNodes = List.copyOf(seedNodes);
    roles = List.copyOf(roles);
  }

  /** Settings from the actor system's config. */
  public static ClusterSettings create(ActorSystem<?> system) {
    return fromConfig(system.settings().config());
  }

  /** Settings from {@code config} (an application config with the modules' reference.conf beneath). */
  public static ClusterSettings fromConfig(Config config) {
    KnownConfigKeys.check(config);
    try {
      Config c = config.getConfig(ROOT);
      String systemName = c.getString("system-name");
      if (!NAME.matcher(systemName).matches()) {
        throw invalid("system-name", "must be letters, digits, '-' and '_' (an actor system name)", systemName);
      }
      List<String> seeds = c.getStringList("seed-nodes");
      for (String seed : seeds) {
        if (!HOST_PORT.matcher(seed).matches() || port(seed) > 65535) {
          throw invalid("seed-nodes", "must hold \"host:port\" strings such as \"10.0.0.5:25520\"", seed);
        }
      }
      int port = c.getInt("port");
      if (port < 0 || port > 65535) {
        throw invalid("port", "must be 0 (chosen at start) to 65535", Integer.toString(port));
      }
      Duration await = c.getDuration("callbacks.await-timeout");
      if (await.isNegative() || await.isZero()) {
        throw invalid("callbacks.await-timeout", "must be a positive duration", c.getValue("callbacks.await-timeout").render());
      }
      SettingRanges.timed(config, c, "callbacks.await-timeout", ROOT + ".callbacks.await-timeout");
      return new ClusterSettings(
          systemName,
          seeds,
          c.getString("hostname"),
          port,
          c.getStringList("roles"),
          c.getString("callbacks.service-key-prefix"),
          await,
          config.getBytes("pekko.remote.artery.advanced.maximum-frame-size"));
    } catch (ConfigException e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, "bad cluster configuration: " + e.getMessage(), e);
    }
  }

  /** Whether seed nodes are configured: then nodes form a cluster; otherwise the JVM is on its own. */
  public boolean clustered() {
    return !seedNodes.isEmpty();
  }

  /** The address of a node of this cluster listening at {@code hostPort}. */
  public String address(String hostPort) {
    return "pekko://" + systemName + "@" + hostPort;
  }

  /**
   * The Pekko settings these settings stand for: cluster provider, canonical address, seed nodes and
   * roles when clustered; nothing otherwise (a plain local actor system).
   */
  public Config pekkoOverrides() {
    if (!clustered()) {
      return ConfigFactory.empty();
    }
    return ConfigFactory.parseMap(
        Map.of(
            "pekko.actor.provider", "cluster",
            "pekko.remote.artery.canonical.hostname", hostname,
            "pekko.remote.artery.canonical.port", port,
            "pekko.cluster.seed-nodes", ConfigValueFactory.fromIterable(seedNodes.stream().map(this::address).toList()),
            "pekko.cluster.roles", ConfigValueFactory.fromIterable(roles)),
        "xla-actors.cluster");
  }

  private static int port(String hostPort) {
    return Integer.parseInt(hostPort.substring(hostPort.lastIndexOf(':') + 1));
  }

  private static XlaException invalid(String key, String what, String got) {
    return new XlaException(ErrorCode.INVALID_ARGUMENT, ROOT + "." + key + " " + what + ", got " + got);
  }
}
