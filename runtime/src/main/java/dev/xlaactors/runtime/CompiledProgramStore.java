package dev.xlaactors.runtime;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.FileTime;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Compiled programs kept on disk between processes (as JAX's persistent compilation cache): a client that
 * compiles a module ({@link XlaClient#compileModule}) serializes what the plugin made into this directory, and
 * the next process that compiles the same module with the same options loads it instead
 * ({@code PJRT_Executable_DeserializeAndLoad}), without running XLA's compiler. A 124 M GPT package of 8 slots
 * loads its programs in 0.5-0.7 s instead of 3.5-4.6, and the compiler's code and memory are never touched.
 *
 * <p>A file is found only by a key over everything its machine code depends on, so that a program compiled for
 * one machine is never run on another: the module's bytes and parameter types, the compile options as sent,
 * the plugin file (its pinned sha256, else its path, size and time), the bridge library's bytes (its FFI
 * handlers), the CPU's model and feature flags, and {@code XLA_FLAGS}. Each file holds a header and the
 * SHA-256 of its payload, checked before the plugin reads it: a torn or altered file is removed and compiled
 * again, never handed to the plugin. Files are written under a temporary name and renamed, so concurrent
 * processes never see half a file; past {@code maxBytes} the least recently used are removed.
 *
 * <p>Every failure here (a directory that cannot be made, a full disk) is logged and ends in a compile: the
 * store only ever saves time. Thread-safe.
 */
final class CompiledProgramStore {
  private static final Logger LOG = LoggerFactory.getLogger(CompiledProgramStore.class);
  private static final byte[] MAGIC = "xla-actors compiled program 1\n".getBytes(StandardCharsets.US_ASCII);
  private static final int DIGEST_BYTES = 32;
  private static final String SUFFIX = ".xlaexe";

  private final Path directory;
  private final long maxBytes;
  private final String machine;

  private CompiledProgramStore(Path directory, long maxBytes, String machine) {
    this.directory = directory;
    this.maxBytes = maxBytes;
    this.machine = machine;
  }

  /**
   * The store of {@code settings} for programs {@code plugin} compiles on {@code platform}; empty when the
   * settings keep none, the platform is not the CPU (a GPU's code depends on its device, which the key does
   * not name), or the CPU cannot be identified (no {@code /proc/cpuinfo}).
   */
  static Optional<CompiledProgramStore> open(RuntimeSettings settings, Plugin plugin, String platform) {
    if (settings.compiledProgramsDirectory() == null || !"cpu".equals(platform)) {
      return Optional.empty();
    }
    Optional<String> cpu = MachineIdentity.CPU;
    if (cpu.isEmpty()) {
      LOG.debug("compiled programs are not kept: /proc/cpuinfo names no CPU flags to key them by");
      return Optional.empty();
    }
    if (MachineIdentity.BRIDGE_SHA256 == null) {
      LOG.debug("compiled programs are not kept: the bridge library {} cannot be read to key them by", NativeLibrary.path());
      return Optional.empty();
    }
    String xlaFlags = System.getenv("XLA_FLAGS");
    String machine = String.join("\n", "plugin " + pluginIdentity(plugin), "bridge " + MachineIdentity.BRIDGE_SHA256,
        "cpu " + cpu.get(), "XLA_FLAGS " + (xlaFlags == null ? "" : xlaFlags.trim()));
    return Optional.of(new CompiledProgramStore(settings.compiledProgramsDirectory(), settings.compiledProgramsMaxBytes(),
        machine));
  }

  /**
   * Whether a compilation with {@code xlaOptions} (or {@code XLA_FLAGS}) asks XLA to write what it makes ({@code
   * xla_dump_to} and the other {@code xla_dump} options): loading it from the store would write nothing, so such
   * a program is compiled.
   */
  static boolean asksForCompilerOutput(java.util.Map<String, String> xlaOptions) {
    String flags = System.getenv("XLA_FLAGS");
    return xlaOptions.keySet().stream().anyMatch(name -> name.startsWith("xla_dump"))
        || (flags != null && flags.contains("xla_dump"));
  }

  /** The directory the files are kept in. */
  Path directory() {
    return directory;
  }

  /**
   * The file name of a program: the SHA-256 of {@code program} (the module's own key: its bytes' hash and
   * parameter types), {@code options} (the compile options as sent to the plugin) and this machine.
   */
  String key(String program, byte[] options) {
    MessageDigest sha = sha256();
    sha.update(machine.getBytes(StandardCharsets.UTF_8));
    sha.update((byte) 0);
    sha.update(program.getBytes(StandardCharsets.UTF_8));
    sha.update((byte) 0);
    sha.update(options);
    return HexFormat.of().formatHex(sha.digest());
  }

  /**
   * The serialized program kept under {@code key}, whole and unaltered; empty when there is none, or when the
   * file is not one this store wrote (removed then, so that it is compiled and written again).
   */
  Optional<byte[]> read(String key) {
    Path file = directory.resolve(key + SUFFIX);
    byte[] bytes;
    try {
      bytes = Files.readAllBytes(file);
    } catch (NoSuchFileException e) {
      return Optional.empty();
    } catch (IOException e) {
      LOG.warn("compiled program {} cannot be read ({}): compiling instead", file, e.toString());
      return Optional.empty();
    }
    int payload = MAGIC.length + DIGEST_BYTES;
    if (bytes.length <= payload || !Arrays.equals(bytes, 0, MAGIC.length, MAGIC, 0, MAGIC.length)
        || !Arrays.equals(bytes, MAGIC.length, payload, digest(bytes, payload), 0, DIGEST_BYTES)) {
      LOG.warn("compiled program {} is torn or altered (its header or checksum does not match): removed, compiling "
          + "instead", file);
      remove(key);
      return Optional.empty();
    }
    try {
      Files.setLastModifiedTime(file, FileTime.fromMillis(System.currentTimeMillis())); // recently used
    } catch (IOException e) {
      // Another process removed it meanwhile; what was read is whole.
    }
    return Optional.of(Arrays.copyOfRange(bytes, payload, bytes.length));
  }

  /**
   * Keeps {@code serialized} under {@code key}, replacing any file there, then trims the store to its bound;
   * whether it was kept.
   */
  boolean write(String key, byte[] serialized) {
    if ((long) serialized.length + MAGIC.length + DIGEST_BYTES > maxBytes) {
      LOG.debug("compiled program {} ({} bytes) is larger than the store's bound {}: not kept", key, serialized.length,
          maxBytes);
      return false;
    }
    Path file = directory.resolve(key + SUFFIX);
    Path temporary = null;
    try {
      Files.createDirectories(directory);
      temporary = Files.createTempFile(directory, key, ".tmp");
      byte[] bytes = new byte[MAGIC.length + DIGEST_BYTES + serialized.length];
      System.arraycopy(MAGIC, 0, bytes, 0, MAGIC.length);
      System.arraycopy(serialized, 0, bytes, MAGIC.length + DIGEST_BYTES, serialized.length);
      System.arraycopy(digest(bytes, MAGIC.length + DIGEST_BYTES), 0, bytes, MAGIC.length, DIGEST_BYTES);
      Files.write(temporary, bytes);
      try {
        Files.move(temporary, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      } catch (AtomicMoveNotSupportedException e) {
        Files.move(temporary, file, StandardCopyOption.REPLACE_EXISTING);
      }
      temporary = null;
      trim();
      return true;
    } catch (IOException | UncheckedIOException e) {
      LOG.warn("compiled program cannot be kept in {} ({}): the next process compiles it again ({}.directory)",
          directory, e.toString(), RuntimeSettings.COMPILED_PROGRAMS_KEY);
      return false;
    } finally {
      if (temporary != null) {
        try {
          Files.deleteIfExists(temporary);
        } catch (IOException e) {
          // Left behind; trim() removes stale temporary files.
        }
      }
    }
  }

  /** Removes the file of {@code key}, if any (one the plugin would not load, or that is torn). */
  void remove(String key) {
    try {
      Files.deleteIfExists(directory.resolve(key + SUFFIX));
    } catch (IOException e) {
      LOG.warn("compiled program {} cannot be removed: {}", directory.resolve(key + SUFFIX), e.toString());
    }
  }

  /** Removes the least recently used files until the rest fit in {@code maxBytes}, and temporary files an hour old. */
  private void trim() throws IOException {
    record Entry(Path path, long size, long used) {}
    List<Entry> entries = new ArrayList<>();
    long total = 0;
    long now = System.currentTimeMillis();
    try (DirectoryStream<Path> files = Files.newDirectoryStream(directory)) {
      for (Path f : files) {
        BasicFileAttributes a;
        try {
          a = Files.readAttributes(f, BasicFileAttributes.class);
        } catch (NoSuchFileException e) {
          continue; // removed by another process meanwhile
        }
        String name = f.getFileName().toString();
        if (name.endsWith(".tmp") && now - a.lastModifiedTime().toMillis() > 3_600_000L) {
          Files.deleteIfExists(f); // a writer that died before its rename
        } else if (name.endsWith(SUFFIX) && a.isRegularFile()) {
          entries.add(new Entry(f, a.size(), a.lastModifiedTime().toMillis()));
          total += a.size();
        }
      }
    }
    if (total <= maxBytes) {
      return;
    }
    entries.sort(Comparator.comparingLong(Entry::used));
    for (Entry e : entries) {
      if (total <= maxBytes) {
        break;
      }
      Files.deleteIfExists(e.path());
      total -= e.size();
    }
  }

  private static byte[] digest(byte[] bytes, int from) {
    MessageDigest sha = sha256();
    sha.update(bytes, from, bytes.length - from);
    return sha.digest();
  }

  private static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e); // every JVM has SHA-256
    }
  }

  /** The plugin file: its pinned sha256 (checked against the file before it was loaded), else path, size and time. */
  private static String pluginIdentity(Plugin plugin) {
    if (plugin.build().isPresent()) {
      return "sha256 " + plugin.build().get().fileSha256();
    }
    try {
      Path p = plugin.path().toRealPath();
      return p + " " + Files.size(p) + " " + Files.getLastModifiedTime(p).toMillis();
    } catch (IOException e) {
      return plugin.path() + " (unreadable: " + e + ")";
    }
  }

  /** What this process's machine code depends on besides the plugin, read once per process. */
  private static final class MachineIdentity {
    /** The CPU's model name and feature flags; empty without {@code /proc/cpuinfo}. */
    static final Optional<String> CPU = cpuIdentity();
    /** The SHA-256 of the loaded bridge library (the JNI library with the FFI handlers); null if unreadable. */
    static final String BRIDGE_SHA256 = bridgeSha256();

    private static String bridgeSha256() {
      NativeLibrary.load();
      try {
        return PluginFetcher.sha256(Path.of(NativeLibrary.path()));
      } catch (IOException | RuntimeException e) {
        return null; // no key tells this library's handlers from another's: keep nothing
      }
    }
  }

  /** The CPU's model name and feature flags (those of its first processor), which the plugin's code generation targets. */
  private static Optional<String> cpuIdentity() {
    List<String> lines;
    try {
      lines = Files.readAllLines(Path.of("/proc/cpuinfo"), StandardCharsets.UTF_8);
    } catch (IOException | UncheckedIOException e) {
      return Optional.empty();
    }
    String model = null;
    String flags = null;
    for (String line : lines) {
      int colon = line.indexOf(':');
      if (colon < 0) {
        continue;
      }
      String name = line.substring(0, colon).trim();
      if (model == null && name.equals("model name")) {
        model = line.substring(colon + 1).trim();
      } else if (flags == null && name.equals("flags")) {
        flags = line.substring(colon + 1).trim();
      }
      if (model != null && flags != null) {
        break;
      }
    }
    return flags == null ? Optional.empty() : Optional.of((model == null ? "" : model) + " | " + flags);
  }
}
