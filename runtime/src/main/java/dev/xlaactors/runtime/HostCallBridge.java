package dev.xlaactors.runtime;

import static dev.xlaactors.nativebridge.pjrt.global.Pjrt.*;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.nativebridge.pjrt.XlaActors_HostCall;
import dev.xlaactors.nativebridge.pjrt.XlaActors_HostCallSink;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Predicate;
import java.util.function.ToLongFunction;
import org.bytedeco.javacpp.Pointer;

/**
 * The bridge's one host-call sink: the native handler describes each call (XLA's input pointers, types,
 * dims) to this function on the XLA thread that made it; it copies the inputs into Java-owned tensors
 * (pooled memory, see {@link HostMemoryPool}), or lends XLA's buffers as borrowed tensors when the run
 * says so for that callback, builds a {@link HostCall} and hands it to the run's {@link HostCallSink}.
 * Runs are told apart by a sink id, never by a pointer to a Java object, and the function object is held
 * by a static field so the plugin can call it for as long as the process lives.
 */
final class HostCallBridge {
  static {
    NativeLibrary.load(); // before CALLBACK, the first JavaCPP object of this class
  }

  /**
   * A registered run sink and, per callback name, how long the native side waits for an answer and
   * whether the call's inputs are borrowed.
   */
  private record Registration(HostCallSink sink, ToLongFunction<String> backstopMillis, Predicate<String> borrowsInputs) {}

  private static final Map<Long, Registration> SINKS = new ConcurrentHashMap<>();
  private static final AtomicLong NEXT_ID = new AtomicLong(1);

  private static final XlaActors_HostCallSink CALLBACK =
      new XlaActors_HostCallSink() {
        @Override
        public long call(XlaActors_HostCall call) {
          try {
            return dispatch(call);
          } catch (Throwable t) {
            // Nothing may unwind into XLA: fail the call with what went wrong.
            fail(call.tag(), ErrorCode.INTERNAL, "host call could not be dispatched: " + t);
            return 0;
          }
        }
      };

  static {
    XlaActors_SetHostCallSink(CALLBACK);
  }

  private HostCallBridge() {}

  /**
   * Registers {@code sink}, whose calls to a callback named {@code n} wait natively at most {@code
   * backstopMillis.applyAsLong(n)} ms (at least 1) and get XLA's input buffers when {@code
   * borrowsInputs.test(n)}; returns its id for XlaActors_RunContext_Create.
   */
  static long register(HostCallSink sink, ToLongFunction<String> backstopMillis, Predicate<String> borrowsInputs) {
    long id = NEXT_ID.getAndIncrement();
    SINKS.put(id, new Registration(sink, backstopMillis, borrowsInputs));
    return id;
  }

  static void unregister(long id) {
    SINKS.remove(id);
  }

  private static long dispatch(XlaActors_HostCall call) {
    long tag = call.tag();
    Registration registration = SINKS.get(call.sink_id());
    String name = PjrtApi.utf8(call.callback(), call.callback_size());
    if (registration == null) {
      fail(tag, ErrorCode.FAILED_PRECONDITION, "host callback '" + name + "': its run has ended");
      return 0;
    }
    boolean borrow = registration.borrowsInputs().test(name);
    int numInputs = Math.toIntExact(call.num_inputs());
    List<HostTensor> inputs = new ArrayList<>(numInputs);
    long dimOffset = 0;
    for (int i = 0; i < numInputs; i++) {
      int rank = Math.toIntExact(call.input_ranks().get(i));
      TensorType type = typeOf(call.input_types().get(i), call.input_dims(), dimOffset, rank);
      dimOffset += rank;
      if (type.byteSize() > HostCall.MAX_INPUT_BYTES) {
        inputs.forEach(HostTensor::close);
        fail(tag, ErrorCode.RESOURCE_EXHAUSTED, HostCall.inputTooLarge(name, i, type));
        return 0;
      }
      if (borrow && type.byteSize() > 0) { // an empty input has nothing to lend
        ByteBuffer xlaBuffer = new Pointer(call.input_data(i)).capacity(type.byteSize()).asByteBuffer();
        inputs.add(HostTensor.borrowed(type, xlaBuffer, new BorrowedInput(tag, name, i)));
        continue;
      }
      // Every byte is copied over, so a pooled block need not be zeroed first.
      HostTensor tensor;
      try {
        tensor = HostTensor.callbackInput(type, name);
      } catch (XlaException e) { // direct memory refused: this call fails, the inputs copied so far go back
        inputs.forEach(HostTensor::close);
        fail(tag, e.code(), "host callback '" + name + "': input " + i + " (" + type + ") cannot be copied into Java: "
            + e.getMessage());
        return 0;
      }
      inputs.add(tensor);
      if (type.byteSize() > 0) {
        try (HostTensor.Hold hold = tensor.hold("copy a callback input into")) {
          Pointer.memcpy(new Pointer(hold.data()), call.input_data(i), type.byteSize());
        }
      }
    }
    int numOutputs = Math.toIntExact(call.num_outputs());
    List<TensorType> outputs = new ArrayList<>(numOutputs);
    dimOffset = 0;
    for (int i = 0; i < numOutputs; i++) {
      int rank = Math.toIntExact(call.output_ranks().get(i));
      outputs.add(typeOf(call.output_types().get(i), call.output_dims(), dimOffset, rank));
      dimOffset += rank;
    }
    // The backstop is read before the sink sees the call: once the sink returns, the call may already
    // have been answered, and the run (with whatever the backstop function reads) may have moved on.
    long backstopMillis = Math.max(1, registration.backstopMillis().applyAsLong(name));
    registration.sink().accept(new HostCall(call.run_id(), tag, name, inputs, outputs));
    return backstopMillis;
  }

  /** Whether {@code tensor} is a borrowed input of host call {@code tag} (XLA's own buffer of that call). */
  static boolean isInputOf(HostTensor tensor, long tag) {
    return tensor.lender() instanceof BorrowedInput input && input.tag() == tag;
  }

  /** Input {@code index} of host call {@code tag}: XLA's buffer, lent by the waiting native handler. */
  private record BorrowedInput(long tag, String callback, int index) implements HostTensor.BorrowedMemory {
    @Override
    public boolean enter() {
      return XlaActors_BorrowHostCallInputs(tag) == 1;
    }

    @Override
    public void exit() {
      XlaActors_ReturnHostCallInputs(tag);
    }

    @Override
    public String owner() {
      return "input " + index + " of host callback '" + callback + "'";
    }
  }

  private static TensorType typeOf(int pjrtType, org.bytedeco.javacpp.LongPointer dims, long offset, int rank) {
    long[] shape = new long[rank];
    for (int d = 0; d < rank; d++) {
      shape[d] = dims.get(offset + d);
    }
    return new TensorType(DType.fromPjrtType(pjrtType), Shape.of(shape));
  }

  private static void fail(long tag, ErrorCode code, String message) {
    byte[] text = message.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    try (org.bytedeco.javacpp.BytePointer bytes = PjrtApi.bytes(text)) {
      XlaActors_FailHostCall(tag, code.ordinal(), bytes, text.length);
    }
  }
}
