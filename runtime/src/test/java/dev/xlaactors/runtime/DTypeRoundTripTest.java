package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Every supported dtype goes host -> device -> host, and through a compiled program, bit-exactly. */
class DTypeRoundTripTest {
  private static XlaClient client;

  @BeforeAll
  static void start() {
    client = XlaClient.create();
  }

  @AfterAll
  static void stop() {
    client.close();
  }

  @ParameterizedTest
  @EnumSource(DType.class)
  void uploadAndDownloadPreserveEveryByte(DType dtype) {
    HostTensor tensor = randomTensor(dtype, new Random(), 3, 5);
    try (DeviceBuffer buffer = client.upload(tensor)) {
      assertEquals(tensor.type(), buffer.type());
      HostTensor back = buffer.toHost();
      assertEquals(tensor.type(), back.type());
      assertArrayEquals(tensor.toByteArray(), back.toByteArray());
    }
  }

  @ParameterizedTest
  @EnumSource(DType.class)
  void copyToWritesIntoACallersBuffer(DType dtype) {
    HostTensor tensor = randomTensor(dtype, new Random(), 4, 3);
    java.nio.ByteBuffer destination = java.nio.ByteBuffer.allocateDirect((int) tensor.type().byteSize() + 8);
    destination.position(8);
    try (DeviceBuffer buffer = client.upload(tensor)) {
      buffer.copyTo(destination);
      byte[] copied = new byte[(int) tensor.type().byteSize()];
      destination.get(copied);
      assertArrayEquals(tensor.toByteArray(), copied);
      destination.position(9);
      org.junit.jupiter.api.Assertions.assertThrows(
          dev.xlaactors.error.InvalidArgumentException.class, () -> buffer.copyTo(destination));
    }
  }

  @ParameterizedTest
  @EnumSource(DType.class)
  void identityProgramReturnsItsInput(DType dtype) {
    HostTensor tensor = randomTensor(dtype, new Random(), 2, 2, 3);
    try (Executable exe = client.compile(TestPrograms.identity(tensor.type()))) {
      List<HostTensor> out = exe.run(tensor);
      assertEquals(List.of(tensor.type()), exe.outputTypes());
      assertArrayEquals(tensor.toByteArray(), out.get(0).toByteArray());
    }
  }

  /** Random valid elements: pred as 0/1, floats as finite values, integers over their full range. */
  static HostTensor randomTensor(DType dtype, Random random, long... dims) {
    int n = (int) Shape.of(dims).elementCount();
    float[] floats = new float[n];
    for (int i = 0; i < n; i++) {
      floats[i] = random.nextFloat() * 200 - 100;
    }
    return switch (dtype) {
      case C64 -> {
        float[] pairs = new float[2 * n];
        for (int i = 0; i < pairs.length; i++) {
          pairs[i] = random.nextFloat() * 200 - 100;
        }
        yield HostTensor.ofComplex64(pairs, dims);
      }
      case C128 -> HostTensor.ofComplex128(random.doubles(2L * n).map(d -> d * 1e6 - 5e5).toArray(), dims);
      case F8E5M2, F8E4M3FN -> {
        byte[] bytes = new byte[n];
        for (int i = 0; i < n; i++) {
          bytes[i] = (byte) (random.nextInt(0x70) + 1); // finite, non-NaN codes of both formats
        }
        yield HostTensor.ofBytes(dtype, bytes, dims);
      }
      case F32 -> HostTensor.ofFloats(floats, dims);
      case F16 -> HostTensor.ofHalfFloats(floats, dims);
      case BF16 -> HostTensor.ofBFloat16s(floats, dims);
      case F64 -> HostTensor.ofDoubles(random.doubles(n).map(d -> d * 1e6 - 5e5).toArray(), dims);
      case PRED -> {
        boolean[] b = new boolean[n];
        for (int i = 0; i < n; i++) {
          b[i] = random.nextBoolean();
        }
        yield HostTensor.ofBooleans(b, dims);
      }
      default -> {
        int bits = dtype.byteSize() * 8;
        long[] v = new long[n];
        for (int i = 0; i < n; i++) {
          long raw = random.nextLong();
          v[i] =
              bits == 64
                  ? raw
                  : dtype.isUnsignedInteger() ? raw >>> (64 - bits) : raw >> (64 - bits);
        }
        yield HostTensor.ofLongs(dtype, v, dims);
      }
    };
  }

  /** readFloats copies a range of elements into a range of an array (f32 as is, f16 converted); a range outside either is refused. */
  @Test
  void readFloatsCopiesARangeOfElementsIntoAnArray() {
    float[] values = {1, 2, 3, 4, 5, 6};
    for (HostTensor t : List.of(HostTensor.ofFloats(values, 2, 3), HostTensor.ofHalfFloats(values, 2, 3))) {
      try (t) {
        float[] out = new float[8];
        t.readFloats(3, out, 4, 3);
        assertArrayEquals(new float[] {0, 0, 0, 0, 4, 5, 6, 0}, out);
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> t.readFloats(4, out, 0, 3));
        assertTrue(e.getMessage().contains("elements 4..7 of a tensor of 6"), e.getMessage());
        assertThrows(InvalidArgumentException.class, () -> t.readFloats(0, out, 6, 3));
      }
    }
  }
}
