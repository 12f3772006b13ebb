package dev.xlaactors.http;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.serve.BatchedModel;
import dev.xlaactors.actors.serve.ModelServer;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.LoadedPackage;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.Role;
import com.typesafe.config.ConfigFactory;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.typed.ActorRef;

/**
 * A live HttpServer over two of runtime's fixture packages, each behind a {@link ModelServer}, as {@code
 * bin/xla-actors serve} serves them: {@code affine} (kind tensor: y = x @ w + b, x f32[3], y f32[2], at batch
 * 1 and 2) and {@code toy-embedder} (kind embedding: int32 tokens and mask [4] to f32[4, 4], at batch 1 and
 * 2). Endpoints get their outputs' paths from the packages' exports. affine's server holds at most 8 queued
 * requests and waits up to 50 ms to fill a batch.
 */
final class OpenInferenceFixture implements AutoCloseable {
  /** runtime's fixture packages, from the http module's directory (where surefire runs). */
  static final Path PACKAGES = Path.of("..", "runtime", "src", "test", "resources", "fixtures", "packages");
  /** affine's weights: w = arange(6).reshape(3, 2) - 2, b = [0.5, -1] (tools/jax_package_fixtures.py). */
  static final float[][] W = {{-2, -1}, {0, 1}, {2, 3}};
  static final float[] B = {0.5f, -1};

  final ActorTestKit kit;
  final XlaClient client;
  final CallbackRuntime callbacks;
  final List<LoadedPackage> loaded = new ArrayList<>();
  final HttpServer http;

  OpenInferenceFixture(String name) {
    // affine: at most 8 queued requests (so 8 rows a request), each waiting up to 50 ms for a batch.
    kit = ActorTestKit.create(name, ConfigFactory.parseString(
        "xla-actors.actors.serve.models.affine { queue-capacity = 8, max-delay = 50ms }").withFallback(ConfigFactory.load()));
    client = XlaClient.create();
    callbacks = CallbackRuntime.create(kit.system(), client);
    PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    List<InferenceEndpoint> endpoints = new ArrayList<>();
    for (String[] p : new String[][] {{"tensor", "MAIN"}, {"embedding", "EMBED"}}) {
      ModelPackage pkg = ModelPackage.open(PACKAGES.resolve(p[0]));
      Role role = Role.valueOf(p[1]);
      LoadedPackage l = pkg.load(client.devices().get(0));
      loaded.add(l);
      BatchedModel batched = BatchedModel.of(pkg.name(), l.models(role));
      ActorRef<ModelServer.Command> server = kit.spawn(ModelServer.create(batched, callbacks, registry), "serve-" + pkg.name());
      endpoints.add(InferenceEndpoint.of(batched, TensorInference.of(server, kit.system())).withOutputPaths(pkg.programs(role).get(0).export().outputPaths()));
    }
    HttpSettings settings = HttpSettings.create(kit.system()).withPort(0).withMaxBodyBytes(4096);
    http = HttpServer.start(kit.system(), settings, new ServingRoutes(kit.system(), settings, registry, endpoints, List.of()).route());
  }

  /** affine's y for one row x. */
  static float[] affine(float[] x) {
    float[] y = new float[2];
    for (int j = 0; j < 2; j++) {
      y[j] = B[j];
      for (int i = 0; i < 3; i++) {
        y[j] += x[i] * W[i][j];
      }
    }
    return y;
  }

  /** toy-embedder's f32[4, 4] states of one row, flat: (embed[token] + position) * mask. */
  static float[] embed(int[] tokens, int[] mask) {
    float[] out = new float[16];
    for (int t = 0; t < 4; t++) {
      for (int d = 0; d < 4; d++) {
        float e = ((tokens[t] * 4 + d) % 7) - 3f;
        out[t * 4 + d] = (e + (t * 4 + d) * 0.25f) * mask[t];
      }
    }
    return out;
  }

  @Override
  public void close() {
    http.close();
    kit.shutdownTestKit();
    callbacks.close();
    loaded.forEach(LoadedPackage::close);
    client.close();
  }
}
