package dev.xlaactors.runtime;

import static dev.xlaactors.nativebridge.pjrt.global.Pjrt.*;

import dev.xlaactors.error.ErrorCode;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.PointerPointer;

/**
 * One call of a host callback from inside a running program: the XLA thread that made it is blocked
 * until {@link #complete} or {@link #fail} answers it (or the native backstop expires). Answering twice,
 * or after the call gave up waiting, is harmless: the late answer is dropped and nothing is written.
 *
 * <p>Only the runtime creates host calls (a call is named by an unguessable native tag, and no public
 * constructor lets code outside the runtime forge one). Thread-safe; immutable but for whether it was answered.
 */
public final class HostCall {
  /** The largest input a host callback can be given, in bytes: one host tensor's ({@link HostTensor#MAX_BYTES}). */
  public static final long MAX_INPUT_BYTES = HostTensor.MAX_BYTES;

  /** Why input {@code index} of {@code type} cannot reach callback {@code callback}: one message in every run mode. */
  public static String inputTooLarge(String callback, int index, TensorType type) {
    return "host callback '" + callback + "': input " + index + " is " + type + " (" + type.byteSize()
        + " bytes); a callback input holds at most " + MAX_INPUT_BYTES + " bytes: pass it in smaller pieces";
  }

  static {
    NativeLibrary.load();
  }

  private final long runId;
  private final long tag;
  private final String callbackName;
  private final List<HostTensor> inputs;
  private final List<TensorType> expectedOutputs;
  private final JavaAnswer javaAnswer; // null: a compiled program waits for the answer in the native bridge
  private final AtomicBoolean answered = new AtomicBoolean();

  /** Receives the answer of a host call that Java made (a segmented run), rather than a running program. */
  public interface JavaAnswer {
    /** The call's outputs (already checked against its template); false if it was already answered. */
    boolean complete(List<HostTensor> outputs);

    /** The call failed; false if it was already answered. */
    boolean fail(ErrorCode code, String message);
  }

  HostCall(long runId, long tag, String callbackName, List<HostTensor> inputs, List<TensorType> expectedOutputs) {
    this(runId, tag, callbackName, inputs, expectedOutputs, null);
  }

  private HostCall(long runId, long tag, String callbackName, List<HostTensor> inputs, List<TensorType> expectedOutputs,
      JavaAnswer javaAnswer) {
    this.javaAnswer = javaAnswer;
    this.runId = runId;
    this.tag = tag;
    this.callbackName = Objects.requireNonNull(callbackName, "callbackName");
    this.inputs = List.copyOf(inputs);
    this.expectedOutputs = List.copyOf(expectedOutputs);
  }

  /**
   * A call that Java makes between the stages of a segmented run: answered through {@code answer}, never
   * through the native bridge, so it can name no native call. {@code tag} must be negative (native tags
   * are positive) and unique within the run.
   */
  public static HostCall madeByJava(long runId, long tag, String callbackName, List<HostTensor> inputs,
      List<TensorType> expectedOutputs, JavaAnswer answer) {
    if (tag >= 0) {
      throw new IllegalArgumentException("a Java-made host call needs a negative tag, got " + tag);
    }
    return new HostCall(runId, tag, callbackName, inputs, expectedOutputs, Objects.requireNonNull(answer, "answer"));
  }

  /** The run the call belongs to. */
  public long runId() {
    return runId;
  }

  /** Identifies the waiting call in the native bridge. */
  public long tag() {
    return tag;
  }

  /** The {@code callback} attribute of the program's custom call. */
  public String callbackName() {
    return callbackName;
  }

  /**
   * Copies of the call's inputs, owned by Java (safe to keep after the call). Large ones hold pooled
   * memory (see {@link HostMemoryPool}): a function that is done with an input may close it to give its
   * memory back at once, but not one it returns as an output, which must stay open until the call is
   * answered ({@link #complete} copies it before returning).
   */
  public List<HostTensor> inputs() {
    return inputs;
  }

  /** The result types the program declared for this call. */
  public List<TensorType> expectedOutputs() {
    return expectedOutputs;
  }

  /**
   * What is wrong with {@code outputs} as this call's answer (count, null, closed, dtype, shape, a
   * borrowed input whose call has ended), or empty when
   * they match what the program expects: e.g. {@code callback 'tokenize' returned f32[3] as output 0,
   * expected f32[2]}.
   */
  public Optional<String> mismatch(List<HostTensor> outputs) {
    if (outputs == null) {
      return Optional.of("callback '" + callbackName + "' returned null, expected " + expectedOutputs);
    }
    if (outputs.size() != expectedOutputs.size()) {
      return Optional.of(
          "callback '" + callbackName + "' returned " + outputs.size() + " tensor(s), expected "
              + expectedOutputs.size() + " " + expectedOutputs);
    }
    for (int i = 0; i < outputs.size(); i++) {
      HostTensor out = outputs.get(i);
      if (out == null) {
        return Optional.of(
            "callback '" + callbackName + "' returned null as output " + i + ", expected " + expectedOutputs.get(i));
      }
      if (out.isClosed()) {
        return Optional.of(
            "callback '" + callbackName + "' returned a closed tensor " + out.type() + " as output " + i
                + ": close a tensor only after the call is answered, or return a copy");
      }
      if (!out.type().equals(expectedOutputs.get(i))) {
        return Optional.of(
            "callback '" + callbackName + "' returned " + out.type() + " as output " + i + ", expected "
                + expectedOutputs.get(i));
      }
      String unreadable = out.isBorrowed() ? out.unreadableReason("answer a host call with") : null;
      if (unreadable != null) {
        return Optional.of("callback '" + callbackName + "': output " + i + " can no longer be read: " + unreadable);
      }
    }
    return Optional.empty();
  }

  /**
   * Answers the call with {@code outputs}, copying them into XLA's result buffers before it returns (so
   * the outputs, and inputs returned as outputs, may be closed as soon as it has). Outputs that do not
   * match (see {@link #mismatch}) fail the call with that message instead. Returns false when the call
   * was no longer waiting.
   */
  public boolean complete(List<HostTensor> outputs) {
    answered.set(true);
    Optional<String> problem = mismatch(outputs);
    if (problem.isPresent()) {
      return fail(ErrorCode.INVALID_ARGUMENT, problem.get());
    }
    if (javaAnswer != null) {
      return javaAnswer.complete(outputs);
    }
    int n = outputs.size();
    HostTensor.Hold[] holds = new HostTensor.Hold[n]; // no output's memory goes back while it is copied
    List<HostTensor> copies = new ArrayList<>(0);
    int ownBorrows = 0; // holds on this call's own inputs, which an in-place answer must not wait for
    try (PointerPointer<Pointer> data = new PointerPointer<>(Math.max(1, n));
        LongPointer sizes = new LongPointer(Math.max(1, n))) {
      for (int i = 0; i < n; i++) {
        HostTensor out = outputs.get(i);
        try {
          if (out.isBorrowed() && !HostCallBridge.isInputOf(out, tag)) {
            // Another call's input: copied first, so this answer holds nothing of that call while it
            // may wait (that call's own in-place answer could be waiting for this one's holds).
            out = out.copy();
            copies.add(out);
          }
          holds[i] = out.hold("answer a host call with");
        } catch (IllegalStateException unreadable) { // closed, or a borrowed input whose call has ended
          return fail(
              ErrorCode.INVALID_ARGUMENT,
              "callback '" + callbackName + "': output " + i + " can no longer be read: " + unreadable.getMessage());
        }
        if (out.isBorrowed()) {
          ownBorrows++;
        }
        data.put(i, new Pointer(holds[i].data()));
        sizes.put(i, out.type().byteSize());
      }
      // A size mismatch fails the call natively; the message reaches the run, so nothing to read here.
      return XlaActors_CompleteHostCall(tag, data, sizes, n, ownBorrows, (org.bytedeco.javacpp.BytePointer) null, 0)
          == 1;
    } finally {
      for (HostTensor.Hold hold : holds) {
        if (hold != null) {
          hold.close();
        }
      }
      copies.forEach(HostTensor::close);
    }
  }

  /**
   * Fails the call: the run aborts with {@code message} (null gives a generic message). False when the
   * call was no longer waiting.
   */
  public boolean fail(ErrorCode code, String message) {
    answered.set(true);
    if (javaAnswer != null) {
      return javaAnswer.fail(code == null ? ErrorCode.UNKNOWN : code, message);
    }
    byte[] text = (message == null ? "" : message).getBytes(StandardCharsets.UTF_8);
    try (BytePointer native_ = PjrtApi.bytes(text)) {
      int status = code == null ? ErrorCode.UNKNOWN.ordinal() : code.ordinal();
      return XlaActors_FailHostCall(tag, status, native_, text.length) == 1;
    }
  }

  /**
   * Whether Java has answered this call ({@link #complete} or {@link #fail} was called), whatever the
   * outcome. A call of a run that has ended and was never answered was given up by the native wait's
   * backstop.
   */
  public boolean answered() {
    return answered.get();
  }

  /**
   * How long an XLA thread that made a host call spins, checking for the answer, before it sleeps (zero:
   * it sleeps at once). When answers come within microseconds, a short spin saves the thread's wake-up,
   * which on a virtual machine can cost 50 us; it burns that much CPU when they do not. Process-wide.
   */
  public static void setAnswerSpin(java.time.Duration spin) {
    XlaActors_SetHostCallSpinNanos(Math.max(0, spin.toNanos()));
  }

  /**
   * Host calls waiting for an answer right now, across all runs of the process. A call stops counting the
   * moment it is answered, failed ({@link #fail}) or given up by the native backstop, not when its XLA
   * thread gets round to returning: so a run that a supervisor failed holds no pending call by the time
   * its caller learns of the failure.
   */
  public static int pendingCount() {
    return Math.toIntExact(XlaActors_PendingHostCallCount());
  }

  @Override
  public String toString() {
    return "HostCall(run " + runId + ", '" + callbackName + "', " + inputs.size() + " input(s))";
  }
}
