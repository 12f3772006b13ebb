package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/** The job serializer refuses a negative item index and a snapshot that holds an index twice (it took both). */
class ShardedJobSerializerTest {
  private final ShardedJobSerializer serializer = new ShardedJobSerializer(null);

  private static byte[] snapshot(long... indices) {
    ByteBuffer b = ByteBuffer.allocate(5 + indices.length * 13);
    b.put((byte) 0).putInt(indices.length);
    for (long i : indices) {
      b.putLong(i).putInt(1).put("x".getBytes(StandardCharsets.US_ASCII));
    }
    return b.array();
  }

  @Test
  void negativeAndDuplicateIndicesAreRefused() {
    TreeMap<Long, String> lines = new TreeMap<>();
    lines.put(0L, "a");
    lines.put(5L, "b");
    ShardedBatchJobs.JobSnapshot good = new ShardedBatchJobs.JobSnapshot(lines, Optional.empty());
    assertEquals(good, serializer.fromBinary(serializer.toBinary(good), serializer.manifest(good)));

    InvalidArgumentException twice = assertThrows(InvalidArgumentException.class, () -> serializer.fromBinary(snapshot(3, 3), "S"));
    assertTrue(twice.getMessage().contains("item 3 appears twice"), twice.getMessage());
    InvalidArgumentException negative = assertThrows(InvalidArgumentException.class, () -> serializer.fromBinary(snapshot(1, -2), "S"));
    assertTrue(negative.getMessage().contains("item index -2, expected an index >= 0"), negative.getMessage());

    ShardedBatchJobs.ItemScored scored = new ShardedBatchJobs.ItemScored(-7, "x");
    byte[] bytes = serializer.toBinary(scored);
    InvalidArgumentException item = assertThrows(InvalidArgumentException.class, () -> serializer.fromBinary(bytes, "I"));
    assertTrue(item.getMessage().contains("item index -7, expected an index >= 0"), item.getMessage());
  }
}
