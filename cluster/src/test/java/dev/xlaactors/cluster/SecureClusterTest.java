package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import com.typesafe.config.ConfigFactory;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.Member;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A TLS cluster on loopback with certificates made by tools/cluster-certs.sh: this test JVM is node A
 * (seed, role compute, runs the program on the real CPU plugin), a child JVM B (role callbacks) serves the
 * callback; both hold certificates of one CA and the same callback secret. Members talk and a remote
 * callback returns the right values.
 * Intruders, each a real JVM that tries to join through A and sends B's callback server a request every
 * half second for 8 s: one with a certificate signed by another CA (it trusts the cluster's CA too, so
 * only mutual authentication stops it) and one speaking plain TCP. Neither becomes a member, neither gets
 * any answer, and B never runs the callback for them, though both know the callback secret. The two try
 * side by side (started together by the first intruder test, each watched for its whole 8 s), not one
 * after the other: what each is refused does not depend on the other, and CI saves one intruder's time.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class SecureClusterTest {
  private static final Pattern READY = Pattern.compile("READY (\\S+)");
  private static final Pattern SERVER = Pattern.compile("SERVER (\\S+)");
  private static final String PASSWORD = "test-cluster-password";
  private static final int INTRUDE_SECONDS = 8;
  /** The callback secret of the members, which the intruders know too: only TLS keeps them out. */
  private static final String SECRET = "members-only";
  private static final Path CERTS_SCRIPT = Path.of("..", "tools", "cluster-certs.sh").toAbsolutePath().normalize();

  @TempDir static Path dir;
  private static ChildJvms children;
  private static ChildJvms.Child b;
  private static String bAddress;
  private static String serverRef;
  private static int seedPort;
  private static ActorSystem<Void> system;
  private static XlaClient client;
  private static CallbackRuntime runtime;
  private static Model executable;

  @BeforeAll
  static void startCluster() throws Exception {
    children = new ChildJvms(dir);
    Path good = dir.resolve("certs");
    Path rogue = dir.resolve("rogue-certs");
    // Side by side: each set is 8 keytool JVMs, CPU-bound only while each starts (about 7 s a set in CI).
    Map<Path, Process> making = new LinkedHashMap<>();
    for (Path into : List.of(good, rogue)) {
      making.put(into, makeCertificates(into));
    }
    awaitCertificates(making);
    // The rogue node trusts the cluster's CA as well as its own: it accepts A's and B's certificates, so
    // only A's and B's demand for a certificate of their CA (mutual authentication) can refuse it.
    try (InputStream in = Files.newInputStream(good.resolve("ca.crt"))) {
      KeyStore trust = KeyStore.getInstance(rogue.resolve("truststore.p12").toFile(), PASSWORD.toCharArray());
      trust.setCertificateEntry("cluster-ca", CertificateFactory.getInstance("X.509").generateCertificate(in));
      try (OutputStream out = new FileOutputStream(rogue.resolve("truststore.p12").toFile())) {
        trust.store(out, PASSWORD.toCharArray());
      }
    }
    Files.writeString(dir.resolve("member.conf"), tls(good));
    Files.writeString(dir.resolve("rogue.conf"), tls(rogue));
    Files.writeString(dir.resolve("plain.conf"),
        "xla-actors.cluster.security { tls = off, callback-secret = \"" + SECRET + "\" }\n");

    seedPort = TestNodes.freePort();
    b = children.start("node-b", SecureNodeMain.class, "serve", "node-b", Integer.toString(seedPort),
        dir.resolve("member.conf").toString());
    system = XlaCluster.start(ConfigFactory.parseString(tls(good)).withFallback(TestNodes.config(seedPort, seedPort, "compute")));
    client = XlaClient.create();
    runtime = CallbackRuntime.create(system, client);
    ClusterCallbacks remote = ClusterCallbacks.create(system);
    GraphBuilder g = new GraphBuilder("secure_affine");
    Value x = g.parameter(TestNodes.F32X3);
    Graph graph = g.build(g.hostCall(TestNodes.affine("A: never called here"), x).get(0));
    remote.callRemotely(runtime, graph.hostCallbacks()).toCompletableFuture().get(10, TimeUnit.SECONDS);
    executable = Model.compile(client, graph.stablehlo());
    bAddress = b.await(READY, Duration.ofSeconds(90));
    serverRef = b.await(SERVER, Duration.ofSeconds(5));
    assertEquals(1, remote.awaitServers("affine-remote", 1).toCompletableFuture().get(30, TimeUnit.SECONDS));
  }

  @AfterAll
  static void stopCluster() throws Exception {
    try {
      if (executable != null) {
        executable.close();
      }
      if (runtime != null) {
        runtime.close();
      }
      if (client != null) {
        client.close();
      }
      if (system != null) {
        system.terminate();
        // Pekko 1.7.0's Artery waits without a deadline for its TLS streams to complete at termination
        // (apache/pekko#3247, bounded by #3317 after 1.7.0): here that took 0.3 s alone, 20 s once, and
        // more than 60 s in one CI run with another test JVM beside it. What this class tests is over by
        // now and its ports were free ones, so a termination still running is reported, not failed on.
        try {
          system.getWhenTerminated().toCompletableFuture().get(20, TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException stalled) {
          System.err.println("secure cluster test: node A's actor system still terminating after 20 s"
              + " (apache/pekko#3247); the test JVM goes on");
        }
      }
    } finally {
      if (children != null) {
        children.close();
      }
    }
  }

  @Test
  @Order(1)
  void membersWithCertificatesOfTheClusterCaTalkTlsAndServeCallbacks() throws Exception {
    assertEquals("tls-tcp", system.settings().config().getString("pekko.remote.artery.transport"));
    assertEquals(Set.of(XlaCluster.selfAddress(system), bAddress), upMembers());
    for (int i = 0; i < 3; i++) {
      List<HostTensor> out = runtime.run(executable, Argument.of(List.of(HostTensor.ofFloats(new float[] {1f, 2f, 3f + i}, 3))));
      assertArrayEquals(new float[] {4f, 7f, 10f + 3 * i}, out.get(0).toFloatArray(), 0f);
    }
  }

  @Test
  @Order(2)
  void aJvmWithACertificateOfAnotherCaCannotJoinNorGetACallbackResult() throws Exception {
    assertIntruderGetsNothing("rogue-ca");
  }

  @Test
  @Order(3)
  void aPlainTcpJvmCannotJoinNorGetACallbackResult() throws Exception {
    assertIntruderGetsNothing("plain-tcp");
  }

  /** An intruder's JVM, the members this node saw while it tried, and its end (DONE printed, or a failure). */
  private record Intruder(ChildJvms.Child jvm, Set<String> seen, CompletableFuture<Void> done) {}

  private static final Map<String, Intruder> INTRUDERS = new ConcurrentHashMap<>();

  /**
   * Intruder {@code name}: the first call starts both (each with its config file), and a thread that notes
   * this node's members every 100 ms while each tries, as the test of each once did while waiting for it.
   */
  private static synchronized Intruder intruder(String name) throws IOException {
    if (INTRUDERS.isEmpty()) {
      for (String[] nameAndConf : new String[][] {{"rogue-ca", "rogue.conf"}, {"plain-tcp", "plain.conf"}}) {
        ChildJvms.Child jvm = children.start(nameAndConf[0], SecureNodeMain.class, "intrude", nameAndConf[0],
            Integer.toString(seedPort), dir.resolve(nameAndConf[1]).toString(), serverRef, Integer.toString(INTRUDE_SECONDS));
        INTRUDERS.put(nameAndConf[0], new Intruder(jvm, ConcurrentHashMap.newKeySet(), new CompletableFuture<>()));
      }
      Thread watcher = new Thread(SecureClusterTest::watchMembersWhileIntrudersTry, "intruder-watcher");
      watcher.setDaemon(true);
      watcher.start();
    }
    return INTRUDERS.get(name);
  }

  private static void watchMembersWhileIntrudersTry() {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(INTRUDE_SECONDS + 60);
    try {
      while (INTRUDERS.values().stream().anyMatch(i -> !i.done().isDone())) {
        Set<String> members = memberAddresses();
        for (Intruder i : INTRUDERS.values()) {
          if (i.done().isDone()) {
            continue;
          }
          i.seen().addAll(members);
          if (i.jvm().output().contains("DONE")) {
            i.done().complete(null);
          } else if (!i.jvm().process().isAlive() || System.nanoTime() > deadline) {
            i.done().completeExceptionally(new AssertionError("intruder " + i.jvm().name() + " ended without DONE:\n" + i.jvm().output()));
          }
        }
        Thread.sleep(100);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (RuntimeException e) {
      INTRUDERS.values().forEach(i -> i.done().completeExceptionally(e));
    }
  }

  private static void assertIntruderGetsNothing(String name) throws Exception {
    Intruder intruder = intruder(name);
    try {
      intruder.done().get(INTRUDE_SECONDS + 90, TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      throw e.getCause() instanceof AssertionError failed ? failed : new AssertionError(e.getCause());
    }
    Set<String> seen = new TreeSet<>(intruder.seen());
    String out = intruder.jvm().output();
    assertFalse(out.contains("GOT "), () -> name + " got an answer:\n" + out);
    assertFalse(out.lines().anyMatch(l -> l.equals("UP")), () -> name + " became a member:\n" + out);
    assertEquals(Set.of(XlaCluster.selfAddress(system), bAddress), seen, "members seen while " + name + " tried");
    assertFalse(b.output().contains("SERVED affine-remote [777.0"), b::output);
    // The cluster still works for its members.
    List<HostTensor> result = runtime.run(executable, Argument.of(List.of(HostTensor.ofFloats(new float[] {0f, 1f, 2f}, 3))));
    assertArrayEquals(new float[] {1f, 4f, 7f}, result.get(0).toFloatArray(), 0f);
    long handshakeFailures = out.lines().filter(l -> l.contains("SSL") || l.contains("TLS") || l.contains("andshake")).count();
    System.err.printf("secure cluster test: intruder %s got nothing in %d s (%d log lines about TLS/handshakes)%n",
        name, INTRUDE_SECONDS, handshakeFailures);
  }

  /** Starts tools/cluster-certs.sh making a CA and 127.0.0.1's key store in {@code into}; see {@link #awaitCertificates}. */
  private static Process makeCertificates(Path into) throws IOException {
    ProcessBuilder pb = new ProcessBuilder("bash", CERTS_SCRIPT.toString(), into.toString(), "127.0.0.1")
        .redirectErrorStream(true)
        .redirectOutput(certificatesLog(into).toFile());
    pb.environment().put("CLUSTER_CERTS_PASSWORD", PASSWORD);
    return pb.start();
  }

  /** Waits for each run of the script; should one fail, stops the others (they write into {@link #dir}) and says why. */
  private static void awaitCertificates(Map<Path, Process> making) throws IOException, InterruptedException {
    for (Map.Entry<Path, Process> e : making.entrySet()) {
      Process p = e.getValue();
      if (!p.waitFor(120, TimeUnit.SECONDS) || p.exitValue() != 0) {
        for (Process q : making.values()) {
          q.destroyForcibly();
          q.waitFor(10, TimeUnit.SECONDS);
        }
        throw new AssertionError(CERTS_SCRIPT + " failed:\n" + Files.readString(certificatesLog(e.getKey())));
      }
    }
  }

  private static Path certificatesLog(Path into) {
    return dir.resolve("cluster-certs-" + into.getFileName() + ".log");
  }

  /** The security section of a node whose key store and trust store are those {@code certs} holds. */
  private static String tls(Path certs) {
    return """
        xla-actors.cluster.security {
          tls = on
          key-store = "%s"
          key-store-password = "%s"
          trust-store = "%s"
          trust-store-password = "%s"
          callback-secret = "%s"
        }
        """.formatted(certs.resolve("127.0.0.1.p12"), PASSWORD, certs.resolve("truststore.p12"), PASSWORD, SECRET);
  }

  private static Set<String> memberAddresses() {
    Set<String> all = new TreeSet<>();
    Cluster.get(system).state().getMembers().forEach(m -> all.add(m.address().toString()));
    return all;
  }

  private static Set<String> upMembers() {
    Set<String> up = new TreeSet<>();
    for (Member m : Cluster.get(system).state().getMembers()) {
      if (m.status() == MemberStatus.up()) {
        up.add(m.address().toString());
      }
    }
    return up;
  }
}
