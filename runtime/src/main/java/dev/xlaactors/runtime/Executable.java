package dev.xlaactors.runtime;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.nativebridge.PjrtNative;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * A compiled program, ready to run many times, from many threads at once. Every run validates its
 * arguments against the program's parameter types in Java (count, dtype, shape) before anything reaches
 * the plugin.
 *
 * <p>Lifetime: this is the caller's view of a compiled program that the client's compile cache may
 * share with other callers; closing it releases only this view. It keeps its client alive.
 */
public final class Executable extends NativeHandle {
  private final LoadedProgram program;

  Executable(LoadedProgram program) {
    super(program.rawHandle(), program);
    this.program = program;
  }

  /** The types of the program's parameters, in order. */
  public List<TensorType> parameterTypes() {
    return program.signature().parameters();
  }

  /** The types of the program's outputs, in order (a tuple result is flattened). */
  public List<TensorType> outputTypes() {
    return program.outputTypes();
  }

  public XlaClient client() {
    return program.client();
  }

  /** Runs on device buffers; the caller owns (and closes) the returned buffers. */
  public List<DeviceBuffer> execute(DeviceBuffer... arguments) {
    return execute(Arrays.asList(arguments), null);
  }

  /**
   * Runs on device buffers with an optional per-run context that XLA FFI handlers can read (null for
   * none). Blocks until the run is complete.
   */
  public List<DeviceBuffer> execute(List<DeviceBuffer> arguments, RunContext context) {
    Objects.requireNonNull(arguments, "arguments");
    checkArguments(arguments);
    return executeChecked(arguments, context);
  }

  /** Runs on arguments already known to match the parameters and to live on this client. */
  private List<DeviceBuffer> executeChecked(List<DeviceBuffer> arguments, RunContext context) {
    List<NativeHandle.Lease> leases = new ArrayList<>(arguments.size() + 2);
    try {
      leases.add(lease());
      long[] handles = new long[arguments.size()];
      for (int i = 0; i < handles.length; i++) {
        NativeHandle.Lease l = arguments.get(i).leaseBuffer();
        leases.add(l);
        handles[i] = l.handle();
      }
      long contextHandle = 0;
      if (context != null) {
        NativeHandle.Lease l = context.leaseContext();
        leases.add(l);
        contextHandle = l.handle();
      }
      long[] outputs = PjrtNative.execute(leases.get(0).handle(), handles, contextHandle);
      List<DeviceBuffer> result = new ArrayList<>(outputs.length);
      for (int i = 0; i < outputs.length; i++) {
        result.add(new DeviceBuffer(program.client(), outputs[i], outputTypes().get(i)));
      }
      return result;
    } finally {
      leases.forEach(NativeHandle.Lease::close);
    }
  }

  /** Uploads host tensors, runs, downloads every output and frees the device buffers. */
  public List<HostTensor> run(HostTensor... inputs) {
    return run(Arrays.asList(inputs), null);
  }

  /** As {@link #run(HostTensor...)}, with a per-run context for FFI handlers (null for none). */
  public List<HostTensor> run(List<HostTensor> inputs, RunContext context) {
    Objects.requireNonNull(inputs, "inputs");
    checkTypes(inputs.stream().map(HostTensor::type).toList());
    List<DeviceBuffer> arguments = new ArrayList<>(inputs.size());
    List<DeviceBuffer> outputs = List.of();
    try {
      for (HostTensor input : inputs) {
        arguments.add(program.client().upload(input));
      }
      outputs = executeChecked(arguments, context); // checked above, uploaded to this client
      List<HostTensor> result = new ArrayList<>(outputs.size());
      for (DeviceBuffer output : outputs) {
        result.add(output.toHost());
      }
      return result;
    } finally {
      arguments.forEach(DeviceBuffer::close);
      outputs.forEach(DeviceBuffer::close);
    }
  }

  private void checkArguments(List<DeviceBuffer> arguments) {
    List<TensorType> types = new ArrayList<>(arguments.size());
    for (int i = 0; i < arguments.size(); i++) {
      DeviceBuffer b = Objects.requireNonNull(arguments.get(i), "argument " + i);
      if (b.client() != program.client()) {
        throw new InvalidArgumentException("argument " + i + " lives on another client than this executable");
      }
      types.add(b.type());
    }
    checkTypes(types);
  }

  private void checkTypes(List<TensorType> given) {
    List<TensorType> expected = parameterTypes();
    if (given.size() != expected.size()) {
      throw new InvalidArgumentException(
          "@main takes " + expected.size() + " argument(s) " + expected + ", got " + given.size() + " " + given);
    }
    for (int i = 0; i < given.size(); i++) {
      if (!given.get(i).equals(expected.get(i))) {
        throw new InvalidArgumentException(
            "argument " + i + " of @main: expected " + expected.get(i) + ", got " + given.get(i));
      }
    }
  }

  @Override
  protected void destroy(long handle) {
    // A view: the LoadedProgram parent owns the native executable.
  }

  @Override
  public String toString() {
    return "Executable(" + parameterTypes() + " -> " + outputTypes() + ")";
  }
}
