package dev.xlaactors.runtime;

import dev.xlaactors.nativebridge.PjrtNative;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * A compiled program loaded on a client: the native PJRT executable, its parameter types (read from the
 * program) and output types (reported by PJRT). Shared by the compile cache and every {@link Executable}
 * view of it; destroyed when the last of them is closed. Keeps its client alive. Thread-safe.
 */
final class LoadedProgram extends NativeHandle {
  private final XlaClient client;
  private final ProgramSignature signature;
  private final List<TensorType> outputTypes;

  LoadedProgram(XlaClient client, long handle, ProgramSignature signature) {
    super(handle, client);
    this.client = client;
    this.signature = signature;
    try {
      int[] types = PjrtNative.executableOutputTypes(handle);
      long[][] dims = PjrtNative.executableOutputDims(handle);
      List<TensorType> outputs = new ArrayList<>(types.length);
      for (int i = 0; i < types.length; i++) {
        outputs.add(new TensorType(DType.fromPjrtType(types[i]), Shape.of(dims[i])));
      }
      this.outputTypes = Collections.unmodifiableList(outputs);
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  XlaClient client() {
    return client;
  }

  ProgramSignature signature() {
    return signature;
  }

  List<TensorType> outputTypes() {
    return outputTypes;
  }

  @Override
  protected void destroy(long handle) {
    PjrtNative.executableDestroy(handle);
  }
}
