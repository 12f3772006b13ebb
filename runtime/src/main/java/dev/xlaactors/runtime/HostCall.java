package dev.xlaactors.runtime;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.nativebridge.PjrtNative;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * One call of a host callback from inside a running program: the XLA thread that made it is blocked
 * until {@link #complete} or {@link #fail} answers it (or the native backstop expires). Answering twice,
 * or after the call gave up waiting, is harmless: the late answer is dropped and nothing is written.
 *
 * @param runId the run the call belongs to
 * @param tag identifies the waiting call in the native bridge
 * @param callbackName the {@code callback} attribute of the program's custom call
 * @param inputs copies of the call's inputs, owned by Java (safe to keep after the call)
 * @param expectedOutputs the result types the program declared for this call
 * @param javaAnswer where the answer goes when Java made the call (a segmented run), or null when a
 *     compiled program waits for it in the native bridge
 */
public record HostCall(
    long runId, long tag, String callbackName, List<HostTensor> inputs, List<TensorType> expectedOutputs,
    JavaAnswer javaAnswer) {

  /** Receives the answer of a host call that Java made, rather than a running program. */
  public interface JavaAnswer {
    /** The call's outputs (already checked against its template); false if it was already answered. */
    boolean complete(List<HostTensor> outputs);

    /** The call failed; false if it was already answered. */
    boolean fail(ErrorCode code, String message);
  }

  /** A call a compiled program made, answered through the native bridge. */
  public HostCall(long runId, long tag, String callbackName, List<HostTensor> inputs, List<TensorType> expectedOutputs) {
    this(runId, tag, callbackName, inputs, expectedOutputs, null);
  }

  public HostCall {
    Objects.requireNonNull(callbackName, "callbackName");
    inputs = List.copyOf(inputs);
    expectedOutputs = List.copyOf(expectedOutputs);
  }

  /**
   * What is wrong with {@code outputs} as this call's answer (count, null, dtype, shape), or empty when
   * they match what the program expects: e.g. {@code callback 'tokenize' returned f32[3] as output 0,
   * expected f32[2]}.
   */
  public Optional<String> mismatch(List<HostTensor> outputs) {
    if (outputs == null) {
      return Optional.of("callback '" + callbackName + "' returned null, expected " + expectedOutputs);
    }
    if (outputs.size() != expectedOutputs.size()) {
      return Optional.of(
          "callback '"
              + callbackName
              + "' returned "
              + outputs.size()
              + " tensor(s), expected "
              + expectedOutputs.size()
              + " "
              + expectedOutputs);
    }
    for (int i = 0; i < outputs.size(); i++) {
      HostTensor out = outputs.get(i);
      if (out == null) {
        return Optional.of(
            "callback '" + callbackName + "' returned null as output " + i + ", expected " + expectedOutputs.get(i));
      }
      if (!out.type().equals(expectedOutputs.get(i))) {
        return Optional.of(
            "callback '"
                + callbackName
                + "' returned "
                + out.type()
                + " as output "
                + i
                + ", expected "
                + expectedOutputs.get(i));
      }
    }
    return Optional.empty();
  }

  /**
   * Answers the call with {@code outputs}, copying them into XLA's result buffers. Outputs that do not
   * match (see {@link #mismatch}) fail the call with that message instead. Returns false when the call
   * was no longer waiting.
   */
  public boolean complete(List<HostTensor> outputs) {
    Optional<String> problem = mismatch(outputs);
    if (problem.isPresent()) {
      return fail(ErrorCode.INVALID_ARGUMENT, problem.get());
    }
    if (javaAnswer != null) {
      return javaAnswer.complete(outputs);
    }
    ByteBuffer[] data = new ByteBuffer[outputs.size()];
    for (int i = 0; i < data.length; i++) {
      data[i] = outputs.get(i).nativeData();
    }
    return PjrtNative.completeHostCall(tag, data);
  }

  /** Fails the call: the run aborts with {@code message}. False when the call was no longer waiting. */
  public boolean fail(ErrorCode code, String message) {
    if (javaAnswer != null) {
      return javaAnswer.fail(code, message);
    }
    return PjrtNative.failHostCall(tag, code.ordinal(), message);
  }

  /** Host calls waiting for an answer right now, across all runs of the process. */
  public static int pendingCount() {
    return PjrtNative.pendingHostCallCount();
  }
}
