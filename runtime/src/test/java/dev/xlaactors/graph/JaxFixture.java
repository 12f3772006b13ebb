package dev.xlaactors.graph;

import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/** Inputs and JAX's outputs for one program, read from a file written by tools/jax_fixtures.py. */
record JaxFixture(List<HostTensor> inputs, List<HostTensor> outputs) {
  static JaxFixture load(String name) {
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

  static String resource(String file) {
    try (InputStream in = JaxFixture.class.getResourceAsStream("/fixtures/" + file)) {
      if (in == null) {
        throw new IllegalStateException("missing test resource fixtures/" + file + "; run tools/jax_fixtures.py");
      }
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Compares {@code actual} with JAX's outputs: exact for integers and pred, tolerances for f32. */
  void check(List<HostTensor> actual, double rtol, double atol, String what) {
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
