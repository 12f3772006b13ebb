package dev.xlaactors.actors.jobs;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.BitSet;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.zip.CRC32;

/**
 * A batch job's output file, which is also its journal: one line per finished item, {@code
 * index<TAB>values<TAB>crc}, appended in the order items finish, where {@code crc} is the CRC-32 of {@code
 * index<TAB>values} as 8 lowercase hex digits. Opening it locks the file, reads and checks every line and
 * changes nothing in a file it refuses; then it cuts a torn last line (a run killed in the middle of a
 * write, or a line left NUL-filled or half-written by a power loss, which its CRC exposes). The lock is held
 * on the one channel the journal reads and writes through until {@link #close()}, so a second writer,
 * another job of this JVM or another process, is refused with a message naming the file and the holder's
 * pid (from {@code /proc/locks} on Linux). POSIX drops a process's lock when the process closes any
 * descriptor of the file, so code of this JVM must read an open journal only through {@link #read(Path)},
 * which uses the journal's channel. A new file is created owner-only ({@code rw-------}) and its directory
 * is forced to disk, so the file itself survives a crash. Each appended line is forced to disk every
 * {@code syncEvery} items, so after a crash the file holds every finished item exactly once, and a new run
 * computes only the others.
 *
 * <p>Not thread-safe: a job uses it from one item at a time.
 */
public final class ResultJournal implements AutoCloseable {
  /** What a journal line looks like, for messages that refuse a file. */
  public static final String LINE_FORMAT = "'index<TAB>values<TAB>crc32' (e.g. '7\t0.25,0.75\t3f386333')";

  private static final Pattern LINE = Pattern.compile("(\\d{1,18})\t([^\t]*)\t([0-9a-f]{8})");
  // What a line cut short or NUL-filled by a crash can look like: a prefix of a line (NULs removed).
  private static final Pattern TORN = Pattern.compile("\\d{0,18}(\t[^\t]*(\t[0-9a-f]{0,8})?)?");

  private final Path file;
  private final Path key;
  private final FileChannel channel;
  private final FileLock lock;
  private final BitSet done = new BitSet();
  private final int syncEvery;
  private final long recovered;
  private final long truncatedBytes;
  private int sinceSync;
  private IOException broken;

  private ResultJournal(Path file, Path key, FileChannel channel, FileLock lock, int syncEvery, long truncatedBytes,
      Map<Long, String> lines) {
    this.file = file;
    this.key = key;
    this.channel = channel;
    this.lock = lock;
    this.syncEvery = syncEvery;
    this.truncatedBytes = truncatedBytes;
    lines.keySet().forEach(i -> done.set(Math.toIntExact(i)));
    this.recovered = done.cardinality();
  }

  /**
   * Opens (or creates) {@code file}. Throws {@link FatalJobException}, and leaves the file as it was, when
   * another process holds it or when a line other than a torn last one is not a journal line: then it is
   * not this job's output; also when it cannot be created, read or locked (the I/O error is its cause).
   */
  public static ResultJournal open(Path file, int syncEvery) throws IOException {
    synchronized (OPEN) {
      try {
        return openLocked(file, syncEvery);
      } catch (IOException e) {
        throw new FatalJobException(file + " cannot be opened as a result journal: " + e
            + "; give the job a file it can read and write", e);
      }
    }
  }

  // Called holding OPEN, so no read() of this JVM opens (and, closing it, unlocks) the file meanwhile.
  private static ResultJournal openLocked(Path file, int syncEvery) throws IOException {
    Path parent = file.toAbsolutePath().getParent();
    if (parent != null) {
      Files.createDirectories(parent);
    }
    if (Files.isDirectory(file)) {
      throw new FatalJobException(file + " is a directory; give the job a file to write its results to");
    }
    // Refuse a second job of this JVM before opening anything: POSIX drops a process's lock on a file when
    // the process closes any descriptor of that file, so even a refused open would unlock the first job.
    Path key = key(file);
    if (OPEN.containsKey(key)) {
      throw new FatalJobException(file + " is being written by another job of this JVM (pid " + ProcessHandle.current().pid()
          + "); give this job another output file, or wait until that job ends");
    }
    boolean created = !Files.exists(file, LinkOption.NOFOLLOW_LINKS);
    Set<StandardOpenOption> options = Set.of(StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE);
    FileChannel channel;
    try {
      channel = FileChannel.open(file, options, PosixFilePermissions.asFileAttribute(OWNER_ONLY));
    } catch (UnsupportedOperationException notPosix) {
      channel = FileChannel.open(file, options);
    }
    try {
      if (created && parent != null) {
        forceDirectory(parent);
      }
      FileLock lock;
      try {
        lock = channel.tryLock();
      } catch (java.nio.channels.OverlappingFileLockException e) {
        lock = null; // held by a channel of this JVM that is not a journal
      }
      if (lock == null) {
        long holder = lockHolder(file);
        String who = holder == ProcessHandle.current().pid() ? "another channel of this JVM (pid " + holder + ")"
            : holder > 0 ? "another process (pid " + holder + ")" : "another process";
        throw new FatalJobException(file + " is being written by " + who
            + "; give this job another output file, or wait until that one ends");
      }
      // Read through the locked channel: a second descriptor (Files.readAllBytes) would drop the lock when closed.
      byte[] bytes = readAll(file, channel);
      Parsed parsed = parse(file, bytes);
      if (parsed.end() < bytes.length) {
        channel.truncate(parsed.end());
        channel.force(true);
      }
      ResultJournal journal = new ResultJournal(file, key, channel, lock, syncEvery, bytes.length - parsed.end(), parsed.lines());
      OPEN.put(key, journal);
      return journal;
    } catch (IOException | RuntimeException e) {
      channel.close();
      throw e;
    }
  }

  /** The journals open in this JVM, by the real path of their file. Also the monitor of open, read and close. */
  private static final Map<Path, ResultJournal> OPEN = new java.util.HashMap<>();

  private static Path key(Path file) throws IOException {
    if (Files.exists(file)) {
      return file.toRealPath();
    }
    Path absolute = file.toAbsolutePath();
    Path parent = absolute.getParent();
    return parent == null ? absolute.normalize() : parent.toRealPath().resolve(absolute.getFileName());
  }

  private static byte[] readAll(Path file, FileChannel channel) throws IOException {
    long size = channel.size();
    if (size > Integer.MAX_VALUE - 16) {
      throw new FatalJobException(file + " holds " + size + " bytes, more than a result journal can (2 GiB); give the job a new file");
    }
    ByteBuffer buffer = ByteBuffer.allocate((int) size);
    while (buffer.hasRemaining()) {
      if (channel.read(buffer, buffer.position()) < 0) {
        break; // cut short by someone else meanwhile: parse what is there
      }
    }
    return java.util.Arrays.copyOf(buffer.array(), buffer.position());
  }

  /**
   * The pid of the process holding a POSIX lock on {@code file}, from Linux's {@code /proc/locks}, or -1
   * where that is not known (another system, or the lock went away meanwhile).
   */
  static long lockHolder(Path file) {
    try {
      long dev = ((Number) Files.getAttribute(file, "unix:dev")).longValue();
      long ino = ((Number) Files.getAttribute(file, "unix:ino")).longValue();
      long major = ((dev >>> 8) & 0xfff) | ((dev >>> 32) & ~0xfffL);
      long minor = (dev & 0xff) | ((dev >>> 12) & ~0xffL);
      String id = String.format("%02x:%02x:%d", major, minor, ino);
      for (String line : Files.readAllLines(Path.of("/proc/locks"))) {
        String[] f = line.trim().split("\\s+");
        // "1: POSIX  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; waiters have "->" after the number.
        if (f.length >= 6 && !f[1].equals("->") && f[5].equals(id)) {
          return Long.parseLong(f[4]);
        }
      }
    } catch (IOException | RuntimeException notKnown) {
      // not Linux, or no "unix" attribute view: the pid is not known
    }
    return -1;
  }

  private static final Set<PosixFilePermission> OWNER_ONLY =
      EnumSet.of(PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE);

  private static void forceDirectory(Path dir) {
    try (FileChannel d = FileChannel.open(dir, StandardOpenOption.READ)) {
      d.force(true);
    } catch (IOException | UnsupportedOperationException e) {
      // Some file systems cannot open or force a directory; the file's own force still holds its lines.
    }
  }

  /**
   * The complete lines of an output file by index (for checking a job's output; the file is not locked). A
   * file that cannot be read is a {@link FatalJobException} naming it.
   */
  public static Map<Long, String> read(Path file) throws IOException {
    synchronized (OPEN) {
      if (!Files.exists(file)) {
        return Map.of();
      }
      // A journal open in this JVM is read through its own channel: closing another descriptor would unlock it.
      try {
        ResultJournal open = OPEN.get(file.toRealPath());
        if (open != null) {
          return parse(file, readAll(file, open.channel)).lines();
        }
        return parse(file, Files.readAllBytes(file)).lines();
      } catch (IOException e) {
        throw new FatalJobException(file + " cannot be read as a result journal: " + e, e);
      }
    }
  }

  /** The journal line of {@code index} with {@code values}, newline included. */
  static String line(long index, String values) {
    String body = index + "\t" + values;
    return body + "\t" + crc(body) + "\n";
  }

  private static String crc(String body) {
    CRC32 crc = new CRC32();
    crc.update(body.getBytes(StandardCharsets.UTF_8));
    return String.format("%08x", crc.getValue());
  }

  private record Parsed(Map<Long, String> lines, int end) {}

  /**
   * Reads every line; {@code end} is where the good lines end. Only the last line may be bad, and only in
   * the way a crash leaves it (cut short, NUL-filled, or failing its CRC); any other bad line refuses the
   * whole file.
   */
  private static Parsed parse(Path file, byte[] bytes) {
    Map<Long, String> lines = new LinkedHashMap<>();
    int start = 0;
    int lineNumber = 0;
    while (start < bytes.length) {
      lineNumber++;
      int newline = start;
      while (newline < bytes.length && bytes[newline] != '\n') {
        newline++;
      }
      boolean last = newline >= bytes.length - 1;
      String text = new String(bytes, start, newline - start, StandardCharsets.UTF_8);
      Matcher m = LINE.matcher(text);
      boolean complete = newline < bytes.length;
      if (complete && m.matches() && crc(m.group(1) + "\t" + m.group(2)).equals(m.group(3))) {
        long index = Long.parseLong(m.group(1));
        if (lines.putIfAbsent(index, m.group(2)) != null) {
          throw new FatalJobException(file + ":" + lineNumber + ": index " + index + " appears twice; a journal holds each item once");
        }
        start = newline + 1;
        continue;
      }
      if (last && TORN.matcher(text.replace("\0", "")).matches()) {
        return new Parsed(lines, start); // a torn last line: cut it
      }
      String shown = text.length() > 80 ? text.substring(0, 80) + "..." : text;
      throw new FatalJobException(file + ":" + lineNumber + " is not a result journal line: '" + shown.replace("\t", "<TAB>")
          + "'; a journal line is " + LINE_FORMAT + ". Give the job a new file, or delete this one to start over"
          + " (nothing in it was changed)");
    }
    return new Parsed(lines, bytes.length);
  }

  /** Whether a line for {@code index} is in the file. */
  public boolean isDone(long index) {
    return index <= Integer.MAX_VALUE && done.get((int) index);
  }

  /** Items finished by earlier runs, found when the file was opened. */
  public long recovered() {
    return recovered;
  }

  /** Bytes of a partial last line cut off when the file was opened (0 if the last run ended cleanly). */
  public long truncatedBytes() {
    return truncatedBytes;
  }

  /** Items in the file now. */
  public long doneCount() {
    return done.cardinality();
  }

  public Path file() {
    return file;
  }

  /**
   * Appends the line of {@code index} and forces it to disk if {@code syncEvery} items have been appended
   * since the last force. If the write fails half way, the partial line is cut off again before the
   * exception is thrown, so a retry cannot leave a broken line behind; if cutting it fails too, the journal
   * refuses every later append (a {@link FatalJobException}), so no line is ever written twice, and the
   * next open cuts the torn line by its CRC.
   */
  public void append(long index, String values) throws IOException {
    if (values.indexOf('\n') >= 0 || values.indexOf('\t') >= 0) {
      throw new FatalJobException("the values of item " + index + " contain a tab or a newline: " + values);
    }
    if (broken != null) {
      throw new FatalJobException(file + " could not be repaired after a failed write; run the job again to resume", broken);
    }
    if (isDone(index)) {
      return; // already written: never twice
    }
    ByteBuffer line = ByteBuffer.wrap(line(index, values).getBytes(StandardCharsets.UTF_8));
    long start = channel.size();
    try {
      long position = start;
      while (line.hasRemaining()) {
        position += channel.write(line, position);
      }
      if (++sinceSync >= syncEvery) {
        channel.force(false);
        sinceSync = 0;
      }
    } catch (IOException e) {
      try {
        channel.truncate(start);
      } catch (IOException suppressed) {
        e.addSuppressed(suppressed);
        broken = e;
      }
      throw e;
    }
    done.set(Math.toIntExact(index));
  }

  /** Forces what is left to disk and releases the file. */
  @Override
  public void close() throws IOException {
    synchronized (OPEN) {
      if (!channel.isOpen()) {
        return;
      }
      try {
        channel.force(false);
        lock.release();
      } finally {
        OPEN.remove(key, this);
        channel.close();
      }
    }
  }
}
