package dev.xlaactors.bench;

import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.Plugin;
import dev.xlaactors.runtime.RuntimeSettings;
import dev.xlaactors.runtime.XlaClient;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * The Java half of {@code bench/run.sh matmul}: y = x[1,2048] . W[2048,2048] (f32, W = 16 MiB resident
 * on the device), the bare matmul of issue 25. Rows (the JAX half, bench/jax_matmul.py, measures the
 * same under the same names):
 *
 * <ul>
 *   <li>{@code matmul_execute}: upload x, execute, download y (the row);
 *   <li>{@code matmul_execute_resident_x}: execute only, x already on the device (the computation and
 *       the dispatch, no transfers);
 *   <li>{@code upload_x_8KiB}, {@code download_y_8KiB}: the two transfers alone.
 * </ul>
 *
 * <p>Values are small integers so every result is exact and checked before timing. XLA_FLAGS in the
 * environment reach both sides' XLA (the plugin reads it when the client is created).
 */
public final class MatmulBench {
  static final int N = 2048;

  static final String MATMUL =
      """
      func.func @main(%x: tensor<1x2048xf32>, %w: tensor<2048x2048xf32>) -> tensor<1x2048xf32> {
        %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
            : (tensor<1x2048xf32>, tensor<2048x2048xf32>) -> tensor<1x2048xf32>
        return %y : tensor<1x2048xf32>
      }
      """;

  private static final LatencyProbe.Budget BUDGET = new LatencyProbe.Budget(300, 3_000, 6.0);
  private static final LatencyProbe.Budget SMALL = new LatencyProbe.Budget(2_000, 20_000, 3.0);

  private MatmulBench() {}

  /** x[i] = i % 3 - 1 and W[i, j] = (7i + 3j) % 5 - 2: integers, so f32 sums are exact in any order. */
  static float[] x() {
    float[] x = new float[N];
    for (int i = 0; i < N; i++) {
      x[i] = i % 3 - 1;
    }
    return x;
  }

  static float[] w() {
    float[] w = new float[N * N];
    for (int i = 0; i < N; i++) {
      for (int j = 0; j < N; j++) {
        w[i * N + j] = (7 * i + 3 * j) % 5 - 2;
      }
    }
    return w;
  }

  static float[] expected(float[] x, float[] w) {
    float[] y = new float[N];
    for (int i = 0; i < N; i++) {
      for (int j = 0; j < N; j++) {
        y[j] += x[i] * w[i * N + j];
      }
    }
    return y;
  }

  /**
   * Runs the rows on the CPU plugin of the settings, or with the argument {@code gpu} on the CUDA plugin
   * ({@link RuntimeSettings#gpuPluginPath()}: {@code XLA_ACTORS_GPU_PLUGIN} or where {@code
   * native/fetch-cuda-plugin.sh} put it), with that plugin's default client options.
   */
  public static void main(String[] args) throws Exception {
    RuntimeSettings settings = RuntimeSettings.load();
    boolean gpu = Arrays.asList(args).contains("gpu");
    float[] xs = x();
    float[] ws = w();
    float[] expected = expected(xs, ws);
    try (XlaClient client = gpu
            ? XlaClient.create(Plugin.load(RuntimeSettings.gpuPluginPath()), Map.of(), settings.compileCacheSize())
            : XlaClient.create(settings);
        Executable exe = client.compile(MATMUL);
        DeviceBuffer w = client.upload(HostTensor.ofFloats(ws, N, N))) {
      System.out.printf(
          "INFO side=java platform=%s version=%s devices=%d client_asynchronous=%s jvm=%s available_processors=%d XLA_FLAGS='%s'%n",
          client.platformName(), client.platformVersion(), client.devices().size(), !gpu && settings.clientAsynchronous(),
          System.getProperty("java.vm.version"), Runtime.getRuntime().availableProcessors(),
          System.getenv().getOrDefault("XLA_FLAGS", ""));
      HostTensor x = HostTensor.ofFloats(xs, 1, N);
      try (DeviceBuffer xb = client.upload(x)) {
        List<DeviceBuffer> out = exe.execute(xb, w);
        requireEqual(expected, out.get(0).toHost().toFloatArray());
        out.forEach(DeviceBuffer::close);
      }
      print(LatencyProbe.measure("matmul_execute", 0, BUDGET, () -> {
        try (DeviceBuffer xb = client.upload(x)) {
          for (DeviceBuffer y : exe.execute(xb, w)) {
            try (y; HostTensor host = y.toHost()) {
              // downloaded: the row's result
            }
          }
        }
      }));
      try (DeviceBuffer xb = client.upload(x)) {
        print(LatencyProbe.measure("matmul_execute_resident_x", 0, BUDGET, () -> {
          for (DeviceBuffer y : exe.execute(xb, w)) {
            y.close();
          }
        }));
        List<DeviceBuffer> out = exe.execute(xb, w);
        try (DeviceBuffer y = out.get(0)) {
          print(LatencyProbe.measure("download_y_8KiB", 4 * N, 1, SMALL, () -> y.toHost().close()));
        }
      }
      print(LatencyProbe.measure("upload_x_8KiB", 4 * N, 1, SMALL, () -> client.upload(x).close()));
    }
  }

  private static void print(LatencyProbe.Result result) {
    System.out.println(result.toBenchLine());
  }

  private static void requireEqual(float[] expected, float[] actual) {
    if (!Arrays.equals(expected, actual)) {
      throw new IllegalStateException("wrong result: expected " + Arrays.toString(Arrays.copyOf(expected, 8))
          + "..., got " + Arrays.toString(Arrays.copyOf(actual, 8)) + "...");
    }
  }
}
