package dev.xlaactors.graph;

import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/** Inputs and JAX's outputs for one program, read from a file written by tools/jax_fixtures.py (or jax_export_fixtures.py). */
public record JaxFixture(List<HostTensor> inputs, List<HostTensor> outputs) {
  public static JaxFixture load(String name) {
    String text = resource(name + ".txt");
    List<HostTensor> inputs = new ArrayList<>();
    List<HostTensor> outputs = new ArrayList<>();
    String[] lines = text.split("\n");
    for (int i = 0; i < lines.length; i++) {
      if (lines[i].startsWith("#") || lines[i].isBlank()) {
        continue;
      }
      String[] head = lines[i].trim().split(" ");
      String body = lines[++i].trim();
      String[] values = body.isEmpty() ? new String[0] : body.split(" ");
      long[] dims = head[3].equals("-") ? new long[0]
          : java.util.Arrays.stream(head[3].split(",")).mapToLong(Long::parseLong).toArray();
      HostTensor t = switch (head[2]) {
        case "f32" -> {
          float[] f = new float[values.length];
          for (int k = 0; k < f.length; k++) {
            f[k] = Float.parseFloat(values[k]);
          }
          yield HostTensor.ofFloats(f, dims);
        }
        case "f64" -> HostTensor.ofDoubles(doubles(values), dims);
        case "c64" -> {
          float[] f = new float[values.length];
          for (int k = 0; k < f.length; k++) {
            f[k] = Float.parseFloat(values[k]);
          }
          yield complexShaped(HostTensor.ofComplex64(f, dims), dims);
        }
        case "c128" -> complexShaped(HostTensor.ofComplex128(doubles(values), dims), dims);
        case "s64" -> HostTensor.ofLongs(java.util.Arrays.stream(values).mapToLong(Long::parseLong).toArray(), dims);
        case "u32" -> HostTensor.ofLongs(DType.U32, java.util.Arrays.stream(values).mapToLong(Long::parseLong).toArray(), dims);
        case "s32" -> HostTensor.ofInts(java.util.Arrays.stream(values).mapToInt(Integer::parseInt).toArray(), dims);
        case "pred" -> {
          boolean[] b = new boolean[values.length];
          for (int k = 0; k < b.length; k++) {
            b[k] = values[k].equals("1");
          }
          yield HostTensor.ofBooleans(b, dims);
        }
        default -> throw new IllegalArgumentException("fixture dtype " + head[2]);
      };
      (head[0].equals("input") ? inputs : outputs).add(t);
    }
    return new JaxFixture(inputs, outputs);
  }

  /** The complex factories make a vector when given no dims; a fixture's "-" means a scalar. */
  private static HostTensor complexShaped(HostTensor tensor, long[] dims) {
    if (dims.length > 0) {
      return tensor;
    }
    return HostTensor.of(dev.xlaactors.runtime.TensorType.of(tensor.dtype()), java.nio.ByteBuffer.wrap(tensor.toByteArray()));
  }

  private static double[] doubles(String[] values) {
    return java.util.Arrays.stream(values).mapToDouble(Double::parseDouble).toArray();
  }

  /** A fixture file's text; a name ending in {@code .gz} is gunzipped (the linalg exports are stored so). */
  public static String resource(String file) {
    try (InputStream in = JaxFixture.class.getResourceAsStream("/fixtures/" + file)) {
      if (in == null) {
        throw new IllegalStateException("missing test resource fixtures/" + file
            + "; run tools/jax_fixtures.py (tools/jax_linalg_fixtures.py for fixtures/linalg)");
      }
      if (file.endsWith(".gz")) {
        try (InputStream unzipped = new java.util.zip.GZIPInputStream(in)) {
          return new String(unzipped.readAllBytes(), StandardCharsets.UTF_8);
        }
      }
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Compares {@code actual} with JAX's outputs: exact for integers and pred, tolerances for f32. */
  public void check(List<HostTensor> actual, double rtol, double atol, String what) {
    if (actual.size() != outputs.size()) {
      throw new AssertionError(what + ": expected " + outputs.size() + " outputs, got " + actual.size());
    }
    for (int i = 0; i < outputs.size(); i++) {
      HostTensor e = outputs.get(i);
      HostTensor a = actual.get(i);
      org.junit.jupiter.api.Assertions.assertEquals(e.type(), a.type(), what + " output " + i);
      if (e.dtype() == DType.F32) {
        Reference.assertClose(e.toFloatArray(), a.toFloatArray(), rtol, atol, what + " output " + i);
      } else {
        org.junit.jupiter.api.Assertions.assertArrayEquals(e.toLongArray(), a.toLongArray(), what + " output " + i);
      }
    }
  }
}
