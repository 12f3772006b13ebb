package dev.xlaactors.runtime;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.PluginException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * Checks a plugin file before {@code dlopen} sees it: the dynamic loader maps a truncated or corrupt
 * shared library and then touches pages past the end of the file, which kills the JVM with SIGBUS or
 * SIGSEGV. A fetched plugin (one with a {@code .pin} file beside it, written by {@code
 * native/fetch-third-party.sh}) must have the pinned size, and its pinned sha256 when the file changed
 * after the pin was written; every plugin must be a 64-bit little-endian ELF shared object for this JVM's
 * machine whose program header table and loadable segments lie inside the file. Each failure is a {@link
 * PluginException} naming the file and what is wrong; {@link Plugin#load(Path)} adds how to re-fetch it.
 *
 * <p>Stateless and thread-safe.
 */
final class PluginFile {
  private PluginFile() {}

  static final int EM_X86_64 = 62;
  static final int EM_AARCH64 = 183;
  private static final int ET_DYN = 3;
  private static final int PT_LOAD = 1;
  private static final int HEADER_BYTES = 64;
  private static final int PHDR_BYTES = 56;
  private static final Map<Integer, String> MACHINES =
      Map.of(EM_X86_64, "x86_64", EM_AARCH64, "aarch64", 21, "ppc64", 22, "s390x", 243, "riscv64", 3, "i386", 40, "arm");

  /** The ELF machine of this JVM, or -1 when its {@code os.arch} is not one this check knows. */
  static int hostMachine() {
    return switch (System.getProperty("os.arch", "").toLowerCase(Locale.ROOT)) {
      case "amd64", "x86_64" -> EM_X86_64;
      case "aarch64", "arm64" -> EM_AARCH64;
      case "ppc64le", "ppc64" -> 21;
      case "s390x" -> 22;
      case "riscv64" -> 243;
      default -> -1;
    };
  }

  /** Throws a {@link PluginException} unless {@code file} looks like a loadable plugin for this JVM. */
  static void check(Path file) {
    try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
      long size = channel.size();
      Path pin = pinOf(file);
      if (Files.isRegularFile(pin)) {
        checkPinned(file, channel, size, pin);
      }
      checkElf(file, channel, size);
    } catch (IOException e) {
      throw bad(file + " cannot be read: " + e);
    }
  }

  /** Where the fetch step writes {@code file}'s pin: {@code <file>.pin} beside it. */
  static Path pinOf(Path file) {
    return file.resolveSibling(file.getFileName() + ".pin");
  }

  /** The {@code key=value} lines of a pin file. */
  static Map<String, String> readPin(Path pin) throws IOException {
    Map<String, String> values = new LinkedHashMap<>();
    for (String line : Files.readAllLines(pin)) {
      int eq = line.indexOf('=');
      if (eq > 0) {
        values.put(line.substring(0, eq).trim(), line.substring(eq + 1).trim());
      }
    }
    return values;
  }

  private static void checkPinned(Path file, FileChannel channel, long size, Path pin) throws IOException {
    Map<String, String> pinned = readPin(pin);
    String pinnedSize = pinned.get("size");
    String pinnedSha = pinned.get("sha256");
    if (pinnedSize == null || pinnedSha == null) {
      throw bad(pin + " does not hold 'size=' and 'sha256=' lines, so " + file + " cannot be checked");
    }
    if (!pinnedSize.equals(Long.toString(size))) {
      throw bad(file + " is " + size + " bytes, but the fetched plugin is " + pinnedSize + " bytes (" + pin
          + "): it was cut short or replaced");
    }
    // Hashing 250 MB costs most of a second, so only a file changed after the fetch checked it is hashed.
    if (Files.getLastModifiedTime(file).compareTo(Files.getLastModifiedTime(pin)) > 0) {
      String sha = sha256(channel);
      if (!sha.equalsIgnoreCase(pinnedSha)) {
        throw bad(file + " has sha256 " + sha + ", but the fetched plugin's is " + pinnedSha + " (" + pin
            + "): it was changed after it was fetched");
      }
    }
  }

  private static String sha256(FileChannel channel) throws IOException {
    MessageDigest digest;
    try {
      digest = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JVM has SHA-256", e);
    }
    ByteBuffer buffer = ByteBuffer.allocate(1 << 20);
    long position = 0;
    int n;
    while ((n = channel.read(buffer, position)) > 0) {
      position += n;
      buffer.flip();
      digest.update(buffer);
      buffer.clear();
    }
    return HexFormat.of().formatHex(digest.digest());
  }

  private static void checkElf(Path file, FileChannel channel, long size) throws IOException {
    if (size == 0) {
      throw bad(file + " is empty (0 bytes), not a PJRT plugin");
    }
    ByteBuffer header = read(channel, 0, (int) Math.min(HEADER_BYTES, size));
    byte[] start = new byte[Math.min(4, header.limit())];
    header.get(0, start);
    if (header.limit() < 4 || header.getInt(0) != 0x464c457f) {
      throw bad(file + " is not an ELF shared library: it starts with " + hex(start) + ", not 7f 45 4c 46 (\"\\x7fELF\")");
    }
    if (header.limit() < HEADER_BYTES) {
      throw bad(file + " is cut short: " + size + " bytes, less than an ELF header (64 bytes)");
    }
    if (header.get(4) != 2) {
      throw bad(file + " is a 32-bit ELF file (class " + header.get(4) + "); a plugin for this 64-bit JVM must be ELFCLASS64");
    }
    if (header.get(5) != 1) {
      throw bad(file + " is a big-endian ELF file (data " + header.get(5) + "); this JVM needs a little-endian plugin");
    }
    int type = Short.toUnsignedInt(header.getShort(16));
    if (type != ET_DYN) {
      String kind = switch (type) {
        case 1 -> "a relocatable object";
        case 2 -> "an executable";
        case 4 -> "a core dump";
        default -> "of an unknown kind";
      };
      throw bad(file + " is " + kind + " (ELF type " + type + "), not a shared library (type 3)");
    }
    int machine = Short.toUnsignedInt(header.getShort(18));
    int host = hostMachine();
    if (host >= 0 && machine != host) {
      throw bad(file + " is built for machine " + machine + " (" + MACHINES.getOrDefault(machine, "unknown") + "), but this JVM runs on "
          + host + " (" + MACHINES.get(host) + ")");
    }
    long phoff = header.getLong(32);
    int phentsize = Short.toUnsignedInt(header.getShort(54));
    int phnum = Short.toUnsignedInt(header.getShort(56));
    if (phnum == 0) {
      throw bad(file + " has no program headers, so it has nothing to load");
    }
    if (phentsize != PHDR_BYTES) {
      throw bad(file + " has program header entries of " + phentsize + " bytes, expected 56: the header is corrupt");
    }
    long tableBytes = (long) phnum * PHDR_BYTES;
    if (phoff < 0 || phoff > size - tableBytes) {
      throw bad(file + " is cut short or corrupt: its program header table (bytes " + Long.toUnsignedString(phoff) + ".."
          + (phoff + tableBytes) + ") is not inside the file (" + size + " bytes)");
    }
    ByteBuffer table = read(channel, phoff, (int) tableBytes);
    for (int i = 0; i < phnum; i++) {
      int at = i * PHDR_BYTES;
      if (table.getInt(at) != PT_LOAD) {
        continue;
      }
      long offset = table.getLong(at + 8);
      long fileSize = table.getLong(at + 32);
      if (offset < 0 || fileSize < 0 || offset > size || fileSize > size - offset) {
        throw bad(file + " is cut short: its loadable segment " + i + " lies at bytes " + Long.toUnsignedString(offset) + ".."
            + Long.toUnsignedString(offset + fileSize) + ", past its end (" + size + " bytes)");
      }
    }
  }

  private static ByteBuffer read(FileChannel channel, long position, int bytes) throws IOException {
    ByteBuffer buffer = ByteBuffer.allocate(bytes).order(ByteOrder.LITTLE_ENDIAN);
    while (buffer.hasRemaining()) {
      if (channel.read(buffer, position + buffer.position()) < 0) {
        break;
      }
    }
    return buffer.flip();
  }

  private static String hex(byte[] bytes) {
    StringBuilder s = new StringBuilder();
    for (byte b : bytes) {
      s.append(s.length() == 0 ? "" : " ").append(String.format("%02x", b));
    }
    return s.toString();
  }

  private static PluginException bad(String message) {
    return new PluginException(ErrorCode.FAILED_PRECONDITION, message);
  }
}
