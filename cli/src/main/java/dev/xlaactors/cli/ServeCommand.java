package dev.xlaactors.cli;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.RuntimeMeters;
import dev.xlaactors.actors.serve.BatchedModel;
import dev.xlaactors.actors.serve.GenerationServer;
import dev.xlaactors.actors.serve.ModelServer;
import dev.xlaactors.cluster.ClusterSettings;
import dev.xlaactors.cluster.ModelCatalog;
import dev.xlaactors.cluster.ShardedComputations;
import dev.xlaactors.cluster.XlaCluster;
import dev.xlaactors.http.CompletionEndpoint;
import dev.xlaactors.http.EmbeddingEndpoint;
import dev.xlaactors.http.GenerationEndpoint;
import dev.xlaactors.http.HttpServer;
import dev.xlaactors.http.ApiKeys;
import dev.xlaactors.http.HttpSettings;
import dev.xlaactors.http.InferenceEndpoint;
import dev.xlaactors.http.OpenAiRoutes;
import dev.xlaactors.http.OpenApiDocument;
import dev.xlaactors.http.ServingRoutes;
import dev.xlaactors.http.TensorInference;
import dev.xlaactors.http.TextCodec;
import dev.xlaactors.lm.EmbeddingModel;
import dev.xlaactors.lm.LanguageModel;
import dev.xlaactors.lm.PackageSlotDecoder;
import dev.xlaactors.lm.TextGenerator;
import dev.xlaactors.runtime.model.LoadedPackage;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.Role;
import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigValueFactory;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.PrintStream;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Props;

/**
 * {@code serve PKG [PKG...] [--host H] [--port P] [--cluster] [--seed HOST:PORT]... [--cluster-port P]}:
 * serves model packages over HTTP until the process is stopped (Ctrl-C): a {@code causal-lm} package behind a
 * generation server (continuous batching over its largest slot count), an {@code embedding} or {@code
 * tensor} package behind a model server (dynamic batching over its exported batch sizes); the language and
 * embedding models also through the OpenAI API ({@code /v1/models}, {@code /v1/completions}, {@code
 * /v1/chat/completions}, {@code /v1/embeddings}). Prints the address and example requests.
 *
 * <p>With {@code --cluster} (or {@code --seed}, {@code --cluster-port}) the process is also a node of a Pekko
 * cluster ({@link XlaCluster}, configured by {@code xla-actors.cluster}: seeds, address, TLS), with the role
 * {@value #ROLE}: its {@code tensor} packages are in a {@link ModelCatalog} and {@code /v2} inference runs on
 * the node that holds the model's sharding entity ({@link ShardedTensorInference}), whichever node got the
 * request; the other kinds are served by this node as without a cluster.
 */
final class ServeCommand {
  static final String USAGE = "usage: bin/xla-actors serve PKG [PKG...] [--host H (default 127.0.0.1)] [--port P (default 8080; 0 = any free port)]"
      + " [--api-key KEY (repeatable; clients send Authorization: Bearer KEY)] [--api-key-file FILE (one key a line)]"
      + " [--cluster] [--seed HOST:PORT (repeatable; implies --cluster)] [--cluster-port P (this node's cluster port; implies --cluster)]";

  /** The cluster role of the nodes {@code serve --cluster} starts: they hold the sharded models. */
  static final String ROLE = "serve";

  private ServeCommand() {}

  static int run(List<String> args, PrintStream out, PrintStream err) throws UsageException, InterruptedException {
    CommandLine line = CommandLine.parse("serve", args, Set.of("--host", "--port", "--seed", "--cluster-port", "--api-key", "--api-key-file"),
        Set.of("--cluster"));
    line.expectPositional(1, Integer.MAX_VALUE, "one or more model package directories");
    Integer port = line.integer("--port", null, 0, 65535);
    String host = line.value("--host").orElse(null);
    Integer clusterPort = line.integer("--cluster-port", null, 0, 65535);
    // Added to xla-actors.http.api-key / api-keys-file (XLA_ACTORS_API_KEY keeps a key out of the process list).
    List<String> keys = new ArrayList<>(line.all("--api-key"));
    line.value("--api-key-file").ifPresent(file -> keys.addAll(ApiKeys.readFile(Path.of(file), "serve --api-key-file")));
    ApiKeys apiKeys = ApiKeys.of(keys);
    Config cluster = line.flag("--cluster") || clusterPort != null || !line.all("--seed").isEmpty()
        ? clusterConfig(ConfigFactory.load(), line.all("--seed"), clusterPort) : null;
    List<ModelPackage> packages = new ArrayList<>();
    Set<String> names = new HashSet<>();
    for (String dir : line.positional()) {
      ModelPackage pkg = Packages.open("serve", dir);
      if (!names.add(pkg.name())) {
        throw new UsageException("serve: two packages are named '" + pkg.name() + "': a model is found by its name, so each needs its own");
      }
      if (!pkg.hostCallbacks().isEmpty()) {
        throw new UsageException("serve: model '" + pkg.name() + "' calls the host callbacks " + pkg.hostCallbacks() + ", which the "
            + "command line cannot provide: serve it from Java, registering them on the CallbackRuntime first");
      }
      packages.add(pkg);
    }
    try (Serving serving = Serving.start(packages, host, port, cluster, apiKeys)) {
      out.println("serving " + String.join(", ", names) + " at " + serving.url() + " (Ctrl-C stops the server)");
      if (serving.clusterNode() != null) {
        out.println("cluster node " + serving.clusterNode() + " (role " + ROLE + "): /v2 of " + serving.clustered()
            + " runs on the node holding each model, from any node");
      }
      for (String model : serving.clustered()) {
        out.println("  curl -s " + serving.url() + "/v2/models/" + model + "/infer -H 'Content-Type: application/json' -d @request.json");
      }
      for (String model : serving.generation()) {
        out.println("  curl -sN " + serving.url() + "/v1/models/" + model + "/generate -H 'Content-Type: application/json' "
            + "-d '{\"prompt\":\"Hello\",\"max_tokens\":16}'");
        out.println("  curl -s " + serving.url() + "/v1/completions -H 'Content-Type: application/json' "
            + "-d '{\"model\":\"" + model + "\",\"prompt\":\"Hello\",\"max_tokens\":16}'");
      }
      out.println("  curl -s " + serving.url() + "/v1/models");
      out.println("  curl -s " + serving.url() + "/v1/endpoints");
      out.println("  curl -s " + serving.url() + "/openapi.json   (the OpenAPI document of every route)");
      out.flush();
      CountDownLatch stop = new CountDownLatch(1);
      Runtime.getRuntime().addShutdownHook(new Thread(() -> {
        stop.countDown();
        try {
          Thread.sleep(2000); // let the main thread close the server and the models
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }));
      stop.await();
    }
    return 0;
  }

  /**
   * The configuration of a cluster node from {@code base} (application.conf, {@code -D} options, reference.conf):
   * {@code seeds} (when given) replace {@code xla-actors.cluster.seed-nodes}, {@code port} (when given) is its
   * cluster port, the role {@value #ROLE} is added, and, when {@code base} names no downing provider, Pekko's
   * split brain resolver removes dead nodes (without one a killed node's models never move). Refused when no
   * seed is known, or the settings are bad ({@link ClusterSettings}, naming the key).
   */
  static Config clusterConfig(Config base, List<String> seeds, Integer port) throws UsageException {
    Map<String, Object> overrides = new TreeMap<>();
    if (!seeds.isEmpty()) {
      overrides.put("xla-actors.cluster.seed-nodes", ConfigValueFactory.fromIterable(seeds));
    }
    if (port != null) {
      overrides.put("xla-actors.cluster.port", port);
    }
    Set<String> roles = new LinkedHashSet<>(base.getStringList("xla-actors.cluster.roles"));
    roles.add(ROLE);
    overrides.put("xla-actors.cluster.roles", ConfigValueFactory.fromIterable(roles));
    if (base.getString("pekko.cluster.downing-provider-class").isEmpty()) {
      overrides.put("pekko.cluster.downing-provider-class", "org.apache.pekko.cluster.sbr.SplitBrainResolverProvider");
    }
    Config config = ConfigFactory.parseMap(overrides, "serve --cluster").withFallback(base);
    ClusterSettings settings;
    try {
      settings = ClusterSettings.fromConfig(config);
    } catch (dev.xlaactors.error.XlaException e) { // a malformed --seed, most likely: the message names the key and the value
      throw new UsageException("serve: " + e.getMessage());
    }
    if (!settings.clustered()) {
      throw new UsageException("serve: --cluster needs the cluster's seed nodes: give --seed HOST:PORT (the same list, in the same order, "
          + "on every node) or set xla-actors.cluster.seed-nodes");
    }
    return config;
  }

  /**
   * Packages served over HTTP until closed: each {@code causal-lm} package behind a generation server
   * (continuous batching over its largest slot count) at {@code /v1/models/<name>/generate} and the OpenAI
   * API's completions and chat; each {@code embedding} package behind a model server at
   * {@code /v1/models/<name>/infer} and at OpenAI's {@code /v1/embeddings}; a {@code tensor} package behind
   * a model server. Closing unbinds the port, stops the servers and frees the models.
   */
  static final class Serving implements AutoCloseable {
    private final RuntimeSession session;
    private final HttpServer http;
    private final List<String> generation;
    private final List<String> clustered;

    private Serving(RuntimeSession session, HttpServer http, List<String> generation, List<String> clustered) {
      this.session = session;
      this.http = http;
      this.generation = generation;
      this.clustered = clustered;
    }

    /** Loads {@code packages} and binds the routes at {@code host} and {@code port} (null: the settings'). */
    static Serving start(List<ModelPackage> packages, String host, Integer port) {
      return start(packages, host, port, null, ApiKeys.none());
    }

    /**
     * As {@link #start(List, String, Integer)}; with {@code cluster} (a node's configuration, {@link
     * #clusterConfig}) this process joins the cluster first and its {@code tensor} packages are computed by the
     * node holding each (they are loaded here only when sharding puts a model here). Waits up to the cluster's
     * {@code callbacks.await-timeout} for this node to be Up; until it is, {@code /v2/health/ready} says so.
     * Clients must show one of {@code apiKeys} or of the config's ({@link ApiKeys#create}) when there are any.
     */
    static Serving start(List<ModelPackage> packages, String host, Integer port, Config cluster, ApiKeys apiKeys) {
      RuntimeSession session = cluster == null ? RuntimeSession.start("serve") : RuntimeSession.start(XlaCluster.start(cluster));
      try {
        CallbackRuntime runtime = session.runtime();
        ShardedComputations computations = null;
        List<String> clustered = new ArrayList<>();
        if (cluster != null) {
          Map<String, Path> tensors = new TreeMap<>();
          for (ModelPackage pkg : packages) {
            if (pkg.kind() == ModelPackage.Kind.TENSOR) {
              tensors.put(pkg.name(), pkg.directory());
              clustered.add(pkg.name());
            }
          }
          // Closed by the session after the actor system has stopped (the models' runs have ended).
          ModelCatalog catalog = session.own(ModelCatalog.ofPackages(Map.of(), tensors, session.client(), runtime));
          computations = ShardedComputations.init(session.system(), ROLE, session.client(), runtime, catalog);
          awaitUp(session, ClusterSettings.create(session.system()).awaitTimeout());
        }
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        new RuntimeMeters(runtime.metrics()).bindTo(registry);
        List<InferenceEndpoint> inference = new ArrayList<>();
        List<GenerationEndpoint> generation = new ArrayList<>();
        List<CompletionEndpoint> completions = new ArrayList<>();
        List<EmbeddingEndpoint> embedders = new ArrayList<>();
        for (ModelPackage pkg : packages) {
          if (pkg.kind() == ModelPackage.Kind.CAUSAL_LM) {
            LanguageModel lm = session.own(LanguageModel.load(pkg, session.device(), runtime));
            List<Integer> slots = lm.slotCounts();
            PackageSlotDecoder decoder = lm.decoder(slots.get(slots.size() - 1)); // the server owns and closes it
            ActorRef<GenerationServer.Command> server = session.system().systemActorOf(
                GenerationServer.create(pkg.name(), decoder, registry), "generate-" + pkg.name(), Props.empty());
            generation.add(GenerationEndpoint.of(pkg.name(), server, decoder, TextCodec.of(lm)));
            completions.add(CompletionEndpoint.of(new TextGenerator(lm, server, session.system()), decoder));
          } else if (computations != null && pkg.kind() == ModelPackage.Kind.TENSOR) {
            inference.add(ShardedTensorInference.endpoint(session.system(), computations, pkg));
          } else {
            LoadedPackage loaded;
            EmbeddingModel embedder = null;
            Role role = pkg.kind() == ModelPackage.Kind.EMBEDDING ? Role.EMBED : Role.MAIN;
            if (pkg.kind() == ModelPackage.Kind.EMBEDDING) {
              embedder = session.own(EmbeddingModel.load(pkg, session.device(), runtime));
              loaded = embedder.loaded(); // one copy of the weights for both routes
            } else {
              loaded = session.own(pkg.load(session.device()));
            }
            BatchedModel batched = BatchedModel.of(loaded, role);
            ActorRef<ModelServer.Command> server = session.system().systemActorOf(ModelServer.create(batched, runtime, registry),
                "serve-" + pkg.name(), Props.empty());
            if (embedder != null) { // /v1/embeddings runs its inputs as rows of this server too: one queue, one deadline
              embedders.add(EmbeddingEndpoint.of(embedder, server, session.system()));
            }
            // The export's output paths name the outputs of /v2 (Open Inference Protocol).
            inference.add(InferenceEndpoint.of(batched, TensorInference.of(server, session.system())).withOutputPaths(pkg.programs(role).get(0).export().outputPaths()));
          }
        }
        HttpSettings settings = HttpSettings.create(session.system());
        if (port != null) {
          settings = settings.withPort(port);
        }
        if (host != null) {
          settings = settings.withHost(host);
        }
        ServingRoutes routes = new ServingRoutes(session.system(), settings, registry, inference, generation);
        OpenAiRoutes openAi = new OpenAiRoutes(session.system(), settings, completions, embedders, registry);
        ApiKeys keys = ApiKeys.create(session.system()).and(apiKeys);
        // GET /openapi.json: every route above, over these models
        OpenApiDocument openApi = OpenApiDocument.of(routes, openAi).withApiKeys(keys);
        HttpServer http = HttpServer.start(session.system(), settings, keys, openApi.route().orElse(openAi.route()).orElse(routes.route()),
            registry);
        return new Serving(session, http, generation.stream().map(GenerationEndpoint::name).toList(), List.copyOf(clustered));
      } catch (RuntimeException e) {
        session.close();
        throw e;
      }
    }

    /** Waits up to {@code timeout} for this node to be Up in its cluster; serves anyway after it (ready says not Up). */
    private static void awaitUp(RuntimeSession session, Duration timeout) {
      long deadline = System.nanoTime() + timeout.toNanos();
      while (!XlaCluster.isUp(session.system()) && System.nanoTime() < deadline) {
        try {
          Thread.sleep(50);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return;
        }
      }
    }

    /** This node's cluster address, or null when it is not a cluster node. */
    String clusterNode() {
      return XlaCluster.isClustered(session.system()) ? XlaCluster.selfAddress(session.system()) : null;
    }

    /** The models whose {@code /v2} inference runs on the cluster node holding them (none without a cluster). */
    List<String> clustered() {
      return clustered;
    }

    /** {@code http://host:port}. */
    String url() {
      return http.url();
    }

    /** The names of the language models served. */
    List<String> generation() {
      return generation;
    }

    @Override
    public void close() {
      try {
        http.close();
      } finally {
        session.close();
      }
    }
  }
}
