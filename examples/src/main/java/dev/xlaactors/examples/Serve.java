package dev.xlaactors.examples;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.RuntimeMeters;
import dev.xlaactors.actors.serve.BatchedModel;
import dev.xlaactors.actors.serve.GenerationServer;
import dev.xlaactors.actors.serve.ModelServer;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.examples.gpt.GptPackage;
import dev.xlaactors.examples.serve.ScoringModel;
import dev.xlaactors.http.GenerationEndpoint;
import dev.xlaactors.http.HttpServer;
import dev.xlaactors.http.HttpSettings;
import dev.xlaactors.http.InferenceEndpoint;
import dev.xlaactors.http.TensorInference;
import dev.xlaactors.http.ServingRoutes;
import dev.xlaactors.http.TextCodec;
import dev.xlaactors.lm.LanguageModel;
import dev.xlaactors.lm.PackageSlotDecoder;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.LoadedPackage;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.Role;
import dev.xlaactors.runtime.model.WeightFiles;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * {@code examples/run.sh serve}: an HTTP endpoint (module http) serving two models until Ctrl-C:
 * <ul>
 *   <li>{@code scoring}: y = relu(x . W) of {@code tools/jax_scoring_model.py}, behind a {@link ModelServer}
 *       (dynamic batching); {@code POST /v2/models/scoring/infer} (the Open Inference Protocol, KServe v2);
 *   <li>{@code gpt}: the GPT of {@code tools/jax_gpt.py} as a model package ({@link GptPackage}; the 124 M
 *       one when it was made, else the tiny one, or as {@code --gpt} says), a {@link LanguageModel} whose
 *       slot decoder a {@link GenerationServer} serves (continuous batching, KV-cache slots on the device);
 *       {@code POST /v1/models/gpt/generate} takes a text prompt (the package's tokenizer) and streams
 *       tokens, with their text, as server-sent events.
 * </ul>
 * It prints curl commands that work against it. {@code --self-test} sends the same requests with Java's
 * HTTP client, checks the answers (the scoring values against W from the weights file) and exits.
 */
public final class Serve {
  private static final String USAGE = "usage: examples/run.sh serve [--port N (default 8080; 0 = any free port)] "
      + "[--gpt auto|tiny|gpt2-124m (default auto: gpt2-124m if made, else tiny)] [--scoring-dim D (default 8)] [--self-test]";

  private Serve() {}

  /** The command line, checked. */
  record Options(Integer port, String gpt, int scoringDim, boolean selfTest) {
    static Options parse(String[] args) {
      Integer port = null;
      String gpt = "auto";
      int dim = 8;
      boolean selfTest = false;
      for (int i = 0; i < args.length; i++) {
        String a = args[i];
        if (a.equals("--self-test")) {
          selfTest = true;
          continue;
        }
        if (!List.of("--port", "--gpt", "--scoring-dim").contains(a)) {
          throw new IllegalArgumentException("unknown option '" + a + "'");
        }
        if (i + 1 >= args.length) {
          throw new IllegalArgumentException("option " + a + " needs a value");
        }
        String v = args[++i];
        try {
          switch (a) {
            case "--port" -> port = Integer.parseInt(v);
            case "--scoring-dim" -> dim = Integer.parseInt(v);
            default -> gpt = v;
          }
        } catch (NumberFormatException e) {
          throw new IllegalArgumentException("option " + a + " takes a whole number, got '" + v + "'");
        }
      }
      if (port != null && (port < 0 || port > 65535)) {
        throw new IllegalArgumentException("--port " + port + " is outside 0..65535");
      }
      if (dim < 1 || dim > 8192) {
        throw new IllegalArgumentException("--scoring-dim " + dim + " is outside 1..8192");
      }
      if (!List.of("auto", "tiny", "gpt2-124m").contains(gpt)) {
        throw new IllegalArgumentException("--gpt takes auto, tiny or gpt2-124m, got '" + gpt + "'");
      }
      return new Options(port, gpt, dim, selfTest);
    }
  }

  public static void main(String[] args) throws Exception {
    Options o;
    try {
      o = Options.parse(args);
    } catch (IllegalArgumentException e) {
      System.err.println(e.getMessage());
      System.err.println(USAGE);
      System.exit(2);
      return;
    }
    Path root = Path.of("").toAbsolutePath();
    Path scoringDir = ScoringModel.ensure(root, o.scoringDim(), System.err);
    GptPackage gpt = o.gpt().equals("auto")
        ? GptPackage.existing(root, "gpt2-124m").orElseGet(() -> GptPackage.ensure(root, "tiny", System.err))
        : GptPackage.ensure(root, o.gpt(), System.err);
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "serve");
    XlaClient client = XlaClient.create();
    CallbackRuntime callbacks = CallbackRuntime.create(system, client);
    LoadedPackage scoringPackage = null;
    LanguageModel gptModel = null;
    HttpServer http = null;
    int status = 0;
    try {
      long t0 = System.nanoTime();
      PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
      new RuntimeMeters(callbacks.metrics()).bindTo(registry); // xla_runtime_* on /metrics: runs and host callbacks
      scoringPackage = ModelPackage.open(scoringDir).load(client.devices().get(0));
      ScoringModel.registerCallbacks(callbacks, scoringPackage);
      BatchedModel scoring = BatchedModel.of(scoringPackage, Role.MAIN); // lends the package's Models
      ActorRef<ModelServer.Command> scoringServer = system.systemActorOf(ModelServer.create(scoring, callbacks, registry), "scoring",
          Props.empty());
      gptModel = LanguageModel.load(ModelPackage.open(gpt.directory()), client.devices().get(0), callbacks);
      List<Integer> slotCounts = gptModel.slotCounts();
      PackageSlotDecoder decoder = gptModel.decoder(slotCounts.get(slotCounts.size() - 1)); // all its slots; the server closes it
      TextCodec text = TextCodec.of(gptModel);
      ActorRef<GenerationServer.Command> gptServer = system.systemActorOf(GenerationServer.create("gpt", decoder, registry), "gpt",
          Props.empty());
      HttpSettings settings = HttpSettings.create(system);
      if (o.port() != null) {
        settings = settings.withPort(o.port());
      }
      ServingRoutes routes = new ServingRoutes(system, settings, registry, List.of(InferenceEndpoint.of(scoring, TensorInference.of(scoringServer, system))),
          List.of(GenerationEndpoint.of("gpt", gptServer, decoder, text)));
      http = HttpServer.start(system, settings, routes.route());
      System.err.printf("serving scoring (dimension %d, batch sizes %s) and gpt ('%s', %d slots) at %s; started in %.1f s%n",
          o.scoringDim(), scoring.batchSizes(), gptModel.name(), decoder.slots(), http.url(), (System.nanoTime() - t0) / 1e9);
      List<String[]> examples = examples(http.url(), o.scoringDim());
      if (o.selfTest()) {
        status = selfTest(http.url(), scoringDir, o.scoringDim(), examples);
      } else {
        System.out.println("try (Ctrl-C stops the server):");
        examples.forEach(e -> System.out.println("  " + e[0]));
        System.out.flush();
        CountDownLatch stop = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
          stop.countDown();
          try {
            Thread.sleep(2000); // let main close the server and the models
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        }));
        stop.await();
      }
    } catch (XlaException e) {
      System.err.println(e.getMessage());
      status = 1;
    } finally {
      if (http != null) {
        http.close();
      }
      system.terminate();
      system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS); // the generation server closes its decoder
      callbacks.close();
      if (scoringPackage != null) {
        scoringPackage.close();
      }
      if (gptModel != null) {
        gptModel.close();
      }
      client.close();
    }
    System.exit(status);
  }

  /** The curl commands printed (and, for --self-test, the same requests): {command, method, path, body}. */
  static List<String[]> examples(String url, int dim) {
    String x = IntStream.rangeClosed(1, dim).mapToObj(i -> Float.toString(i % 2 == 0 ? -i / 10f : i / 10f))
        .collect(Collectors.joining(","));
    String infer = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1," + dim + "],\"data\":[" + x + "]}]}";
    String generate = "{\"prompt\":\"The quick brown fox\",\"max_tokens\":12}";
    return List.of(
        new String[] {"curl -s " + url + "/health", "GET", "/health", null},
        new String[] {"curl -s " + url + "/v1/endpoints", "GET", "/v1/endpoints", null},
        new String[] {"curl -s " + url + "/v2/models/scoring", "GET", "/v2/models/scoring", null},
        new String[] {"curl -s " + url + "/v2/models/scoring/infer -H 'Content-Type: application/json' -d '" + infer + "'", "POST",
            "/v2/models/scoring/infer", infer},
        new String[] {"curl -sN " + url + "/v1/models/gpt/generate -H 'Content-Type: application/json' -d '" + generate + "'", "POST",
            "/v1/models/gpt/generate", generate},
        new String[] {"curl -s " + url + "/ready", "GET", "/ready", null},
        new String[] {"curl -s " + url + "/metrics | grep '^xla_'", "GET", "/metrics", null});
  }

  /** Sends the example requests and checks the answers; 0 when all are right. */
  private static int selfTest(String url, Path scoringDir, int dim, List<String[]> examples) throws Exception {
    HttpClient client = HttpClient.newHttpClient();
    int failures = 0;
    for (String[] e : examples) {
      HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(url + e[2])).timeout(Duration.ofMinutes(2));
      HttpRequest request = e[1].equals("GET") ? b.GET().build()
          : b.header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(e[3])).build();
      HttpResponse<String> r = client.send(request, HttpResponse.BodyHandlers.ofString());
      String problem = r.statusCode() != 200 ? "status " + r.statusCode() : check(e[2], r.body(), scoringDir, dim);
      System.out.println((problem == null ? "ok    " : "FAILED ") + e[1] + " " + e[2] + (problem == null ? "" : ": " + problem));
      String body = r.body().strip();
      System.out.println("      " + (body.length() > 400 ? body.substring(0, 400) + " ..." : body).replace("\n", "\n      "));
      failures += problem == null ? 0 : 1;
    }
    System.out.println(failures == 0 ? "self-test: OK" : "self-test: " + failures + " FAILED");
    return failures == 0 ? 0 : 1;
  }

  /** What is wrong with the answer to {@code path}, or null. */
  private static String check(String path, String body, Path scoringDir, int dim) {
    switch (path) {
      case "/v2/models/scoring" -> {
        return body.contains("{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[-1," + dim + "]}") ? null : "no input x FP32[-1, " + dim + "]";
      }
      case "/v2/models/scoring/infer" -> {
        float[] w;
        try (WeightFiles weights = ModelPackage.open(scoringDir).openWeights(); HostTensor t = weights.tensor("w")) {
          w = t.toFloatArray();
        }
        String data = body.substring(body.indexOf("\"data\":[") + 8, body.indexOf(']', body.indexOf("\"data\":[")));
        String[] got = data.split(",");
        for (int j = 0; j < dim; j++) {
          double y = 0;
          for (int k = 0; k < dim; k++) {
            y += ((k + 1) % 2 == 0 ? -(k + 1) / 10f : (k + 1) / 10f) * w[k * dim + j];
          }
          y = Math.max(y, 0);
          if (Math.abs(Double.parseDouble(got[j]) - y) > 1e-4 * (1 + Math.abs(y))) {
            return "output " + j + " is " + got[j] + ", relu(x . W) is " + y;
          }
        }
        return null;
      }
      case "/v1/models/gpt/generate" -> {
        return body.contains("event: token") && body.contains("event: done") ? null : "no token and done events";
      }
      case "/metrics" -> {
        return body.contains("xla_serve_requests_total") && body.contains("xla_generate_tokens_total")
            && body.contains("xla_runtime_runs_total") ? null : "meters missing";
      }
      default -> {
        return null;
      }
    }
  }
}
