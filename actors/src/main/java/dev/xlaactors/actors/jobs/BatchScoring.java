package dev.xlaactors.actors.jobs;

import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostTensor;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.OptionalLong;
import java.util.function.Function;
import java.util.stream.Collectors;

/**
 * Batch scoring of a dataset: items 0 to count-1, each item's inputs made by an {@link ItemSource}, the
 * step's outputs formatted as one line of the output file (a {@link ResultJournal}) and then handed to an
 * optional {@link ItemSink}. Resumable: items already in the output file are skipped, so running the same
 * job again after its JVM was killed finishes the rest and the file holds every item exactly once.
 */
public final class BatchScoring implements JobWork {
  private final long count;
  private final ItemSource source;
  private final Path output;
  private final int syncEvery;
  private final Function<List<HostTensor>, String> format;
  private final ItemSink sink;
  private ResultJournal journal;

  private BatchScoring(
      long count, ItemSource source, Path output, int syncEvery, Function<List<HostTensor>, String> format, ItemSink sink) {
    if (count < 0 || count > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("count must be in [0, " + Integer.MAX_VALUE + "], got " + count);
    }
    this.count = count;
    this.source = Objects.requireNonNull(source, "source");
    this.output = Objects.requireNonNull(output, "output");
    this.syncEvery = syncEvery;
    this.format = Objects.requireNonNull(format, "format");
    this.sink = Objects.requireNonNull(sink, "sink");
  }

  /**
   * Scores items 0 to {@code count}-1 into {@code output}, each line holding the outputs as {@link
   * #formatValues}; forced to disk every {@code settings.syncEvery()} items.
   */
  public static BatchScoring create(long count, ItemSource source, Path output, JobSettings settings) {
    return new BatchScoring(count, source, output, settings.syncEvery(), BatchScoring::formatValues, (i, out) -> {});
  }

  /** This job with another line format (it must not produce tabs or newlines). */
  public BatchScoring withFormat(Function<List<HostTensor>, String> newFormat) {
    return new BatchScoring(count, source, output, syncEvery, newFormat, sink);
  }

  /** This job handing each item's outputs to {@code newSink} once they are in the file. */
  public BatchScoring withSink(ItemSink newSink) {
    return new BatchScoring(count, source, output, syncEvery, format, newSink);
  }

  /**
   * The default line format: each output's elements separated by commas, outputs separated by
   * semicolons; floats print in Java's shortest round-trip form, integers as integers.
   */
  public static String formatValues(List<HostTensor> outputs) {
    return outputs.stream().map(BatchScoring::formatTensor).collect(Collectors.joining(";"));
  }

  private static String formatTensor(HostTensor t) {
    DType d = t.dtype();
    if (d == DType.F64) {
      return Arrays.stream(t.toDoubleArray()).mapToObj(Double::toString).collect(Collectors.joining(","));
    }
    if (d == DType.F32 || d == DType.F16 || d == DType.BF16) {
      float[] v = t.toFloatArray();
      StringBuilder sb = new StringBuilder();
      for (int i = 0; i < v.length; i++) {
        sb.append(i == 0 ? "" : ",").append(v[i]);
      }
      return sb.toString();
    }
    if (d == DType.PRED) {
      boolean[] v = t.toBooleanArray();
      StringBuilder sb = new StringBuilder();
      for (int i = 0; i < v.length; i++) {
        sb.append(i == 0 ? "" : ",").append(v[i]);
      }
      return sb.toString();
    }
    return Arrays.stream(t.toLongArray()).mapToObj(Long::toString).collect(Collectors.joining(","));
  }

  /** The output file. */
  public Path output() {
    return output;
  }

  @Override
  public Plan open() throws Exception {
    journal = ResultJournal.open(output, syncEvery);
    long alreadyDone = 0;
    for (long i = 0; i < count; i++) {
      alreadyDone += journal.isDone(i) ? 1 : 0;
    }
    return new Plan(count, alreadyDone);
  }

  @Override
  public OptionalLong next(long previous) {
    for (long i = previous + 1; i < count; i++) {
      if (!journal.isDone(i)) {
        return OptionalLong.of(i);
      }
    }
    return OptionalLong.empty();
  }

  @Override
  public List<HostTensor> input(long item) throws Exception {
    return source.input(item);
  }

  @Override
  public boolean accept(long item, List<HostTensor> outputs) throws Exception {
    journal.append(item, format.apply(outputs));
    sink.accept(item, outputs);
    return true;
  }

  @Override
  public void close() throws java.io.IOException {
    if (journal != null) {
      journal.close();
    }
  }
}
