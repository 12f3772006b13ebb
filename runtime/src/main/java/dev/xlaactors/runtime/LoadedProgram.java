package dev.xlaactors.runtime;

import static dev.xlaactors.nativebridge.pjrt.global.Pjrt.*;

import dev.xlaactors.nativebridge.pjrt.PJRT_Executable;
import dev.xlaactors.nativebridge.pjrt.PJRT_Executable_Destroy_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Executable_NumOutputs_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Executable_OutputDimensions_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Executable_OptimizedProgram_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Executable_OutputElementTypes_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Executable_Serialize_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Program;
import dev.xlaactors.nativebridge.pjrt.PJRT_LoadedExecutable;
import dev.xlaactors.nativebridge.pjrt.PJRT_LoadedExecutable_AddressableDevices_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_LoadedExecutable_Destroy_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_LoadedExecutable_GetExecutable_Args;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * A compiled program loaded on a client: the native PJRT loaded executable and its executable view, its
 * parameter types (read from the program), output types (reported by PJRT) and addressable devices.
 * Shared by the compile cache and every {@link Executable} view of it; destroyed when the last of them is
 * closed. Keeps its client alive. Thread-safe.
 */
final class LoadedProgram extends NativeHandle {
  private final XlaClient client;
  private final PJRT_LoadedExecutable loaded;
  private final PJRT_Executable executable;
  private final ProgramSignature signature;
  private final boolean fromBytes;
  private final List<TensorType> outputTypes;
  private final List<Device> addressableDevices;
  private final int devicesAtOnce; // devices one execution spans: replicas x partitions (1 when portable)
  // Per output: whether its buffers can be read in place (see DeviceBuffer); -1 until the first download.
  private final int[] readableByOutput;
  // The parameters the compiled module aliases, read from it on first use (programs compiled from bytes).
  private volatile java.util.Set<Integer> compiledDonors;

  /**
   * Takes ownership of {@code loaded}; the caller holds a lease on {@code client}. {@code fromBytes}: the program
   * was compiled from bytes the runtime could not read, so its donatable parameters are read from the compiled
   * module (see {@link #donors()}).
   */
  LoadedProgram(XlaClient client, PJRT_LoadedExecutable loaded, ProgramSignature signature, boolean fromBytes) {
    this(client, loaded, executableView(client.api(), loaded), signature, fromBytes);
  }

  private LoadedProgram(XlaClient client, PJRT_LoadedExecutable loaded, PJRT_Executable executable,
      ProgramSignature signature, boolean fromBytes) {
    super(client, destroyer(client.api(), loaded, executable));
    this.client = client;
    this.loaded = loaded;
    this.executable = executable;
    this.signature = signature;
    this.fromBytes = fromBytes;
    try {
      this.outputTypes = readOutputTypes(client.api());
      List<Device> compiledFor = readAddressableDevices(client.api()); // none: portable, it runs on any
      this.addressableDevices = compiledFor.isEmpty() ? client.devices() : compiledFor;
      this.devicesAtOnce = Math.max(1, compiledFor.size());
      this.readableByOutput = new int[outputTypes.size()];
      java.util.Arrays.fill(readableByOutput, client.api().inPlaceReadPossible ? -1 : 0);
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  private static PJRT_Executable executableView(PjrtApi api, PJRT_LoadedExecutable loaded) {
    try (PJRT_LoadedExecutable_GetExecutable_Args args = new PJRT_LoadedExecutable_GetExecutable_Args()) {
      args.struct_size(PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE).loaded_executable(loaded);
      checkOrDestroy(api, api.loadedGetExecutable.call(args), loaded);
      return args.executable();
    }
  }

  /** Throws the error after destroying {@code loaded}, which nothing else owns yet. */
  private static void checkOrDestroy(
      PjrtApi api, dev.xlaactors.nativebridge.pjrt.PJRT_Error error, PJRT_LoadedExecutable loaded) {
    if (error != null) {
      RuntimeException failure = api.toException(error, PjrtApi.Failure.COMPILE, "PJRT_LoadedExecutable_GetExecutable");
      destroyer(api, loaded, null).destroy();
      throw failure;
    }
  }

  private static Destroyer destroyer(PjrtApi api, PJRT_LoadedExecutable loaded, PJRT_Executable executable) {
    return () -> {
      if (executable != null) {
        try (PJRT_Executable_Destroy_Args args = new PJRT_Executable_Destroy_Args()) {
          args.struct_size(PJRT_Executable_Destroy_Args_STRUCT_SIZE).executable(executable);
          api.check(() -> api.executableDestroy.call(args), PjrtApi.Failure.GENERIC, "PJRT_Executable_Destroy");
        }
      }
      try (PJRT_LoadedExecutable_Destroy_Args args = new PJRT_LoadedExecutable_Destroy_Args()) {
        args.struct_size(PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE).executable(loaded);
        api.check(() -> api.loadedDestroy.call(args), PjrtApi.Failure.GENERIC, "PJRT_LoadedExecutable_Destroy");
      }
    };
  }

  private List<TensorType> readOutputTypes(PjrtApi api) {
    try (PJRT_Executable_NumOutputs_Args count = new PJRT_Executable_NumOutputs_Args();
        PJRT_Executable_OutputElementTypes_Args types = new PJRT_Executable_OutputElementTypes_Args();
        PJRT_Executable_OutputDimensions_Args dims = new PJRT_Executable_OutputDimensions_Args()) {
      count.struct_size(PJRT_Executable_NumOutputs_Args_STRUCT_SIZE).executable(executable);
      api.check(() -> api.executableNumOutputs.call(count), PjrtApi.Failure.COMPILE, "PJRT_Executable_NumOutputs");
      types.struct_size(PJRT_Executable_OutputElementTypes_Args_STRUCT_SIZE).executable(executable);
      api.check(
          () -> api.executableOutputElementTypes.call(types), PjrtApi.Failure.COMPILE, "PJRT_Executable_OutputElementTypes");
      dims.struct_size(PJRT_Executable_OutputDimensions_Args_STRUCT_SIZE).executable(executable);
      api.check(() -> api.executableOutputDimensions.call(dims), PjrtApi.Failure.COMPILE, "PJRT_Executable_OutputDimensions");
      int n = Math.toIntExact(count.num_outputs());
      List<TensorType> outputs = new ArrayList<>(n);
      long offset = 0;
      for (int i = 0; i < n; i++) {
        int rank = Math.toIntExact(dims.dim_sizes().get(i));
        long[] shape = new long[rank];
        for (int d = 0; d < rank; d++) {
          shape[d] = dims.dims().get(offset + d);
        }
        offset += rank;
        outputs.add(new TensorType(DType.fromPjrtType(types.output_types().get(i)), Shape.of(shape)));
      }
      return Collections.unmodifiableList(outputs);
    }
  }

  private List<Device> readAddressableDevices(PjrtApi api) {
    try (PJRT_LoadedExecutable_AddressableDevices_Args args = new PJRT_LoadedExecutable_AddressableDevices_Args()) {
      args.struct_size(PJRT_LoadedExecutable_AddressableDevices_Args_STRUCT_SIZE).executable(loaded);
      api.check(
          () -> api.loadedAddressableDevices.call(args), PjrtApi.Failure.COMPILE, "PJRT_LoadedExecutable_AddressableDevices");
      List<Device> devices = new ArrayList<>();
      for (int i = 0; i < args.num_addressable_devices(); i++) {
        Device device = client.deviceOf(args.addressable_devices(i));
        if (device != null) {
          devices.add(device);
        }
      }
      return List.copyOf(devices);
    }
  }

  XlaClient client() {
    return client;
  }

  PJRT_LoadedExecutable loaded() {
    return loaded;
  }

  PJRT_Executable executable() {
    return executable;
  }

  ProgramSignature signature() {
    return signature;
  }

  List<TensorType> outputTypes() {
    return outputTypes;
  }

  List<Device> addressableDevices() {
    return addressableDevices;
  }

  /**
   * The parameters a run may donate: those the program text marks (see {@link ProgramSignature#donors()});
   * for a program whose text the runtime did not read (compiled from bytes: a jax.export artifact, MLIR
   * bytecode) and that marks none, those the compiled module aliases to an output, read once from {@code
   * PJRT_Executable_OptimizedProgram}. Empty when the plugin cannot say.
   */
  java.util.Set<Integer> donors() {
    if (!fromBytes || !signature.donors().isEmpty()) {
      return signature.donors();
    }
    java.util.Set<Integer> donors = compiledDonors;
    if (donors == null) {
      try (Lease lease = lease()) {
        donors = java.util.Set.copyOf(readCompiledDonors(client.api()));
      }
      compiledDonors = donors;
    }
    return donors;
  }

  /** Largest optimized program read: the plugin itself refuses 2 GiB, a Java array holds a little less. */
  private static final long MAX_OPTIMIZED_PROGRAM_BYTES = Integer.MAX_VALUE - 8;

  private java.util.Set<Integer> readCompiledDonors(PjrtApi api) {
    if (api.executableOptimizedProgram == null) {
      return java.util.Set.of(); // an older plugin: nothing is donatable, and donation is refused clearly
    }
    try (PJRT_Program program = new PJRT_Program();
        PJRT_Executable_OptimizedProgram_Args args = new PJRT_Executable_OptimizedProgram_Args()) {
      // Two calls: with code = NULL the plugin answers the size (and its format), then it fills our buffer.
      program.struct_size(PJRT_Program_STRUCT_SIZE).code(null).code_size(0);
      args.struct_size(PJRT_Executable_OptimizedProgram_Args_STRUCT_SIZE).executable(executable).program(program);
      api.check(() -> api.executableOptimizedProgram.call(args), PjrtApi.Failure.GENERIC, "PJRT_Executable_OptimizedProgram");
      long size = program.code_size();
      if (size < 0 || size > MAX_OPTIMIZED_PROGRAM_BYTES) {
        throw new dev.xlaactors.error.PluginException(dev.xlaactors.error.ErrorCode.RESOURCE_EXHAUSTED,
            "PJRT_Executable_OptimizedProgram reports " + size + " bytes, expected 0.." + MAX_OPTIMIZED_PROGRAM_BYTES
                + ": the parameters the program aliases cannot be read");
      }
      String format = PjrtApi.utf8(program.format(), program.format_size()); // the plugin's own string
      try (org.bytedeco.javacpp.BytePointer code = new org.bytedeco.javacpp.BytePointer(Math.max(1, size))) {
        program.code(code).code_size(size);
        api.check(() -> api.executableOptimizedProgram.call(args), PjrtApi.Failure.GENERIC, "PJRT_Executable_OptimizedProgram");
        byte[] bytes = new byte[(int) size];
        code.position(0).get(bytes);
        program.code(null); // ours, freed by the try; the plugin keeps no reference
        return HloAliases.ofOptimizedProgram(format, bytes);
      }
    }
  }

  /** The program serialized by the plugin ({@link Executable#serialize()}); UNIMPLEMENTED where it cannot serialize. */
  byte[] serialize() {
    PjrtApi api = client.api();
    api.need(api.executableSerialize, "PJRT_Executable_Serialize");
    try (Lease lease = lease();
        PJRT_Executable_Serialize_Args args = new PJRT_Executable_Serialize_Args()) {
      args.struct_size(PJRT_Executable_Serialize_Args_STRUCT_SIZE).executable(executable);
      api.check(() -> api.executableSerialize.call(args), PjrtApi.Failure.GENERIC, "PJRT_Executable_Serialize");
      try {
        long size = args.serialized_bytes_size();
        if (size > Integer.MAX_VALUE - 8) {
          throw new dev.xlaactors.error.InvalidArgumentException("the serialized executable is " + size
              + " bytes, over 2 GiB");
        }
        byte[] bytes = new byte[(int) size];
        args.serialized_bytes().position(0).capacity(size).get(bytes);
        return bytes;
      } finally {
        if (args.serialized_executable_deleter() != null && !args.serialized_executable_deleter().isNull()) {
          args.serialized_executable_deleter().call(args.serialized_executable());
        }
      }
    }
  }

  /** How many devices one execution spans (its replicas times partitions); 1 for a portable executable. */
  int devicesAtOnce() {
    return devicesAtOnce;
  }

  int[] readableByOutput() {
    return readableByOutput;
  }

  /** A reference held while a run or query uses the native executable. */
  Lease leaseProgram() {
    return lease();
  }
}
