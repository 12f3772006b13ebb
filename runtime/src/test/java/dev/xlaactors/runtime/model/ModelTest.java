package dev.xlaactors.runtime.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostCallSink;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.RunContext;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Models: parameters bound once to device buffers, runs that pass only their inputs, and closing. */
class ModelTest {
  static final int K = 64;
  static final int N = 32;
  // y = x . w, with w the first parameter (bound) and x the per-request input.
  static final String MATMUL = """
      func.func @main(%w: tensor<64x32xf32>, %x: tensor<1x64xf32>) -> tensor<1x32xf32> {
        %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<1x64xf32>, tensor<64x32xf32>) -> tensor<1x32xf32>
        return %y : tensor<1x32xf32>
      }
      """;
  // The same, with y handed to Java's host callback "hold" before it is returned.
  static final String MATMUL_THEN_CALLBACK = """
      func.func @main(%w: tensor<64x32xf32>, %x: tensor<1x64xf32>) -> tensor<1x32xf32> {
        %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<1x64xf32>, tensor<64x32xf32>) -> tensor<1x32xf32>
        %z = stablehlo.custom_call @xla_actors.host_callback(%y) {api_version = 4 : i32,
               backend_config = {callback = "hold"}, has_side_effect = true} : (tensor<1x32xf32>) -> tensor<1x32xf32>
        return %z : tensor<1x32xf32>
      }
      """;

  private static XlaClient client;
  private static Executable matmul;

  @BeforeAll
  static void open() {
    client = XlaClient.create();
    matmul = client.compile(MATMUL);
  }

  @AfterAll
  static void close() {
    matmul.close();
    client.close();
  }

  static float[] random(int n, long seed) {
    Random r = new Random(seed);
    float[] v = new float[n];
    for (int i = 0; i < n; i++) {
      v[i] = r.nextFloat() * 2 - 1;
    }
    return v;
  }

  static float[] times(float[] x, float[] w, int k, int n) {
    float[] y = new float[n];
    for (int j = 0; j < n; j++) {
      double s = 0;
      for (int i = 0; i < k; i++) {
        s += (double) x[i] * w[i * n + j];
      }
      y[j] = (float) s;
    }
    return y;
  }

  @Test
  void aLoadedWeightIsUploadedOnceAndEveryRunPassesOnlyItsInput() {
    float[] w = random(K * N, 1);
    try (Model model = Model.load(matmul, List.of("w", "x"), Map.of("w", HostTensor.ofFloats(w, K, N)), client.devices().get(0))) {
      assertEquals(List.of("x"), model.inputNames());
      assertEquals(List.of(TensorType.of(DType.F32, 1, K)), model.inputTypes());
      long uploads = client.uploadCount();
      long bytes = client.uploadedBytes();
      for (int run = 0; run < 20; run++) {
        float[] x = random(K, 100 + run);
        List<HostTensor> y = model.run(List.of(Argument.of(HostTensor.ofFloats(x, 1, K))), null);
        assertArrayEquals(times(x, w, K, N), y.get(0).toFloatArray(), 1e-4f);
      }
      assertEquals(20, client.uploadCount() - uploads, "one upload per run: x only");
      assertEquals(20L * K * 4, client.uploadedBytes() - bytes, "w is never uploaded again");
    }
  }

  @Test
  void aBoundBufferOutlivesItsCallersHandleAndServesConcurrentRuns() throws Exception {
    float[] w = random(K * N, 2);
    DeviceBuffer weights = client.upload(HostTensor.ofFloats(w, K, N));
    Model model = Model.bind(matmul, List.of("w", "x"), Map.of("w", weights));
    weights.close(); // the model has its own share
    ExecutorService pool = Executors.newFixedThreadPool(8);
    try (model) {
      List<Future<Boolean>> results = new ArrayList<>();
      for (int t = 0; t < 8; t++) {
        int seed = t;
        results.add(pool.submit(() -> {
          for (int i = 0; i < 25; i++) {
            float[] x = random(K, seed * 1000 + i);
            try (DeviceBuffer in = client.upload(HostTensor.ofFloats(x, 1, K))) {
              List<DeviceBuffer> out = model.execute(List.of(Argument.of(in)), null);
              assertArrayEquals(times(x, w, K, N), out.get(0).toHost().toFloatArray(), 1e-4f);
              out.forEach(DeviceBuffer::close);
              assertTrue(!in.isClosed(), "an input that is not donated stays the caller's");
            }
          }
          return true;
        }));
      }
      for (Future<Boolean> f : results) {
        assertTrue(f.get(60, TimeUnit.SECONDS));
      }
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void anOutputLeftOnTheDeviceFeedsTheNextRun() {
    // y = x . w with w [64x64]: the output has the input's type, so it chains without a host round trip.
    String square = MATMUL.replace("64x32", "64x64").replace("1x32", "1x64");
    float[] w = random(K * K, 3);
    try (Executable exe = client.compile(square);
        Model model = Model.load(exe, List.of("w", "x"), Map.of("w", HostTensor.ofFloats(w, K, K)), client.devices().get(0))) {
      float[] x = random(K, 4);
      float[] expected = x;
      DeviceBuffer current = client.upload(HostTensor.ofFloats(x, 1, K));
      long uploads = client.uploadCount();
      for (int step = 0; step < 3; step++) {
        DeviceBuffer next = model.execute(List.of(Argument.of(current)), null).get(0);
        current.close();
        current = next;
        expected = times(expected, w, K, K);
      }
      assertEquals(uploads, client.uploadCount(), "no upload between the runs");
      assertArrayEquals(expected, current.toHost().toFloatArray(), 1e-3f);
      current.close();
    }
  }

  @Test
  void badBindingsAndInputsFailNamingTheParameterBeforeAnyRun() {
    Map<String, HostTensor> wrongShape = Map.of("w", HostTensor.zeros(TensorType.of(DType.F32, N, K)));
    InvalidArgumentException shape = assertThrows(InvalidArgumentException.class,
        () -> Model.load(matmul, List.of("w", "x"), wrongShape, client.devices().get(0)));
    assertEquals("weight 'w' for parameter 0 of @main: expected f32[64,32], got f32[32,64]", shape.getMessage());
    InvalidArgumentException dtype = assertThrows(InvalidArgumentException.class, () -> Model.load(matmul,
        List.of("w", "x"), Map.of("w", HostTensor.zeros(TensorType.of(DType.F16, K, N))), client.devices().get(0)));
    assertTrue(dtype.getMessage().contains("expected f32[64,32], got f16[64,32]"), dtype.getMessage());
    InvalidArgumentException extra = assertThrows(InvalidArgumentException.class, () -> Model.load(matmul,
        List.of("w", "x"), Map.of("bias", HostTensor.zeros(TensorType.of(DType.F32, N))), client.devices().get(0)));
    assertTrue(extra.getMessage().contains("weight 'bias' (f32[32]) has no parameter of that name: the parameters are [w, x]"),
        extra.getMessage());
    InvalidArgumentException names = assertThrows(InvalidArgumentException.class,
        () -> Model.load(matmul, List.of("w"), Map.of(), client.devices().get(0)));
    assertTrue(names.getMessage().contains("name every parameter"), names.getMessage());
    long uploads = client.uploadCount();
    try (Model model = Model.load(matmul, List.of("w", "x"), Map.of("w", HostTensor.zeros(TensorType.of(DType.F32, K, N))),
        client.devices().get(0))) {
      InvalidArgumentException input = assertThrows(InvalidArgumentException.class,
          () -> model.run(List.of(Argument.of(HostTensor.zeros(TensorType.of(DType.F32, K)))), null));
      assertEquals("input 0 'x' of model '" + model.name() + "' (parameter 1 of @main): expected f32[1,64], got f32[64]",
          input.getMessage());
      InvalidArgumentException count = assertThrows(InvalidArgumentException.class, () -> model.run(List.of(), null));
      assertTrue(count.getMessage().contains("takes 1 input(s) [x: f32[1,64]], got 0"), count.getMessage());
      assertEquals(1, client.uploadCount() - uploads, "only the weight was uploaded");
    }
  }

  @Test
  void closingTheModelMidRunLetsTheRunFinishAndRefusesNewRuns() throws Exception {
    float[] w = random(K * N, 5);
    CountDownLatch arrived = new CountDownLatch(1);
    CompletableFuture<Void> release = new CompletableFuture<>();
    HostCallSink hold = call -> {
      arrived.countDown();
      release.thenRun(() -> call.complete(List.of(call.inputs().get(0))));
    };
    ExecutorService runner = Executors.newSingleThreadExecutor();
    try (Executable exe = client.compile(MATMUL_THEN_CALLBACK)) {
      DeviceBuffer weights = client.upload(HostTensor.ofFloats(w, K, N));
      Model model = Model.bind(exe, List.of("w", "x"), Map.of("w", weights));
      float[] x = random(K, 6);
      Future<float[]> inFlight = runner.submit(() -> {
        try (RunContext context = RunContext.withHostCalls(client.plugin(), 1, hold, Duration.ofSeconds(30))) {
          return model.run(List.of(Argument.of(HostTensor.ofFloats(x, 1, K))), context).get(0).toFloatArray();
        }
      });
      assertTrue(arrived.await(30, TimeUnit.SECONDS), "the run reached its callback");
      model.close();
      weights.close(); // the caller's handle too: the run in flight still holds the model's share
      XlaException refused = assertThrows(XlaException.class,
          () -> model.run(List.of(Argument.of(HostTensor.ofFloats(x, 1, K))), null));
      assertEquals(ErrorCode.FAILED_PRECONDITION, refused.code());
      assertTrue(refused.getMessage().startsWith("model '" + model.name() + "' is closed"), refused.getMessage());
      release.complete(null);
      assertArrayEquals(times(x, w, K, N), inFlight.get(30, TimeUnit.SECONDS), 1e-4f);
    } finally {
      runner.shutdownNow();
    }
  }
}
