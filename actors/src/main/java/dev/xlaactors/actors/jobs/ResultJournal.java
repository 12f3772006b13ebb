package dev.xlaactors.actors.jobs;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.BitSet;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A batch job's output file, which is also its journal: one line per finished item, {@code
 * index<TAB>values}, appended in the order items finish. Opening it reads the lines already there (the
 * items a previous run finished), cuts off a partial last line (a run killed in the middle of a write),
 * and locks the file so two processes cannot write it at once. Each appended line is forced to disk every
 * {@code syncEvery} items, so after a crash the file holds every finished item exactly once, and a new run
 * computes only the others.
 *
 * <p>Not thread-safe: a job uses it from one item at a time.
 */
public final class ResultJournal implements AutoCloseable {
  private final Path file;
  private final FileChannel channel;
  private final FileLock lock;
  private final BitSet done = new BitSet();
  private final int syncEvery;
  private final long recovered;
  private final long truncatedBytes;
  private int sinceSync;

  private ResultJournal(Path file, FileChannel channel, FileLock lock, int syncEvery, long truncatedBytes, Map<Long, String> lines) {
    this.file = file;
    this.channel = channel;
    this.lock = lock;
    this.syncEvery = syncEvery;
    this.truncatedBytes = truncatedBytes;
    lines.keySet().forEach(i -> done.set(Math.toIntExact(i)));
    this.recovered = done.cardinality();
  }

  /**
   * Opens (or creates) {@code file}. Throws {@link FatalJobException} when another process holds it or
   * when a complete line is not {@code index<TAB>values}: then it is not this job's output.
   */
  public static ResultJournal open(Path file, int syncEvery) throws IOException {
    Path parent = file.toAbsolutePath().getParent();
    if (parent != null) {
      Files.createDirectories(parent);
    }
    FileChannel channel = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE);
    try {
      FileLock lock;
      try {
        lock = channel.tryLock();
      } catch (java.nio.channels.OverlappingFileLockException e) {
        lock = null; // held by another job of this JVM
      }
      if (lock == null) {
        throw new FatalJobException(file + " is being written by another job or process");
      }
      byte[] bytes = Files.readAllBytes(file);
      int end = bytes.length;
      while (end > 0 && bytes[end - 1] != '\n') {
        end--; // a partial last line: the previous run was killed while writing it
      }
      if (end < bytes.length) {
        channel.truncate(end);
        channel.force(true);
      }
      Map<Long, String> lines = parse(file, new String(bytes, 0, end, StandardCharsets.UTF_8));
      return new ResultJournal(file, channel, lock, syncEvery, bytes.length - end, lines);
    } catch (IOException | RuntimeException e) {
      channel.close();
      throw e;
    }
  }

  /** The complete lines of an output file by index (for checking a job's output; the file is not locked). */
  public static Map<Long, String> read(Path file) throws IOException {
    if (!Files.exists(file)) {
      return Map.of();
    }
    String text = Files.readString(file);
    return parse(file, text.substring(0, text.lastIndexOf('\n') + 1));
  }

  private static Map<Long, String> parse(Path file, String text) {
    Map<Long, String> lines = new LinkedHashMap<>();
    int lineNumber = 0;
    for (String line : text.split("\n")) {
      lineNumber++;
      if (line.isEmpty()) {
        continue;
      }
      int tab = line.indexOf('\t');
      try {
        long index = Long.parseLong(line.substring(0, tab));
        if (index < 0 || lines.putIfAbsent(index, line.substring(tab + 1)) != null) {
          throw new FatalJobException(file + ":" + lineNumber + ": index " + index + " is negative or appears twice");
        }
      } catch (NumberFormatException | StringIndexOutOfBoundsException e) {
        throw new FatalJobException(file + ":" + lineNumber + " is not 'index<TAB>values': " + line, e);
      }
    }
    return lines;
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
   * Appends {@code index<TAB>values} and forces it to disk if {@code syncEvery} items have been appended
   * since the last force. If the write fails half way, the partial line is cut off again before the
   * exception is thrown, so a retry cannot leave a broken line behind.
   */
  public void append(long index, String values) throws IOException {
    if (values.indexOf('\n') >= 0 || values.indexOf('\t') >= 0) {
      throw new FatalJobException("the values of item " + index + " contain a tab or a newline: " + values);
    }
    if (isDone(index)) {
      return; // already written: never twice
    }
    ByteBuffer line = ByteBuffer.wrap((index + "\t" + values + "\n").getBytes(StandardCharsets.UTF_8));
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
      }
      throw e;
    }
    done.set(Math.toIntExact(index));
  }

  /** Forces what is left to disk and releases the file. */
  @Override
  public void close() throws IOException {
    if (!channel.isOpen()) {
      return;
    }
    try {
      channel.force(false);
      lock.release();
    } finally {
      channel.close();
    }
  }
}
