package dev.xlaactors.bench;

import dev.xlaactors.runtime.Device;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.RuntimeSettings;
import dev.xlaactors.runtime.XlaClient;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.List;

/**
 * The Java half of {@code bench/run.sh execute}: the cost of running a tiny compiled program (f32[8]
 * add) with pre-uploaded buffers and through the full upload/execute/download path, and of
 * host->device->host round trips of 1 MiB and 64 MiB. Prints one {@code BENCH} line per measurement
 * (see {@link LatencyProbe.Result#toBenchLine()}) and {@code INFO} lines describing the setup.
 *
 * <p>The JAX half, bench/jax_execute.py, measures the same operations on the same sizes under the same
 * names; keep the two in step.
 */
public final class ExecuteBench {
  /** The program both sides run: what {@code jax.jit(lambda a, b: a + b)} lowers to for f32[8]. */
  static final String ADD_F32X8 =
      """
      func.func @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
        %0 = stablehlo.add %a, %b : tensor<8xf32>
        return %0 : tensor<8xf32>
      }
      """;

  /** Tiny ops: many samples make a stable median and a meaningful p99 within a couple of seconds. */
  private static final LatencyProbe.Budget TINY = new LatencyProbe.Budget(2_000, 20_000, 4.0);
  private static final LatencyProbe.Budget ROUND_TRIP_1MIB = new LatencyProbe.Budget(50, 500, 4.0);
  private static final LatencyProbe.Budget ROUND_TRIP_64MIB = new LatencyProbe.Budget(3, 30, 8.0);

  private ExecuteBench() {}

  /** Runs every measurement and prints its line; a wrong result aborts with a non-zero exit. */
  public static void main(String[] args) throws Exception {
    RuntimeSettings settings = RuntimeSettings.load();
    try (XlaClient client = XlaClient.create(settings);
        Executable add = client.compile(ADD_F32X8)) {
      System.out.printf(
          "INFO side=java platform=%s devices=%d client_asynchronous=%s jvm=%s available_processors=%d%n",
          client.platformName(),
          client.devices().size(),
          settings.clientAsynchronous(),
          System.getProperty("java.vm.version"),
          Runtime.getRuntime().availableProcessors());
      measureExecute(client, add);
      measureExecuteOnDevice1(client, add);
      measureDeviceToDevice(client, "copy_d2d_1MiB", 1 << 20);
      measureRoundTrip(client, "roundtrip_1MiB", 1 << 20, ROUND_TRIP_1MIB);
      measureRoundTrip(client, "roundtrip_64MiB", 64 << 20, ROUND_TRIP_64MIB);
    }
  }

  private static void measureExecute(XlaClient client, Executable add) throws Exception {
    float[] a = new float[8];
    float[] b = new float[8];
    float[] expected = new float[8];
    for (int i = 0; i < 8; i++) {
      a[i] = i;
      b[i] = 10 * i;
      expected[i] = a[i] + b[i];
    }
    HostTensor hostA = HostTensor.ofFloats(a, 8);
    HostTensor hostB = HostTensor.ofFloats(b, 8);
    try (DeviceBuffer bufferA = client.upload(hostA);
        DeviceBuffer bufferB = client.upload(hostB)) {
      // A benchmark of a wrong answer is worthless: check once before timing.
      List<DeviceBuffer> outputs = add.execute(bufferA, bufferB);
      try {
        requireEqual(expected, outputs.get(0).toHost().toFloatArray());
      } finally {
        outputs.forEach(DeviceBuffer::close);
      }
      // execute() blocks until the run is complete, so each sample covers dispatch and the computation,
      // like JAX's block_until_ready(); closing the output is part of the steady-state cost of a call.
      print(
          LatencyProbe.measure(
              "execute_f32x8",
              0,
              TINY,
              () -> {
                for (DeviceBuffer output : add.execute(bufferA, bufferB)) {
                  output.close();
                }
              }));
    }
    requireEqual(expected, add.run(hostA, hostB).get(0).toFloatArray());
    print(LatencyProbe.measure("run_f32x8", 0, TINY, () -> add.run(hostA, hostB)));
  }

  /** The same add on the client's second device: a portable executable runs wherever its inputs are. */
  private static void measureExecuteOnDevice1(XlaClient client, Executable add) throws Exception {
    Device device1 = client.devices().get(1);
    float[] a = {1, 2, 3, 4, 5, 6, 7, 8};
    try (DeviceBuffer bufferA = client.upload(HostTensor.ofFloats(a, 8), device1)) {
      List<DeviceBuffer> outputs = add.execute(List.of(bufferA, bufferA), null, device1);
      try {
        if (!outputs.get(0).device().equals(device1)) {
          throw new IllegalStateException("the run did not stay on " + device1 + ": " + outputs.get(0).device());
        }
        requireEqual(new float[] {2, 4, 6, 8, 10, 12, 14, 16}, outputs.get(0).toHost().toFloatArray());
      } finally {
        outputs.forEach(DeviceBuffer::close);
      }
      List<DeviceBuffer> arguments = List.of(bufferA, bufferA);
      print(
          LatencyProbe.measure(
              "execute_f32x8_device1",
              0,
              TINY,
              () -> {
                for (DeviceBuffer output : add.execute(arguments, null, device1)) {
                  output.close();
                }
              }));
    }
  }

  /** A device-to-device copy (device 0 to device 1) of {@code bytes}, waiting until the copy is ready. */
  private static void measureDeviceToDevice(XlaClient client, String name, int bytes) throws Exception {
    float[] values = new float[bytes / Float.BYTES];
    for (int i = 0; i < values.length; i++) {
      values[i] = i;
    }
    Device device1 = client.devices().get(1);
    try (DeviceBuffer source = client.upload(HostTensor.ofFloats(values, values.length), client.devices().get(0))) {
      try (DeviceBuffer copy = source.copyToDevice(device1)) {
        requireEqual(values, copy.toHost().toFloatArray());
      }
      print(LatencyProbe.measure(name, bytes, 1, ROUND_TRIP_1MIB, () -> source.copyToDevice(device1).close()));
    }
  }

  private static void measureRoundTrip(XlaClient client, String name, int bytes, LatencyProbe.Budget budget)
      throws Exception {
    float[] values = new float[bytes / Float.BYTES];
    for (int i = 0; i < values.length; i++) {
      values[i] = i;
    }
    HostTensor tensor = HostTensor.ofFloats(values, values.length);
    try (DeviceBuffer check = client.upload(tensor);
        HostTensor back = check.toHost()) {
      requireEqual(values, back.toFloatArray());
    }
    // The downloaded tensor is closed, as a caller done with it would: its pooled memory is what the next
    // download gets, already faulted in (see HostMemoryPool).
    print(
        LatencyProbe.measure(
            name,
            bytes,
            budget,
            () -> {
              try (DeviceBuffer buffer = client.upload(tensor);
                  HostTensor back = buffer.toHost()) {
                // nothing to do with it: the round trip is the measurement
              }
            }));
    // The same round trip into a host buffer the caller keeps and reuses (DeviceBuffer.copyTo).
    ByteBuffer destination = ByteBuffer.allocateDirect(bytes).order(ByteOrder.LITTLE_ENDIAN);
    print(
        LatencyProbe.measure(
            name + "_reuse",
            bytes,
            budget,
            () -> {
              try (DeviceBuffer buffer = client.upload(tensor)) {
                buffer.copyTo(destination);
              }
            }));
  }

  private static void print(LatencyProbe.Result result) {
    System.out.println(result.toBenchLine());
  }

  private static void requireEqual(float[] expected, float[] actual) {
    if (!Arrays.equals(expected, actual)) {
      throw new IllegalStateException(
          "wrong result: expected "
              + Arrays.toString(Arrays.copyOf(expected, Math.min(8, expected.length)))
              + "..., got "
              + Arrays.toString(Arrays.copyOf(actual, Math.min(8, actual.length)))
              + "...");
    }
  }
}
