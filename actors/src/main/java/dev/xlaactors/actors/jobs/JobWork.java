package dev.xlaactors.actors.jobs;

import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.model.Argument;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;

/**
 * What an {@link InferenceJob} computes, item by item: which items there are, each item's inputs to the
 * compiled step, and what happens to the step's outputs. {@link BatchScoring} (a dataset, written to a
 * resumable output file) and {@link Generation} (an autoregressive loop) are the two provided.
 *
 * <p>The job calls these methods one at a time, never concurrently, each call seeing the effects of the
 * previous ones; all but {@link #next} run on the blocking run dispatcher, so they may do I/O. An
 * exception from {@link #input} or {@link #accept} fails the item's attempt like a failed step: it is
 * retried, unless it is fatal (see {@link FatalJobException}).
 */
public interface JobWork extends AutoCloseable {

  /** How many items the job has, and how many of them a previous run of it already finished. */
  record Plan(long total, long alreadyDone) {}

  /** Called once, before any item: opens what the work needs (e.g. reads its output file). */
  Plan open() throws Exception;

  /** The item to do after {@code previous} (-1 at the start), or empty when every item is done. Cheap. */
  OptionalLong next(long previous);

  /** The step's inputs for {@code item}. */
  List<HostTensor> input(long item) throws Exception;

  /**
   * Takes the step's outputs for {@code item} (e.g. writes them durably). Returns false to end the job
   * successfully after this item (a generation's stop condition), true to go on.
   */
  boolean accept(long item, List<HostTensor> outputs) throws Exception;

  /**
   * The step's arguments for {@code item}: by default {@link #input} as host tensors. A work that keeps
   * state on the device (see {@link Generation#withDeviceState}) passes device buffers, donated or not.
   */
  default List<Argument> arguments(long item) throws Exception {
    return input(item).stream().map(Argument::of).toList();
  }

  /**
   * Whether the step's outputs stay on the device and go to {@link #acceptOnDevice} (default false: they
   * are downloaded and go to {@link #accept}).
   */
  default boolean outputsOnDevice() {
    return false;
  }

  /**
   * Takes the step's outputs left on the device (only when {@link #outputsOnDevice()}): the work owns the
   * buffers, to keep for the next item or close. By default downloads them, closes them and calls {@link
   * #accept}.
   */
  default boolean acceptOnDevice(long item, List<DeviceBuffer> outputs) throws Exception {
    List<HostTensor> host = new ArrayList<>(outputs.size());
    try {
      for (DeviceBuffer b : outputs) {
        host.add(b.toHost());
      }
    } finally {
      outputs.forEach(DeviceBuffer::close);
    }
    return accept(item, host);
  }

  /** Releases what {@link #open} opened; called once when the job ends, however it ends. */
  @Override
  void close() throws Exception;
}
