package dev.xlaactors.runtime.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.io.IOException;
import java.io.InputStream;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.bytedeco.javacpp.Pointer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Reading and writing safetensors files: every dtype, Python's files, uploads, and every bad input. */
class SafeTensorsTest {
  @TempDir Path dir;

  // ---- round trips and Python's files

  @Test
  void everyDtypeRoundTripsBitExactlyWithMetadataNamesAndOrder() {
    Random random = new Random(1);
    Map<String, HostTensor> tensors = new LinkedHashMap<>();
    for (DType dtype : DType.values()) {
      if (dtype == DType.C128) {
        continue; // safetensors has no c128 (refused below)
      }
      byte[] bytes = new byte[dtype.byteSize() * 6];
      random.nextBytes(bytes);
      if (dtype == DType.PRED) {
        for (int i = 0; i < bytes.length; i++) {
          bytes[i] &= 1;
        }
      }
      tensors.put("w." + dtype.shortName(), HostTensor.ofBytes(dtype, bytes, 2, 3));
    }
    tensors.put("scalar", HostTensor.scalar(2.5f));
    tensors.put("empty", HostTensor.zeros(TensorType.of(DType.F32, 0, 4)));
    tensors.put("quote\" back\\slash ü\n", HostTensor.vector(1, 2));
    Map<String, String> metadata = Map.of("format", "pt", "note", "ünïcode \"quoted\"");
    Path file = dir.resolve("all.safetensors");
    SafeTensors.write(file, tensors, metadata);

    try (SafeTensors read = SafeTensors.open(file)) {
      assertEquals(List.copyOf(tensors.keySet()), List.copyOf(read.types().keySet()), "names in file order");
      assertEquals(metadata, read.metadata());
      for (Map.Entry<String, HostTensor> e : tensors.entrySet()) {
        HostTensor got = read.tensor(e.getKey());
        assertEquals(e.getValue().type(), got.type(), e.getKey());
        assertEquals(e.getValue().type(), read.types().get(e.getKey()));
        assertArrayEquals(e.getValue().toByteArray(), got.toByteArray(), e.getKey());
      }
    }
  }

  @Test
  void writeRefusesWhatTheFormatCannotHold() {
    Path file = dir.resolve("bad.safetensors");
    InvalidArgumentException c128 = assertThrows(InvalidArgumentException.class,
        () -> SafeTensors.write(file, Map.of("z", HostTensor.ofComplex128(new double[] {1, 2})), null));
    assertMentions(c128, "'z'", "c128", "F32");
    InvalidArgumentException reserved = assertThrows(InvalidArgumentException.class,
        () -> SafeTensors.write(file, Map.of("__metadata__", HostTensor.scalar(1f)), null));
    assertMentions(reserved, "__metadata__", "reserved");
    assertFalse(Files.exists(file), "nothing written");
  }

  @Test
  void aFileWrittenByPythonsSafetensorsReadsWithItsValues() throws IOException {
    Path file = dir.resolve("python.safetensors");
    try (InputStream in = getClass().getResourceAsStream("python.safetensors")) {
      Files.copy(in, file); // written by tools/safetensors_fixture.py
    }
    try (SafeTensors st = SafeTensors.open(file)) {
      assertEquals(Map.of("format", "np", "source", "tools/safetensors_fixture.py"), st.metadata());
      assertEquals(19, st.types().size());
      assertEquals(TensorType.of(DType.F32, 2, 3), st.types().get("layers.0.f32"));
      assertArrayEquals(new float[] {-1, -0.5f, 0, 0.5f, 1, 1.5f}, st.tensor("layers.0.f32").toFloatArray());
      assertArrayEquals(new double[] {0, 1 / 3.0, 2 / 3.0, 1}, st.tensor("f64").toDoubleArray());
      assertArrayEquals(new float[] {0, 0.25f, 0.5f, 0.75f, 1}, st.tensor("f16").toFloatArray());
      assertEquals(TensorType.of(DType.BF16, 2, 2), st.types().get("bf16"));
      assertArrayEquals(new float[] {0, 1.5f, 3, 4.5f}, st.tensor("bf16").toFloatArray());
      assertArrayEquals(new long[] {-(1L << 40), 0, 7}, st.tensor("i64").toLongArray());
      assertArrayEquals(new long[] {Long.MIN_VALUE + 5, 1}, st.tensor("u64").toLongArray(), "2^63 + 5 as bits");
      assertEquals(TensorType.of(DType.S32, 2, 3), st.types().get("i32"));
      assertArrayEquals(new int[] {-3, -2, -1, 0, 1, 2}, st.tensor("i32").toIntArray());
      assertArrayEquals(new long[] {4_000_000_000L, 3}, st.tensor("u32").toLongArray());
      assertArrayEquals(new long[] {-30_000, 2}, st.tensor("i16").toLongArray());
      assertArrayEquals(new long[] {65_000, 4}, st.tensor("u16").toLongArray());
      assertArrayEquals(new long[] {-128, 127, 0}, st.tensor("i8").toLongArray());
      assertArrayEquals(new long[] {255, 0, 9}, st.tensor("u8").toLongArray());
      assertArrayEquals(new boolean[] {true, false, true}, st.tensor("bool").toBooleanArray());
      assertArrayEquals(new float[] {1, 2, -3.5f, 0.25f}, st.tensor("c64").toComplex64Array());
      // float8 bit patterns: e5m2 1.0 = 0x3c, 2.0 = 0x40, -0.5 = 0xb8; e4m3fn 1.0 = 0x38, -2.0 = 0xc0, 0.5 = 0x30
      assertArrayEquals(new byte[] {0x3c, 0x40, (byte) 0xb8}, st.tensor("f8_e5m2").toByteArray());
      assertEquals(DType.F8E4M3FN, st.types().get("f8_e4m3fn").dtype());
      assertArrayEquals(new byte[] {0x38, (byte) 0xc0, 0x30}, st.tensor("f8_e4m3fn").toByteArray());
      assertEquals(TensorType.of(DType.F32), st.types().get("scalar"));
      assertArrayEquals(new float[] {3.25f}, st.tensor("scalar").toFloatArray());
      assertEquals(TensorType.of(DType.F32, 0, 3), st.tensor("empty").type());
      assertArrayEquals(new int[] {42}, st.tensor("gewicht.ä").toIntArray());
    }
  }

  // ---- the real plugin

  private static final String MATVEC = """
      func.func @main(%x: tensor<1x256xf32>, %w: tensor<256x256xf32>) -> tensor<1x256xf32> {
        %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
            : (tensor<1x256xf32>, tensor<256x256xf32>) -> tensor<1x256xf32>
        return %y : tensor<1x256xf32>
      }
      """;

  /** Small integers: every product and sum is exact in f32, whatever the summation order. */
  private static float[] weights(int salt) {
    float[] w = new float[256 * 256];
    for (int i = 0; i < 256; i++) {
      for (int j = 0; j < 256; j++) {
        w[i * 256 + j] = (i * 7 + j * 3 + salt) % 5 - 2;
      }
    }
    return w;
  }

  private static float[] xs() {
    float[] x = new float[256];
    for (int i = 0; i < 256; i++) {
      x[i] = i % 3 - 1;
    }
    return x;
  }

  private static float[] matvec(float[] x, float[] w) {
    float[] y = new float[256];
    for (int i = 0; i < 256; i++) {
      for (int j = 0; j < 256; j++) {
        y[j] += x[i] * w[i * 256 + j];
      }
    }
    return y;
  }

  @Test
  void mappedWeightsUploadToThePluginAndComputeTheRightValues() {
    // "aligned" starts the data (64-byte aligned: uploaded in place); "unaligned" follows 12 bytes of
    // "pad", so its upload copies. Both must give the same, right values.
    Path file = dir.resolve("w.safetensors");
    float[] w1 = weights(0);
    float[] w2 = weights(1);
    Map<String, HostTensor> tensors = new LinkedHashMap<>();
    tensors.put("aligned", HostTensor.ofFloats(w1, 256, 256));
    tensors.put("pad", HostTensor.vector(1f, 2f, 3f));
    tensors.put("unaligned", HostTensor.ofFloats(w2, 256, 256));
    SafeTensors.write(file, tensors, null);
    float[] x = xs();
    try (XlaClient client = XlaClient.create();
        Executable exe = client.compile(MATVEC);
        SafeTensors st = SafeTensors.open(file);
        DeviceBuffer xb = client.upload(HostTensor.ofFloats(x, 1, 256))) {
      HostTensor aligned = st.tensor("aligned");
      HostTensor unaligned = st.tensor("unaligned");
      try (DeviceBuffer a = client.upload(aligned); DeviceBuffer u = client.upload(unaligned)) {
        assertArrayEquals(matvec(x, w1), exe.execute(xb, a).get(0).toHost().toFloatArray());
        assertArrayEquals(matvec(x, w2), exe.execute(xb, u).get(0).toHost().toFloatArray());
      }
      assertEquals(0, new Pointer(aligned.data()).address() % 64, "write() aligns the data");
      assertEquals(12, new Pointer(unaligned.data()).address() % 64);
    }
  }

  @Test
  void anInPlaceUploadKeepsTheMappingAfterTheFileAndTensorAreGone() {
    Path file = dir.resolve("w.safetensors");
    float[] w = weights(2);
    SafeTensors.write(file, Map.of("w", HostTensor.ofFloats(w, 256, 256)), null);
    float[] x = xs();
    try (XlaClient client = XlaClient.create();
        Executable exe = client.compile(MATVEC);
        DeviceBuffer xb = client.upload(HostTensor.ofFloats(x, 1, 256))) {
      DeviceBuffer wb;
      try (SafeTensors st = SafeTensors.open(file)) {
        wb = client.upload(st.tensor("w"));
      }
      try (wb) {
        for (int i = 0; i < 3; i++) {
          System.gc(); // the tensor and its mapping are unreachable but for the buffer
        }
        assertArrayEquals(matvec(x, w), exe.execute(xb, wb).get(0).toHost().toFloatArray());
      }
    }
  }

  @Test
  void aProgramDonatingAMappedWeightNeverWritesIntoTheReadOnlyMapping() {
    // A write into the read-only mapping would kill the process; the plugin must give the result new memory.
    String donating = """
        func.func @main(%w: tensor<256x256xf32> {tf.aliasing_output = 0 : i32}) -> tensor<256x256xf32> {
          %y = stablehlo.add %w, %w : tensor<256x256xf32>
          return %y : tensor<256x256xf32>
        }
        """;
    Path file = dir.resolve("w.safetensors");
    float[] w = weights(3);
    SafeTensors.write(file, Map.of("w", HostTensor.ofFloats(w, 256, 256)), null);
    try (XlaClient client = XlaClient.create();
        Executable exe = client.compile(donating);
        SafeTensors st = SafeTensors.open(file)) {
      HostTensor mapped = st.tensor("w");
      try (DeviceBuffer wb = client.upload(mapped)) {
        float[] doubled = w.clone();
        for (int i = 0; i < doubled.length; i++) {
          doubled[i] *= 2;
        }
        assertArrayEquals(doubled, exe.execute(wb).get(0).toHost().toFloatArray());
      }
      assertArrayEquals(w, mapped.toFloatArray(), "the file's bytes are unchanged");
      assertArrayEquals(w, st.tensor("w").toFloatArray());
    }
  }

  // ---- lookups and lifetime

  @Test
  void anUnknownNameIsRefusedNamingTheKnownOnesAndAClosedFileRefusesReads() {
    Path file = dir.resolve("two.safetensors");
    SafeTensors.write(file, Map.of("a", HostTensor.vector(1f), "b", HostTensor.vector(2f)), null);
    SafeTensors st = SafeTensors.open(file);
    HostTensor a = st.tensor("a");
    InvalidArgumentException missing = assertThrows(InvalidArgumentException.class, () -> st.tensor("c"));
    assertMentions(missing, file.toString(), "no tensor 'c'", "'a'", "'b'");
    st.close();
    st.close(); // idempotent
    IllegalStateException closed = assertThrows(IllegalStateException.class, () -> st.tensor("a"));
    assertMentions(closed, "closed", "'a'");
    assertArrayEquals(new float[] {1f}, a.toFloatArray(), "a tensor read before close stays valid");
  }

  // ---- bad files

  /** A file of the given header (as JSON text) followed by {@code dataBytes} zero bytes. */
  private Path craft(String name, String header, int dataBytes) throws IOException {
    byte[] json = header.getBytes(StandardCharsets.UTF_8);
    ByteBuffer b = ByteBuffer.allocate(8 + json.length + dataBytes).order(ByteOrder.LITTLE_ENDIAN);
    b.putLong(json.length).put(json);
    Path file = dir.resolve(name);
    Files.write(file, b.array());
    return file;
  }

  private static InvalidArgumentException refused(Path file) {
    return assertThrows(InvalidArgumentException.class, () -> SafeTensors.open(file).close());
  }

  private static void assertMentions(Exception e, String... parts) {
    for (String part : parts) {
      assertTrue(e.getMessage().contains(part), "'" + part + "' missing from: " + e.getMessage());
    }
  }

  @Test
  void aFileCutAnywhereIsRefusedSayingWhere() throws IOException {
    Path whole = dir.resolve("whole.safetensors");
    SafeTensors.write(whole, Map.of("w", HostTensor.ofFloats(new float[64], 8, 8)), Map.of("k", "v"));
    byte[] bytes = Files.readAllBytes(whole);
    long headerLength = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).getLong();
    int dataStart = 8 + (int) headerLength;

    for (int cut : new int[] {0, 3, 7}) { // inside the length
      Path file = Files.write(dir.resolve("cut" + cut), Arrays.copyOf(bytes, cut));
      assertMentions(refused(file), file.toString(), "is " + cut + " bytes", "8-byte header length");
    }
    for (int cut : new int[] {8, 8 + (int) headerLength / 2, dataStart - 1}) { // inside the header
      Path file = Files.write(dir.resolve("cut" + cut), Arrays.copyOf(bytes, cut));
      assertMentions(refused(file), file.toString(), "header length " + headerLength, "past the end",
          "only " + (cut - 8) + " bytes");
    }
    for (int cut : new int[] {dataStart, dataStart + 100, bytes.length - 1}) { // inside the data
      Path file = Files.write(dir.resolve("cut" + cut), Arrays.copyOf(bytes, cut));
      assertMentions(refused(file), file.toString(), "tensor 'w'", "data_offsets [0, 256]",
          "past the end of the data", "which is " + (cut - dataStart) + " bytes");
    }
  }

  @Test
  void aHeaderLengthPastTheEndIsRefused() throws IOException {
    ByteBuffer b = ByteBuffer.allocate(24).order(ByteOrder.LITTLE_ENDIAN);
    b.putLong(1000).put("{}".getBytes(StandardCharsets.UTF_8));
    Path file = Files.write(dir.resolve("long"), b.array());
    assertMentions(refused(file), "header length 1000", "past the end", "only 16 bytes");
    b.putLong(0, -1L); // 2^64 - 1 as the format's unsigned length
    Files.write(file, b.array());
    assertMentions(refused(file), "header length 18446744073709551615", "past the end");
  }

  @Test
  void aHeaderOfFiveGibibytesIsRefusedWithoutAllocatingIt() throws IOException {
    // A sparse file really is that long, so only the limit can refuse it; the test heap is far smaller.
    long claimed = 5L << 30;
    Path file = dir.resolve("huge");
    try (RandomAccessFile raf = new RandomAccessFile(file.toFile(), "rw")) {
      raf.write(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(claimed).array());
      raf.setLength(8 + claimed + 16);
    }
    assertMentions(refused(file), file.toString(), "header length " + claimed, "exceeds the limit of "
        + SafeTensors.MAX_HEADER_BYTES);
  }

  @Test
  void badJsonAndBadUtf8AreRefused() throws IOException {
    assertMentions(refused(craft("j1", "{\"w\": {\"dtype\": \"F32\",}}", 0)), "not valid JSON",
        "expected a string key at character 22");
    assertMentions(refused(craft("j2", "{\"w\": ", 0)), "not valid JSON", "end of the header");
    assertMentions(refused(craft("j3", "{} extra", 0)), "not valid JSON", "end of the JSON");
    assertMentions(refused(craft("j4", "{\"a\": 01}", 0)), "not valid JSON");
    assertMentions(refused(craft("j5", "[".repeat(10_000) + "]".repeat(10_000), 0)), "levels of nesting");
    byte[] latin1 = "{\"gr\u00fc\u00df\": 1}".getBytes(StandardCharsets.ISO_8859_1);
    ByteBuffer b = ByteBuffer.allocate(8 + latin1.length).order(ByteOrder.LITTLE_ENDIAN);
    b.putLong(latin1.length).put(latin1);
    Path file = Files.write(dir.resolve("latin1"), b.array());
    assertMentions(refused(file), file.toString(), "not valid UTF-8");
  }

  @Test
  void entriesThatAreNotTensorDescriptionsAreRefusedNamingTheTensor() throws IOException {
    assertMentions(refused(craft("n1", "[]", 0)), "must be a JSON object of tensors, got an array");
    assertMentions(refused(craft("n2", "{\"w\": 5}", 0)), "tensor 'w'", "must be an object", "the number 5");
    assertMentions(refused(craft("n3", "{\"w\": [1]}", 0)), "tensor 'w'", "must be an object", "an array");
    assertMentions(refused(craft("n4", "{\"w\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4)),
        "tensor 'w'", "\"dtype\"", "got nothing");
    assertMentions(refused(craft("n5", "{\"w\": {\"dtype\": \"F32\", \"shape\": 1, \"data_offsets\": [0, 4]}}", 4)),
        "tensor 'w'", "\"shape\" as an array", "the number 1");
    assertMentions(refused(craft("n6", "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}", 4)),
        "tensor 'w'", "1 numbers, expected 2");
    assertMentions(refused(craft("n7", "{\"w\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", 4)),
        "tensor 'w'", "element 0 is not an integer");
    assertMentions(refused(craft("n8", "{\"__metadata__\": {\"k\": 1}}", 0)), "\"__metadata__\" entry 'k'",
        "must be a string", "the number 1");
    assertMentions(refused(craft("n9", "{\"__metadata__\": []}", 0)), "\"__metadata__\" must be an object");
  }

  @Test
  void anUnknownDtypeIsRefusedListingTheSupportedOnes() throws IOException {
    Path file = craft("dtype", "{\"w\": {\"dtype\": \"F4\", \"shape\": [2], \"data_offsets\": [0, 1]}}", 1);
    assertMentions(refused(file), file.toString(), "tensor 'w'", "dtype 'F4'", "not supported", "BF16", "F8_E5M2");
  }

  @Test
  void offsetsPastTheEndOverlappingOrOfTheWrongSizeAreRefused() throws IOException {
    assertMentions(refused(craft("o1", "{\"w\": {\"dtype\": \"F32\", \"shape\": [100], \"data_offsets\": [0, 400]}}", 16)),
        "tensor 'w'", "data_offsets [0, 400] past the end of the data", "16 bytes");
    assertMentions(refused(craft("o2", "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
        + " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 12)),
        "'a' (data_offsets [0, 8])", "'b' (data_offsets [4, 12])", "overlap");
    assertMentions(refused(craft("o3", "{\"w\": {\"dtype\": \"F32\", \"shape\": [2, 2], \"data_offsets\": [0, 12]}}", 16)),
        "tensor 'w'", "holding 12 bytes, expected 16 for f32[2,2]", "4 elements x 4 bytes");
    assertMentions(refused(craft("o4", "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}}", 16)),
        "tensor 'w'", "expected 0 <= begin <= end");
    assertMentions(refused(craft("o5", "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 99999999999999999999]}}", 4)),
        "tensor 'w'", "does not fit a 64-bit integer");
  }

  @Test
  void aNegativeOrOverflowingShapeIsRefused() throws IOException {
    assertMentions(refused(craft("s1", "{\"w\": {\"dtype\": \"F32\", \"shape\": [-1, 4], \"data_offsets\": [0, 0]}}", 0)),
        "tensor 'w'", "shape [-1, 4]", "dimension 0 is negative");
    assertMentions(refused(craft("s2", "{\"w\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], "
        + "\"data_offsets\": [0, 0]}}", 0)), "tensor 'w'", "overflows");
  }

  @Test
  void aDuplicateNameIsRefused() throws IOException {
    String entry = "{\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}";
    Path file = craft("dup", "{\"w\": " + entry + ", \"w\": " + entry + "}", 4);
    assertMentions(refused(file), file.toString(), "duplicate key 'w'");
  }
}
