package dev.xlaactors.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code bin/xla-actors serve PKG --seed ... --cluster-port ...} as three real JVMs on loopback (the command
 * line's main, the same classpath): runtime's fixture package {@code affine} (y = x @ w + b) and a copy of it
 * named {@code broken} whose weights are deleted once the nodes have started (so no node can load it). The
 * test JVM is only an HTTP client. Checked: {@code /v2} inference asked of each node is answered with affine's
 * values, computed on the one node that holds the model's sharding entity; a model no node can load is a 500
 * naming it; and the node holding affine is killed (SIGKILL) while clients keep requests in flight to the two
 * others: every request gets a correct answer (re-routed to the survivor that loads the model) or a clear
 * Open Inference Protocol error, none is lost and none outlives its deadline. The counts are printed.
 */
@Timeout(value = 150, unit = TimeUnit.SECONDS)
class ClusterServeTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Path AFFINE = Path.of("..", "runtime", "src", "test", "resources", "fixtures", "packages", "tensor")
      .toAbsolutePath().normalize();
  /** affine's weights: w = arange(6).reshape(3, 2) - 2, b = [0.5, -1] (tools/jax_package_fixtures.py). */
  private static final float[][] W = {{-2, -1}, {0, 1}, {2, 3}};
  private static final float[] B = {0.5f, -1};
  private static final Pattern SERVING = Pattern.compile("serving .+? at (http://\\S+)");
  private static final Pattern HOLDER = Pattern.compile("model 'affine' served on (pekko://\\S+)");
  /** Each request's deadline ({@code parameters.timeout}); the HTTP client waits this plus a margin. */
  private static final Duration DEADLINE = Duration.ofSeconds(25);
  private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  /** A node: its JVM, its output, its HTTP URL and its cluster address. */
  private record Node(String name, Process process, Path log, String address, String url) {
    String output() {
      try {
        return Files.readString(log);
      } catch (IOException e) {
        return "(unreadable " + log + ": " + e + ")";
      }
    }
  }

  private static final List<Process> STARTED = new CopyOnWriteArrayList<>();
  private static final List<Node> NODES = new ArrayList<>();
  @TempDir static Path dir;
  private static Path broken;

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(() -> STARTED.forEach(Process::destroyForcibly), "cluster-serve-reaper"));
  }

  @BeforeAll
  static void startThreeNodes() throws Exception {
    broken = dir.resolve("broken");
    Files.createDirectories(broken);
    try (var files = Files.list(AFFINE)) {
      for (Path f : files.toList()) {
        Files.copy(f, broken.resolve(f.getFileName()));
      }
    }
    Path manifest = broken.resolve("xla-model.json");
    Files.writeString(manifest, Files.readString(manifest).replace("\"name\": \"affine\"", "\"name\": \"broken\""));

    int[] ports = {freePort(), freePort(), freePort()};
    String seeds = "127.0.0.1:" + ports[0] + ",127.0.0.1:" + ports[1];
    List<Process> processes = new ArrayList<>();
    List<Path> logs = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      Path log = dir.resolve("node-" + i + ".log");
      List<String> command = new ArrayList<>(List.of(
          Path.of(System.getProperty("java.home"), "bin", "java").toString(),
          "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
          "-Dlogback.configurationFile=logback-child.xml",
          // As the cluster tests (TestNodes.config): a killed node is unreachable within about 4 s and the
          // split brain resolver (serve --cluster's default downing provider) removes it 3 s later; the
          // cluster's and sharding's clocks tick faster than Pekko's defaults, so joins, removals and the
          // move of the killed holder's model wait less for nothing.
          "-Dpekko.cluster.failure-detector.heartbeat-interval=200ms",
          "-Dpekko.cluster.failure-detector.acceptable-heartbeat-pause=3s",
          "-Dpekko.cluster.split-brain-resolver.stable-after=3s",
          "-Dpekko.cluster.down-removal-margin=1s",
          "-Dpekko.cluster.gossip-interval=200ms",
          "-Dpekko.cluster.leader-actions-interval=200ms",
          "-Dpekko.cluster.unreachable-nodes-reaper-interval=200ms",
          "-Dpekko.cluster.sharding.retry-interval=500ms",
          "-Dpekko.cluster.jmx.enabled=off",
          "-Dxla-actors.cluster.jobs.journal.url=jdbc:h2:mem:unused",
          "-Dxla-actors.actors.metrics.log=off",
          "-cp", System.getProperty("java.class.path"),
          XlaActorsCli.class.getName(),
          "serve", AFFINE.toString(), broken.toString(), "--port", "0", "--cluster-port", Integer.toString(ports[i])));
      for (String seed : seeds.split(",")) {
        command.addAll(List.of("--seed", seed));
      }
      Process p = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
      STARTED.add(p);
      processes.add(p);
      logs.add(log);
    }
    for (int i = 0; i < 3; i++) {
      String url = await(processes.get(i), logs.get(i), SERVING, Duration.ofSeconds(90));
      NODES.add(new Node("node-" + i, processes.get(i), logs.get(i), "pekko://xla-actors@127.0.0.1:" + ports[i], url));
    }
    for (Node n : NODES) { // each node is Up (it waited for that before serving): ready says so
      awaitStatus(n.url() + "/v2/health/ready", 200, Duration.ofSeconds(30));
    }
    // Deleted now that every node has opened (and checked) it: each load, on whichever node, fails.
    Files.delete(broken.resolve("model.safetensors"));
  }

  @AfterAll
  static void stop() throws InterruptedException {
    for (Process p : STARTED) {
      p.destroyForcibly();
    }
    for (Process p : STARTED) {
      p.waitFor(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void everyNodeServesTheModelFromTheNodeHoldingItAndAKilledHolderLosesNoRequest() throws Exception {
    // 1. Every node answers, with the model's metadata and values; one node computes them all.
    for (Node n : NODES) {
      JsonNode meta = JSON.readTree(get(n.url() + "/v2/models/affine").body());
      assertEquals("[{\"name\":\"input_1\",\"datatype\":\"FP32\",\"shape\":[-1,3]}]", meta.get("inputs").toString());
      assertEquals("[{\"name\":\"output_0\",\"datatype\":\"FP32\",\"shape\":[-1,2]}]", meta.get("outputs").toString());
      for (int k = 0; k < 3; k++) {
        float[][] x = {{k, 1, -2}, {0.5f, n.name().length(), 3}};
        HttpResponse<String> r = infer(n.url(), x);
        assertEquals(200, r.statusCode(), r.body());
        assertAffine(x, JSON.readTree(r.body()));
      }
    }
    Node holder = holder(NODES);
    List<Node> others = NODES.stream().filter(n -> n != holder).toList();
    for (Node n : others) {
      assertTrue(!HOLDER.matcher(n.output()).find(), n.name() + " loaded the model too:\n" + n.output());
    }

    // 2. A model no node can load: a clear 500 naming it and why, from any node.
    HttpResponse<String> refused = infer(others.get(0).url(), "broken", new float[][] {{1, 2, 3}});
    assertEquals(500, refused.statusCode(), refused.body());
    String why = JSON.readTree(refused.body()).get("error").asText();
    assertTrue(why.contains("model 'broken' could not be loaded on node") && why.contains("model.safetensors"), why);

    // 3. Clients keep requests in flight to the two other nodes; the holder is killed.
    ConcurrentLinkedQueue<Outcome> done = new ConcurrentLinkedQueue<>();
    AtomicBoolean stop = new AtomicBoolean();
    AtomicLong killedAt = new AtomicLong(Long.MAX_VALUE);
    List<CompletableFuture<Void>> clients = new ArrayList<>();
    for (int c = 0; c < 6; c++) {
      Node target = others.get(c % 2);
      int client = c;
      clients.add(CompletableFuture.runAsync(() -> {
        for (int i = 0; !stop.get(); i++) {
          float[][] x = {{client, i % 17, -1}};
          long sent = System.nanoTime();
          HttpResponse<String> r;
          try {
            r = infer(target.url(), x);
          } catch (Exception e) {
            done.add(new Outcome(target.name(), sent, System.nanoTime(), -1, e.toString(), x));
            continue;
          }
          done.add(new Outcome(target.name(), sent, System.nanoTime(), r.statusCode(), r.body(), x));
        }
      }));
    }
    Thread.sleep(1000);
    killedAt.set(System.nanoTime());
    holder.process().destroyForcibly();
    assertTrue(holder.process().waitFor(10, TimeUnit.SECONDS), "the holder still runs 10 s after SIGKILL");
    // Until the survivors have answered for 2 s after the first answer that followed the kill (at most 40 s).
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(40);
    while (System.nanoTime() < deadline) {
      long firstAfter = done.stream().filter(o -> o.sent() > killedAt.get() && o.status() == 200).mapToLong(Outcome::answered)
          .min().orElse(Long.MAX_VALUE);
      if (System.nanoTime() - firstAfter > TimeUnit.SECONDS.toNanos(2)) {
        break;
      }
      Thread.sleep(100);
    }
    stop.set(true);
    CompletableFuture.allOf(clients.toArray(CompletableFuture[]::new)).get(DEADLINE.toSeconds() + 20, TimeUnit.SECONDS);

    // 4. Count: every request answered once, correct or with a clear error; none lost, none past its deadline.
    long kill = killedAt.get();
    long ok = 0;
    long inFlightAtKill = 0;
    long inFlightAnswered = 0;
    long afterKillOk = 0;
    Map<String, Long> errors = new LinkedHashMap<>();
    long lost = 0;
    long longestMs = 0;
    for (Outcome o : done) {
      longestMs = Math.max(longestMs, TimeUnit.NANOSECONDS.toMillis(o.answered() - o.sent()));
      boolean inFlight = o.sent() < kill && o.answered() > kill;
      inFlightAtKill += inFlight ? 1 : 0;
      if (o.status() == 200) {
        assertAffine(o.x(), JSON.readTree(o.body()));
        ok++;
        inFlightAnswered += inFlight ? 1 : 0;
        afterKillOk += o.sent() > kill ? 1 : 0;
      } else if (o.status() > 0) {
        String error = JSON.readTree(o.body()).get("error").asText();
        assertTrue(List.of(500, 503, 504).contains(o.status()) && error.contains("model 'affine'"), o.status() + " " + o.body());
        errors.merge(o.status() + ": " + error.replaceAll("\\d+", "N"), 1L, Long::sum);
      } else {
        lost++;
      }
    }
    // Rows the dead node had accepted: their runs failed UNAVAILABLE and ShardedTensorInference sent them again.
    long sentAgain = others.stream().mapToLong(n -> Pattern.compile("row \\S+ is sent again").matcher(n.output()).results().count()).sum();
    String report = String.format("kill of the holder %s: %d requests to the 2 other nodes, %d answered correctly (%d in flight at the kill, "
            + "%d answered correctly; %d sent after the kill answered correctly, computed by the survivor that took the model; %d rows "
            + "accepted by the killed node sent again), %d errors %s, %d lost; longest request %d ms", holder.name(), done.size(), ok,
        inFlightAtKill, inFlightAnswered, afterKillOk, sentAgain, errors.values().stream().mapToLong(Long::longValue).sum(), errors, lost,
        longestMs);
    System.out.println(report);
    assertEquals(0, lost, report);
    assertTrue(longestMs < DEADLINE.toMillis() + 5000, report);
    assertTrue(inFlightAtKill > 0, "no request was in flight when the holder was killed: " + report);
    assertTrue(afterKillOk > 0, report);
    Node survivor = holder(others);
    assertNotEquals(holder, survivor);
  }

  /** One request of the load: when it was sent and answered (nanoTime), its status (-1: no answer) and body. */
  private record Outcome(String node, long sent, long answered, int status, String body, float[][] x) {}

  /** The node whose log says it serves affine's entity (waiting up to 30 s). */
  private static Node holder(List<Node> nodes) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (System.nanoTime() < deadline) {
      for (Node n : nodes) {
        Matcher m = HOLDER.matcher(n.output());
        if (m.find()) {
          assertEquals(n.address(), m.group(1), n.output());
          return n;
        }
      }
      Thread.sleep(100);
    }
    throw new AssertionError("no node of " + nodes.stream().map(Node::name).toList() + " says it serves affine");
  }

  private static HttpResponse<String> infer(String url, float[][] x) throws IOException, InterruptedException {
    return infer(url, "affine", x);
  }

  private static HttpResponse<String> infer(String url, String model, float[][] x) throws IOException, InterruptedException {
    StringBuilder data = new StringBuilder();
    for (float[] row : x) {
      for (float v : row) {
        data.append(data.length() == 0 ? "" : ",").append(v);
      }
    }
    String body = "{\"parameters\": {\"timeout\": " + DEADLINE.toNanos() / 1000 + "}, \"inputs\": [{\"name\": \"input_1\", \"shape\": ["
        + x.length + ", 3], \"datatype\": \"FP32\", \"data\": [" + data + "]}]}";
    HttpRequest request = HttpRequest.newBuilder(URI.create(url + "/v2/models/" + model + "/infer"))
        .timeout(DEADLINE.plusSeconds(10)).header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString(body)).build();
    return HTTP.send(request, HttpResponse.BodyHandlers.ofString());
  }

  private static HttpResponse<String> get(String url) throws IOException, InterruptedException {
    return HTTP.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(10)).GET().build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private static void assertAffine(float[][] x, JsonNode response) {
    JsonNode out = response.get("outputs").get(0);
    assertEquals("[" + x.length + ",2]", out.get("shape").toString(), response.toString());
    float[] got = new float[x.length * 2];
    for (int i = 0; i < got.length; i++) {
      got[i] = (float) out.get("data").get(i).asDouble();
    }
    float[] want = new float[x.length * 2];
    for (int r = 0; r < x.length; r++) {
      for (int j = 0; j < 2; j++) {
        want[r * 2 + j] = B[j];
        for (int i = 0; i < 3; i++) {
          want[r * 2 + j] += x[r][i] * W[i][j];
        }
      }
    }
    assertArrayEquals(want, got, 1e-5f, response.toString());
  }

  private static void awaitStatus(String url, int status, Duration timeout) throws Exception {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      HttpResponse<String> r = get(url);
      if (r.statusCode() == status) {
        return;
      }
      if (System.nanoTime() > deadline) {
        fail(url + " answered " + r.statusCode() + " " + r.body() + " for " + timeout.toSeconds() + " s, expected " + status);
      }
      Thread.sleep(100);
    }
  }

  private static String await(Process p, Path log, Pattern pattern, Duration timeout) throws Exception {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      String out = Files.exists(log) ? Files.readString(log) : "";
      Matcher m = pattern.matcher(out);
      if (m.find()) {
        return m.group(1);
      }
      if (!p.isAlive() || System.nanoTime() > deadline) {
        fail((p.isAlive() ? "no " + pattern + " within " + timeout.toSeconds() + " s" : "exited " + p.exitValue()) + ":\n" + out);
      }
      Thread.sleep(100);
    }
  }

  private static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    }
  }
}
