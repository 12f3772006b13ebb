package dev.xlaactors.bench;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * This process's resident memory at one point, split by what holds it, from {@code /proc/self/smaps} (each
 * mapping's {@code Rss}) and the JVM's memory beans: what {@code bench/run.sh models} itemises its fixed
 * overhead from. Linux only; the fields are -1 where /proc is missing.
 *
 * @param point the name of the point (e.g. {@code client})
 * @param rssBytes VmRSS: resident now
 * @param peakBytes VmHWM: the most resident so far
 * @param anonBytes resident in mappings without a file (Java heap, malloc arenas, XLA's buffers, compiled code, stacks)
 * @param pluginBytes resident in the mappings of the PJRT plugin's file (its code and data)
 * @param weightsBytes resident in the mappings of the weight files (memory-mapped safetensors, file-backed)
 * @param otherFileBytes resident in the mappings of every other file (the JDK's libraries and modules, jars)
 * @param heapCommittedBytes the Java heap's committed size (an upper bound of its resident part)
 * @param heapUsedBytes the Java heap in use
 * @param nonHeapCommittedBytes metaspace, compressed class space and code cache, committed
 * @param threads live Java threads (each has a stack, mostly not resident)
 */
record ProcessMemory(String point, long rssBytes, long peakBytes, long anonBytes, long pluginBytes, long weightsBytes,
    long otherFileBytes, long heapCommittedBytes, long heapUsedBytes, long nonHeapCommittedBytes, int threads) {

  /** The snapshot now; {@code plugin} and {@code weights} name the files counted apart (absolute paths). */
  static ProcessMemory at(String point, Path plugin, Set<Path> weights) {
    long anon = 0;
    long pluginRss = 0;
    long weightsRss = 0;
    long otherFile = 0;
    String pluginName = plugin == null ? null : plugin.toAbsolutePath().normalize().toString();
    Set<String> weightNames = weights.stream().map(p -> p.toAbsolutePath().normalize().toString())
        .collect(java.util.stream.Collectors.toSet());
    String kind = "anon";
    try {
      for (String line : Files.readAllLines(Path.of("/proc/self/smaps"))) {
        if (isMappingHeader(line)) {
          kind = kindOf(line, pluginName, weightNames);
        } else if (line.startsWith("Rss:")) {
          long bytes = kiloBytes(line);
          switch (kind) {
            case "plugin" -> pluginRss += bytes;
            case "weights" -> weightsRss += bytes;
            case "file" -> otherFile += bytes;
            default -> anon += bytes;
          }
        }
      }
    } catch (IOException e) {
      anon = pluginRss = weightsRss = otherFile = -1;
    }
    long heapCommitted = 0;
    long heapUsed = 0;
    long nonHeap = 0;
    for (MemoryPoolMXBean pool : ManagementFactory.getMemoryPoolMXBeans()) {
      if (pool.getType() == MemoryType.HEAP) {
        heapCommitted += pool.getUsage().getCommitted();
        heapUsed += pool.getUsage().getUsed();
      } else {
        nonHeap += pool.getUsage().getCommitted();
      }
    }
    return new ProcessMemory(point, status("VmRSS:"), status("VmHWM:"), anon, pluginRss, weightsRss, otherFile,
        heapCommitted, heapUsed, nonHeap, ManagementFactory.getThreadMXBean().getThreadCount());
  }

  /** VmHWM of /proc/self/status: the process's peak resident set (what JAX's side reads too). */
  static long peakResidentBytes() {
    return status("VmHWM:");
  }

  /** One JSON object, the keys as the fields' names in snake case. */
  String json() {
    return String.format(Locale.ROOT, "{\"point\": \"%s\", \"rss\": %d, \"peak\": %d, \"anon\": %d, \"plugin\": %d, "
            + "\"weights\": %d, \"other_files\": %d, \"heap_committed\": %d, \"heap_used\": %d, \"non_heap_committed\": %d, "
            + "\"threads\": %d}", point, rssBytes, peakBytes, anonBytes, pluginBytes, weightsBytes, otherFileBytes,
        heapCommittedBytes, heapUsedBytes, nonHeapCommittedBytes, threads);
  }

  /** A mapping's first line in smaps: {@code start-end perms offset dev inode [path]}. */
  private static boolean isMappingHeader(String line) {
    int dash = line.indexOf('-');
    int space = line.indexOf(' ');
    return dash > 0 && space > dash && line.substring(0, dash).chars().allMatch(c -> Character.digit(c, 16) >= 0);
  }

  private static String kindOf(String header, String plugin, Set<String> weights) {
    List<String> parts = List.of(header.trim().split("\\s+", 6));
    if (parts.size() < 6 || !parts.get(5).startsWith("/")) {
      return "anon"; // no path, [heap], [stack], [anon:...], [vdso]...
    }
    String path = parts.get(5).replace(" (deleted)", "");
    if (path.equals(plugin)) {
      return "plugin";
    }
    return weights.contains(path) ? "weights" : "file";
  }

  private static long kiloBytes(String line) {
    return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
  }

  private static long status(String key) {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
        if (line.startsWith(key)) {
          return kiloBytes(line);
        }
      }
    } catch (IOException e) {
      return -1;
    }
    return -1;
  }
}
