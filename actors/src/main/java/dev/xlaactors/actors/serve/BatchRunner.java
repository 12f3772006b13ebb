package dev.xlaactors.actors.serve;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.RunHandle;
import dev.xlaactors.actors.serve.BatchScheduler.Batch;
import dev.xlaactors.actors.serve.BatchScheduler.Request;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.model.Argument;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.BiConsumer;
import java.util.function.Supplier;

/**
 * Runs the batches of a {@link ModelServer}'s {@link BatchedModel}: checks a request's inputs against the
 * model's, copies the requests' inputs into the batch's tensors (pooled memory, the padding rows zero),
 * starts the run through the {@link CallbackRuntime}, splits the batch's outputs into each request's rows,
 * and frees the batch's inputs. It decides nothing about which requests run together (that is the {@link
 * BatchScheduler}) and answers no one (that is the server): a request whose input cannot be read is handed
 * back to the caller. Called from the server's actor only; the runs themselves run elsewhere.
 */
final class BatchRunner {

  /** A request of the batch being assembled could not be read (it was handed back as invalid): queue the others again. */
  static final class UnreadableInput extends RuntimeException {
    UnreadableInput() {
      super(null, null, false, false);
    }
  }

  private final BatchedModel model;
  private final CallbackRuntime callbacks;

  BatchRunner(BatchedModel model, CallbackRuntime callbacks) {
    this.model = model;
    this.callbacks = callbacks;
  }

  /**
   * Why {@code inputs} cannot be one example of each model input (naming what is wrong, expected vs got),
   * or null; {@code which} names the request in the message (built only for a message: this runs per request).
   */
  String invalidInputs(Supplier<String> which, List<HostTensor> inputs) {
    List<TensorType> expected = model.requestInputTypes();
    if (inputs == null || inputs.size() != expected.size()) {
      return which.get() + " takes " + expected.size() + " input(s) " + BatchedModel.describe(model.inputNames(), expected) + ", got "
          + (inputs == null ? "null" : inputs.size());
    }
    for (int i = 0; i < expected.size(); i++) {
      HostTensor t = inputs.get(i);
      if (t == null) {
        return inputName(which, i) + " is null, expected a tensor " + expected.get(i);
      }
      if (!t.type().equals(expected.get(i))) {
        return inputName(which, i) + ": expected " + expected.get(i) + " (one example: the model's input without its batch "
            + "dimension), got " + t.type();
      }
      if (t.isClosed()) {
        return inputName(which, i) + " is closed: keep a request's tensors open until it is answered";
      }
      if (t.isBorrowed()) {
        return inputName(which, i) + " is a callback's borrowed input, valid only during that call: pass t.copy()";
      }
    }
    return null;
  }

  private String inputName(Supplier<String> which, int i) {
    return which.get() + ": input " + i + " '" + model.inputNames().get(i) + "'";
  }

  /**
   * The batch's inputs: each request's tensor copied into its row, the padding rows (and those of requests
   * answered meanwhile) zero; the tensors are kept in the batch until {@link #closeInputs}. A request whose
   * tensor cannot be read (closed since it arrived) goes to {@code unreadable} with its error, and then,
   * after every row was tried, this throws {@link UnreadableInput}: the caller queues the others again.
   * Any other failure (no memory for the batch, say) is thrown as it is, the inputs closed.
   */
  List<Argument> assemble(Batch batch, BiConsumer<Request, XlaException> unreadable) {
    List<TensorType> types = model.requestInputTypes();
    List<Argument> arguments = new ArrayList<>(types.size());
    boolean[] failed = {false};
    try {
      for (int i = 0; i < types.size(); i++) {
        TensorType row = types.get(i);
        int input = i;
        int rowBytes = Math.toIntExact(row.byteSize());
        long[] dims = new long[row.shape().rank() + 1];
        dims[0] = batch.size;
        System.arraycopy(row.shape().dims(), 0, dims, 1, row.shape().rank());
        // Pooled memory, given back when the batch is done: no fresh direct buffer (allocated, zeroed, freed
        // only by a GC) per batch, and the CPU plugin uploads it in place.
        HostTensor tensor = HostTensor.filled(TensorType.of(row.dtype(), dims), data -> {
          for (int r = 0; r < batch.rows.size(); r++) {
            Request p = batch.rows.get(r);
            if (p.answered) {
              continue; // its row stays zero, as the padding
            }
            try {
              data.put(r * rowBytes, p.inputs.get(input).data(), 0, rowBytes);
            } catch (IllegalStateException e) {
              unreadable.accept(p, new InvalidArgumentException("request '" + p.id + "' to model '" + model.name() + "': input "
                  + input + " '" + model.inputNames().get(input) + "' could not be read (" + e.getMessage()
                  + "): keep a request's tensors open until it is answered"));
              failed[0] = true;
            }
          }
        });
        batch.inputs.add(tensor);
        arguments.add(Argument.of(tensor));
      }
    } catch (RuntimeException e) {
      closeInputs(batch);
      throw e;
    }
    if (failed[0]) {
      closeInputs(batch);
      throw new UnreadableInput();
    }
    return arguments;
  }

  /** Starts the batch's run at its compiled size; throws when the runtime refuses it (its run queue is full, say). */
  RunHandle start(Batch batch, List<Argument> arguments) {
    batch.run = callbacks.start(model.model(batch.size), arguments);
    return batch.run;
  }

  /** Cancels the batch's run, if it started one; its result then comes at once, its end when XLA is done. */
  void cancel(Batch batch, String reason) {
    if (batch.run != null) {
      batch.run.cancel(reason);
    }
  }

  /** Gives back the batch's input memory (a run still reading a tensor holds it until done). */
  void closeInputs(Batch batch) {
    batch.inputs.forEach(HostTensor::close);
    batch.inputs.clear();
  }

  /**
   * Each row's answer: for row r (in the batch's order) the list of its outputs, or null for a request
   * answered meanwhile. Each answer's tensors are copies of its rows in pooled memory ({@link
   * HostTensor#filled}, every size): the asker closes them once the answer is written, and the next batch's
   * rows reuse those blocks instead of allocating direct memory per batch. Closes {@code outputs}. Without
   * memory for the copies it throws an {@link XlaException} (RESOURCE_EXHAUSTED): the caller fails this
   * batch, not the server.
   */
  List<List<HostTensor>> split(List<HostTensor> outputs, Batch batch) {
    List<List<HostTensor>> byOutput;
    try {
      byOutput = rows(outputs, batch);
    } catch (RuntimeException | OutOfMemoryError e) { // more than 2 GiB (ArithmeticException), or no direct memory left
      outputs.forEach(HostTensor::close);
      throw new XlaException(ErrorCode.RESOURCE_EXHAUSTED, "no memory for the answers of batch " + batch.number + " of model '"
          + model.name() + "' (" + e + "): raise -XX:MaxDirectMemorySize, or lower max-batch-size", e);
    }
    List<List<HostTensor>> byRow = new ArrayList<>(batch.rows.size());
    for (int r = 0; r < batch.rows.size(); r++) {
      if (batch.rows.get(r).answered) {
        byRow.add(null);
        continue;
      }
      List<HostTensor> mine = new ArrayList<>(outputs.size());
      for (List<HostTensor> rows : byOutput) {
        mine.add(rows.get(r));
      }
      byRow.add(List.copyOf(mine));
    }
    outputs.forEach(HostTensor::close);
    return byRow;
  }

  /** For each output, the rows of the batch's requests still waiting (null for the others), each a pooled copy. */
  private static List<List<HostTensor>> rows(List<HostTensor> outputs, Batch batch) {
    List<List<HostTensor>> all = new ArrayList<>(outputs.size());
    try {
      for (HostTensor batched : outputs) {
        long[] dims = batched.shape().dims();
        TensorType type = TensorType.of(batched.dtype(), Arrays.copyOfRange(dims, 1, dims.length));
        int rowBytes = Math.toIntExact(type.byteSize());
        ByteBuffer from = batched.data();
        List<HostTensor> rows = new ArrayList<>(batch.rows.size());
        all.add(rows);
        for (int r = 0; r < batch.rows.size(); r++) {
          if (batch.rows.get(r).answered) {
            rows.add(null);
            continue;
          }
          int at = Math.multiplyExact(r, rowBytes);
          rows.add(HostTensor.filled(type, row -> row.put(0, from, at, rowBytes)));
        }
      }
    } catch (RuntimeException | Error e) { // the rows copied so far go back before the batch fails
      all.forEach(rows -> rows.forEach(t -> {
        if (t != null) {
          t.close();
        }
      }));
      throw e;
    }
    return all;
  }
}
