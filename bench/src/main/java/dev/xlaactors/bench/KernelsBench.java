package dev.xlaactors.bench;

import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.MatmulKernels;
import dev.xlaactors.runtime.RuntimeSettings;
import dev.xlaactors.runtime.XlaClient;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;

/**
 * The GEMV half of {@code bench/run.sh kernels}: y = x[M,K] . W at M = 1 and 8 rows (one and eight decoding
 * sequences) for GPT-2 124 M's weight shapes (K x N:
 * 768x2304 the fused q|k|v, 3072x768 the MLP's down projection, 768x50257 the tied head, stored [N,K]), W
 * resident on the device, with XLA's dot against the bridge's native kernel ({@code xla_actors.matmul_f32}),
 * and for Q8_0 int8 weights XLA's dequantise-then-dot (the {@code --kernels xla} fallback) against
 * {@code xla_actors.matmul_q8}. The variants take turns within each round, so load from other work falls on
 * all alike. Each round's figure is the median of its runs; one line per shape, rows and variant (bytes = the
 * weight bytes one call reads):
 *
 * <pre>GEMV shape=768x2304 rows=1 variant=native_f32 bytes=7077888 us_min=.. us_median=.. us_max=.. gbps_median=..</pre>
 *
 * <p>{@code bench/gemv_peers.cc} prints the same lines for ggml and oneDNN on the same shapes.
 *
 * <p>Arguments: rounds (default 5), runs per round (default 40). System properties for an A/B beyond the
 * defaults: {@code kernels.rows} (a comma-separated list, default {@code 1,8}; 128 is a prompt chunk) and
 * {@code kernels.layouts=both}, which also times the f32 variants on the other layout of each weight (variants
 * {@code xla_f32_other} and {@code native_f32_other}: the Conv1D shapes stored [N,K], the head [K,N]).
 */
public final class KernelsBench {
  private static final int[][] SHAPES = {{768, 2304}, {3072, 768}, {768, 50257}};
  private static final String[] VARIANTS = {"xla_f32", "native_f32", "xla_q8", "native_q8"};
  private static final int[] ROWS =
      Arrays.stream(System.getProperty("kernels.rows", "1,8").split(",")).mapToInt(Integer::parseInt).toArray();
  private static final boolean BOTH_LAYOUTS = "both".equals(System.getProperty("kernels.layouts", ""));

  private KernelsBench() {}

  private static String program(String variant, int m, int k, int n, boolean transposed) {
    String x = "tensor<" + m + "x" + k + "xf32>";
    String y = "tensor<" + m + "x" + n + "xf32>";
    String w = transposed ? "tensor<" + n + "x" + k + "xf32>" : "tensor<" + k + "x" + n + "xf32>";
    String q = "tensor<" + n + "x" + k + "xi8>";
    String s = "tensor<" + n + "x" + (k / 32) + "xf32>";
    switch (variant) {
      case "xla_f32":
        return "func.func @main(%x: " + x + ", %w: " + w + ") -> " + y + " {\n"
            + "  %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [" + (transposed ? 1 : 0) + "] : ("
            + x + ", " + w + ") -> " + y + "\n  return %y : " + y + "\n}\n";
      case "native_f32":
        return "func.func @main(%x: " + x + ", %w: " + w + ") -> " + y + " {\n"
            + "  %y = stablehlo.custom_call @xla_actors.matmul_f32(%x, %w) {api_version = 4 : i32, backend_config = "
            + "{w_transposed = " + (transposed ? 1 : 0) + " : i32}} : (" + x + ", " + w + ") -> " + y + "\n"
            + "  return %y : " + y + "\n}\n";
      case "xla_q8": {
        String blocks = "tensor<" + n + "x" + (k / 32) + "x32xf32>";
        String dense = "tensor<" + n + "x" + k + "xf32>";
        return "func.func @main(%x: " + x + ", %q: " + q + ", %s: " + s + ") -> " + y + " {\n"
            + "  %f = stablehlo.convert %q : (" + q + ") -> " + dense + "\n"
            + "  %b = stablehlo.reshape %f : (" + dense + ") -> " + blocks + "\n"
            + "  %sb = stablehlo.broadcast_in_dim %s, dims = [0, 1] : (" + s + ") -> " + blocks + "\n"
            + "  %m = stablehlo.multiply %b, %sb : " + blocks + "\n"
            + "  %w = stablehlo.reshape %m : (" + blocks + ") -> " + dense + "\n"
            + "  %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [1] : (" + x + ", " + dense + ") -> " + y + "\n"
            + "  return %y : " + y + "\n}\n";
      }
      default:
        return "func.func @main(%x: " + x + ", %q: " + q + ", %s: " + s + ") -> " + y + " {\n"
            + "  %y = stablehlo.custom_call @xla_actors.matmul_q8(%x, %q, %s) {api_version = 4 : i32} : (" + x + ", " + q
            + ", " + s + ") -> " + y + "\n  return %y : " + y + "\n}\n";
    }
  }

  /** Runs the bench; prints one INFO line, then one GEMV line per shape and variant. */
  public static void main(String[] args) throws Exception {
    int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 5;
    int runs = args.length > 1 ? Integer.parseInt(args[1]) : 40;
    Random random = new Random(1);
    try (XlaClient client = XlaClient.create(RuntimeSettings.load())) {
      System.out.printf(Locale.ROOT, "INFO kernels isa=%s threads=%d XLA_FLAGS='%s'%n", MatmulKernels.isa(),
          MatmulKernels.threads(), System.getenv().getOrDefault("XLA_FLAGS", ""));
      for (int[] shape : SHAPES) {
        int k = shape[0];
        int n = shape[1];
        boolean transposed = n > 10_000;  // the head is stored [N,K] (wte)
        float[] w = new float[k * n];
        for (int i = 0; i < w.length; i++) {
          w[i] = (float) random.nextGaussian() * 0.02f;
        }
        byte[] q = new byte[k * n];
        random.nextBytes(q);
        float[] scales = new float[n * (k / 32)];
        Arrays.fill(scales, 0.001f);
        float[] x = new float[ROWS[ROWS.length - 1] * k];
        for (int i = 0; i < x.length; i++) {
          x[i] = (float) random.nextGaussian();
        }
        DeviceBuffer wb = client.upload(transposed ? HostTensor.ofFloats(w, n, k) : HostTensor.ofFloats(w, k, n));
        DeviceBuffer other = null;
        if (BOTH_LAYOUTS) {  // the same matrix, its elements in the other order
          int rows = transposed ? n : k;
          int cols = transposed ? k : n;
          float[] t = new float[w.length];
          for (int i = 0; i < rows; i++) {
            for (int j = 0; j < cols; j++) {
              t[j * rows + i] = w[i * cols + j];
            }
          }
          other = client.upload(HostTensor.ofFloats(t, cols, rows));
        }
        DeviceBuffer qb = client.upload(HostTensor.ofBytes(DType.S8, q, n, k));
        DeviceBuffer sb = client.upload(HostTensor.ofFloats(scales, n, k / 32));
        for (int m : ROWS) {
          try (DeviceBuffer xb = client.upload(HostTensor.ofFloats(Arrays.copyOf(x, m * k), m, k))) {
            time(client, rounds, runs, m, k, n, transposed, xb, wb, qb, sb, other);
          }
        }
        for (DeviceBuffer b : List.of(wb, qb, sb)) {
          b.close();
        }
        if (other != null) {
          other.close();
        }
      }
    }
  }

  /** Times the variants at m rows, interleaved within each round; prints their GEMV lines. */
  private static void time(XlaClient client, int rounds, int runs, int m, int k, int n, boolean transposed,
      DeviceBuffer xb, DeviceBuffer wb, DeviceBuffer qb, DeviceBuffer sb, DeviceBuffer other) {
    List<Executable> exes = new ArrayList<>();
    List<DeviceBuffer[]> inputs = new ArrayList<>();
    List<String> variants = new ArrayList<>(List.of(VARIANTS));
    for (String variant : VARIANTS) {
      exes.add(client.compile(program(variant, m, k, n, transposed)));
      inputs.add(variant.endsWith("f32") ? new DeviceBuffer[] {xb, wb} : new DeviceBuffer[] {xb, qb, sb});
    }
    check(exes.get(0), inputs.get(0), exes.get(1), inputs.get(1), "f32");
    check(exes.get(2), inputs.get(2), exes.get(3), inputs.get(3), "q8");
    if (other != null) {
      for (String variant : List.of("xla_f32", "native_f32")) {
        exes.add(client.compile(program(variant, m, k, n, !transposed)));
        inputs.add(new DeviceBuffer[] {xb, other});
        variants.add(variant + "_other");
      }
      for (int v = VARIANTS.length; v < exes.size(); v++) {
        check(exes.get(0), inputs.get(0), exes.get(v), inputs.get(v), variants.get(v));
      }
    }
    double[][] medians = new double[variants.size()][rounds];
    for (int r = 0; r < rounds; r++) {
      for (int v = 0; v < variants.size(); v++) {
        double[] times = new double[runs];
        for (int i = -3; i < runs; i++) {
          long start = System.nanoTime();
          exes.get(v).execute(inputs.get(v)).forEach(DeviceBuffer::close);
          if (i >= 0) {
            times[i] = (System.nanoTime() - start) / 1e3;
          }
        }
        Arrays.sort(times);
        medians[v][r] = times[runs / 2];
      }
    }
    for (int v = 0; v < variants.size(); v++) {
      double[] md = medians[v].clone();
      Arrays.sort(md);
      long bytes = variants.get(v).contains("f32") ? 4L * k * n : (long) k * n + 4L * n * (k / 32);
      System.out.printf(Locale.ROOT, "GEMV shape=%dx%d rows=%d variant=%s bytes=%d us_min=%.1f us_median=%.1f "
              + "us_max=%.1f gbps_median=%.2f gbps_best=%.2f%n", k, n, m, variants.get(v), bytes, md[0], md[rounds / 2],
          md[rounds - 1], bytes / md[rounds / 2] / 1e3, bytes / md[0] / 1e3);
    }
    exes.forEach(Executable::close);
  }

  /** A variant's y against XLA's, before anything is timed. */
  private static void check(Executable xla, DeviceBuffer[] xlaIn, Executable ours, DeviceBuffer[] ourIn, String what) {
    List<DeviceBuffer> a = xla.execute(xlaIn);
    List<DeviceBuffer> b = ours.execute(ourIn);
    float[] ya;
    float[] yb;
    try (HostTensor ha = a.get(0).toHost(); HostTensor hb = b.get(0).toHost()) {
      ya = ha.toFloatArray();
      yb = hb.toFloatArray();
    }
    a.forEach(DeviceBuffer::close);
    b.forEach(DeviceBuffer::close);
    for (int i = 0; i < ya.length; i++) {
      if (Math.abs(ya[i] - yb[i]) > 1e-3 * (1 + Math.abs(ya[i]))) {
        throw new IllegalStateException(what + " y[" + i + "]: XLA " + ya[i] + ", native " + yb[i]);
      }
    }
  }
}
