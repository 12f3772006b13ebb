package dev.xlaactors.runtime;

import static dev.xlaactors.runtime.TestPrograms.tensorType;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.ExecutionFailedException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The bridge's {@code xla_actors.zeros}, the KV cache's maker in {@code --kernels native} packages, on the real
 * plugin: its result is all zeros in every dtype it makes and at every size (inside one page, across pages,
 * with partial pages at both ends), also where XLA hands it memory an earlier result filled; its whole pages
 * stay unmapped until written (the resident memory grows by a small part of the buffer, where XLA's own zeros
 * grow it by all of it); and a call it cannot serve fails with an error naming the call.
 */
class ZerosKernelTest {
  private static XlaClient client;

  @BeforeAll
  static void start() {
    client = XlaClient.create();
  }

  @AfterAll
  static void stop() {
    client.close();
  }

  private static String zeros(String resultType) {
    return "func.func @main() -> " + resultType + " {\n"
        + "  %0 = stablehlo.custom_call @xla_actors.zeros() {api_version = 4 : i32, backend_config = {}} : () -> "
        + resultType + "\n  return %0 : " + resultType + "\n}\n";
  }

  /** XLA's own zeros (a broadcast, which writes every element), or any other constant. */
  private static String filled(String resultType, String dtype, String value) {
    return "func.func @main() -> " + resultType + " {\n"
        + "  %c = stablehlo.constant dense<" + value + "> : tensor<" + dtype + ">\n"
        + "  %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<" + dtype + ">) -> " + resultType + "\n"
        + "  return %0 : " + resultType + "\n}\n";
  }

  private static void assertAllZero(byte[] bytes, String what) {
    for (int i = 0; i < bytes.length; i++) {
      if (bytes[i] != 0) {
        throw new AssertionError(what + ": byte " + i + " of " + bytes.length + " is " + bytes[i] + ", expected 0");
      }
    }
  }

  @Test
  void theResultIsZeroInEveryDtypeAndSize() {
    String[] dtypes = {"f32", "f16", "bf16", "f64", "i8", "i32", "i64"};
    long[][] shapes = {{3}, {1025}, {7, 513}, {256, 1024}, {2, 3, 5, 4099}};
    for (String dtype : dtypes) {
      for (long[] dims : shapes) {
        String t = tensorType(dtype, dims);
        try (Executable exe = client.compile(zeros(t))) {
          HostTensor out = exe.run().get(0);
          long count = 1;
          for (long d : dims) {
            count *= d;
          }
          assertEquals(count * out.dtype().byteSize(), out.data().remaining(), t);
          assertAllZero(out.toByteArray(), t);
        }
      }
    }
  }

  @Test
  void memoryAnEarlierResultFilledComesBackZero() {
    // Sizes below glibc's mmap threshold come from its free lists, often the very bytes the filled result had.
    int reused = 0;
    for (long n : new long[] {5_000, 12_289, 24_000}) {
      String t = tensorType("f32", n);
      try (Executable fill = client.compile(filled(t, "f32", "7.5"));
          Executable zero = client.compile(zeros(t))) {
        for (int i = 0; i < 20; i++) {
          long address;
          try (DeviceBuffer sevens = fill.execute(new DeviceBuffer[0]).get(0)) {
            assertEquals(7.5f, sevens.toHost().toFloatArray()[(int) n - 1]);
            address = sevens.unsafeDevicePointer();
          }
          try (DeviceBuffer out = zero.execute(new DeviceBuffer[0]).get(0)) {
            reused += out.unsafeDevicePointer() == address ? 1 : 0;
            assertAllZero(out.toHost().toByteArray(), t + ", round " + i);
          }
        }
      }
    }
    assertTrue(reused > 0, "no zeros result reused the memory of the filled one before it: the check proved nothing");
  }

  @Test
  void theWholePagesStayUnmappedUntilWritten() throws IOException {
    long bytes = 256L << 20;
    String t = tensorType("f32", bytes / 4);
    try (Executable lazy = client.compile(zeros(t));
        Executable eager = client.compile(filled(t, "f32", "0.0"))) {
      // The smallest of three tries: anything else the JVM maps meanwhile (its heap growing) only adds.
      long grown = Long.MAX_VALUE;
      for (int attempt = 0; attempt < 3; attempt++) {
        long before = residentAnonymousKiB();
        try (DeviceBuffer out = lazy.execute(new DeviceBuffer[0]).get(0)) {
          grown = Math.min(grown, residentAnonymousKiB() - before);
        }
      }
      assertTrue(grown < (bytes >> 10) / 8, "xla_actors.zeros of " + (bytes >> 20) + " MiB grew the resident "
          + "anonymous memory by " + grown + " KiB, expected under an eighth of it");
      long before = residentAnonymousKiB();
      try (DeviceBuffer out = eager.execute(new DeviceBuffer[0]).get(0)) {
        long eagerGrowth = residentAnonymousKiB() - before;
        assertTrue(eagerGrowth > (bytes >> 10) * 3 / 4, "XLA's broadcast zeros of " + (bytes >> 20) + " MiB grew the "
            + "resident anonymous memory by only " + eagerGrowth + " KiB: the measure cannot tell mapped pages apart");
      }
    }
  }

  private static long residentAnonymousKiB() throws IOException {
    for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
      if (line.startsWith("RssAnon:")) {
        return Long.parseLong(line.replaceAll("[^0-9]", ""));
      }
    }
    throw new IllegalStateException("no RssAnon in /proc/self/status");
  }

  @Test
  void aCallItCannotServeFailsNamingIt() {
    String withOperand = "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
        + "  %0 = stablehlo.custom_call @xla_actors.zeros(%a) {api_version = 4 : i32, backend_config = {}} : "
        + "(tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n";
    String message = failure(withOperand, HostTensor.ofFloats(new float[4]));
    assertTrue(message.contains("xla_actors.zeros: expected no operands and 1 buffer result, got 1 operands"), message);
    message = failure(zeros(tensorType("ui16", 4)));
    assertTrue(message.contains("xla_actors.zeros: the result must be f32, f16, bf16, f64, s8, s32 or s64, got"),
        message);
  }

  private static String failure(String program, HostTensor... inputs) {
    try (Executable exe = client.compile(program)) {
      return assertThrows(ExecutionFailedException.class, () -> exe.run(List.of(inputs), null)).getMessage();
    }
  }
}
