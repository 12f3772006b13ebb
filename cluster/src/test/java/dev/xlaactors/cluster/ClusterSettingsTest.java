package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.XlaException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.apache.pekko.actor.typed.ActorSystem;
import org.junit.jupiter.api.Test;

/** The cluster from HOCON: none configured means one plain JVM; seeds, address and roles become Pekko's settings. */
class ClusterSettingsTest {
  private static Config with(String hocon) {
    return ConfigFactory.parseString(hocon).withFallback(ConfigFactory.defaultReference()).resolve();
  }

  @Test
  void withoutSeedNodesTheSystemIsASingleJvm() {
    ClusterSettings s = ClusterSettings.fromConfig(ConfigFactory.load());
    assertFalse(s.clustered());
    assertTrue(s.pekkoOverrides().isEmpty());
    ActorSystem<Void> system = XlaCluster.start(ConfigFactory.load());
    try {
      assertEquals("local", system.settings().config().getString("pekko.actor.provider"));
      assertFalse(XlaCluster.isClustered(system));
      assertEquals("xla-actors", system.name());
    } finally {
      system.terminate();
    }
  }

  @Test
  void seedNodesAddressAndRolesBecomePekkoSettings() {
    ClusterSettings s = ClusterSettings.fromConfig(with("""
        xla-actors.cluster {
          seed-nodes = ["10.0.0.5:25520", "10.0.0.6:25521"]
          hostname = "10.0.0.7"
          port = 0
          roles = [compute]
        }"""));
    assertTrue(s.clustered());
    Config pekko = s.pekkoOverrides();
    assertEquals("cluster", pekko.getString("pekko.actor.provider"));
    assertEquals("10.0.0.7", pekko.getString("pekko.remote.artery.canonical.hostname"));
    assertEquals(0, pekko.getInt("pekko.remote.artery.canonical.port"));
    assertEquals(List.of("pekko://xla-actors@10.0.0.5:25520", "pekko://xla-actors@10.0.0.6:25521"),
        pekko.getStringList("pekko.cluster.seed-nodes"));
    assertEquals(List.of("compute"), pekko.getStringList("pekko.cluster.roles"));
  }

  @Test
  void theClusterPagesSnippetIsValid() throws Exception {
    String readme = Files.readString(Path.of("..", "docs", "cluster.md"));
    int section = readme.indexOf("## Running on a cluster");
    int start = readme.indexOf("```hocon", section) + "```hocon".length();
    String hocon = readme.substring(start, readme.indexOf("```", start));
    ClusterSettings s = ClusterSettings.fromConfig(with(hocon));
    assertEquals(List.of("pekko://xla-actors@10.0.0.5:25520", "pekko://xla-actors@10.0.0.6:25520"),
        s.pekkoOverrides().getStringList("pekko.cluster.seed-nodes"));
    assertEquals("10.0.0.7", s.hostname());
    assertEquals(List.of("compute"), s.roles());
    assertEquals("org.apache.pekko.cluster.sbr.SplitBrainResolverProvider",
        with(hocon).getString("pekko.cluster.downing-provider-class"));
  }

  @Test
  void aSeedWithoutPortIsRefusedNamingTheKey() {
    XlaException e = assertThrows(XlaException.class,
        () -> ClusterSettings.fromConfig(with("xla-actors.cluster.seed-nodes = [\"10.0.0.5\"]")));
    assertEquals("xla-actors.cluster.seed-nodes must hold \"host:port\" strings such as \"10.0.0.5:25520\", got 10.0.0.5",
        e.getMessage());
  }

  @Test
  void knownConfigKeysReadsThisModulesReferenceConf() {
    // Known: defined by this module's reference.conf, found on the classpath next to the other modules'.
    ClusterSettings.fromConfig(with("xla-actors.cluster.roles = [callbacks]\nxla-actors.actors.runs.timeout = 1m"));
    XlaException e = assertThrows(XlaException.class,
        () -> ClusterSettings.fromConfig(with("xla-actors.cluster.sed-nodes = []")));
    assertTrue(e.getMessage().startsWith("unknown configuration key xla-actors.cluster.sed-nodes"), e.getMessage());
    assertTrue(e.getMessage().contains("did you mean xla-actors.cluster.seed-nodes?"), e.getMessage());
  }
}
