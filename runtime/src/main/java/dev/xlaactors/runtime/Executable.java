package dev.xlaactors.runtime;

import static dev.xlaactors.nativebridge.pjrt.global.Pjrt.*;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.nativebridge.pjrt.PJRT_Buffer;
import dev.xlaactors.nativebridge.pjrt.PJRT_Error;
import dev.xlaactors.nativebridge.pjrt.PJRT_ExecuteContext;
import dev.xlaactors.nativebridge.pjrt.PJRT_ExecuteContext_Create_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Executable_Fingerprint_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Executable_GetCompiledMemoryStats_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Executable_GetCostAnalysis_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Executable_Name_Args;
import dev.xlaactors.nativebridge.pjrt.PJRT_Executable_SizeOfGeneratedCodeInBytes_Args;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;
import dev.xlaactors.runtime.model.Argument;

/**
 * A compiled program, ready to run many times, from many threads at once, on any device of its client.
 * Every run validates its arguments against the program's parameter types in Java (count, dtype, shape,
 * client, device) before anything reaches the plugin.
 *
 * <p>Lifetime: this is the caller's view of a compiled program that the client's compile cache may share
 * with other callers; closing it releases only this view. It keeps its client alive.
 */
public final class Executable extends NativeHandle {
  private final LoadedProgram program;
  private final AtomicLong runsWithDonation = new AtomicLong(); // numbers the runs named in donation errors

  Executable(LoadedProgram program) {
    super(program, () -> {}); // a view: the LoadedProgram parent owns the native executable
    this.program = program;
  }

  /** The types of the program's parameters, in order. */
  public List<TensorType> parameterTypes() {
    return program.signature().parameters();
  }

  /**
   * The positions of the parameters a run may donate (see {@link Argument#donated}): those the program
   * aliases to an output ({@code tf.aliasing_output = N}) or marks {@code jax.buffer_donor = true}; for a
   * program compiled from bytes ({@link XlaClient#compileModule}: a jax.export artifact, MLIR bytecode),
   * those the compiled module aliases, read once from the plugin ({@code PJRT_Executable_OptimizedProgram}).
   */
  public java.util.Set<Integer> donatableParameters() {
    return program.donors();
  }

  /**
   * Another view of this compiled program, closed independently (the program lives while any view does);
   * a {@link dev.xlaactors.runtime.model.Model} keeps one so that its caller may close theirs.
   */
  public Executable share() {
    try (Lease lease = lease()) {
      return new Executable(program);
    }
  }

  /** The types of the program's outputs, in order (a tuple result is flattened). */
  public List<TensorType> outputTypes() {
    return program.outputTypes();
  }

  public XlaClient client() {
    return program.client();
  }

  /**
   * The devices a run can use: every device of the client for a portable executable (the default, see
   * {@link CompileOptions}), else the devices it was compiled for.
   */
  public List<Device> addressableDevices() {
    return program.addressableDevices();
  }

  /**
   * Runs on device buffers, on the device that holds the first argument (the first device when there are
   * none); the caller owns (and closes) the returned buffers. No argument is donated: where the program
   * aliases a parameter to an output, PJRT copies the argument and it stays valid (donate with {@link
   * #execute(Argument...)}).
   */
  public List<DeviceBuffer> execute(DeviceBuffer... arguments) {
    return execute(Arrays.asList(arguments), null);
  }

  /**
   * As {@link #execute(DeviceBuffer...)}, with an optional per-run context that XLA FFI handlers can read
   * (null for none). Blocks until the run is complete.
   */
  public List<DeviceBuffer> execute(List<DeviceBuffer> arguments, RunContext context) {
    Objects.requireNonNull(arguments, "arguments");
    Device device = arguments.isEmpty() || arguments.get(0) == null ? client().devices().get(0) : arguments.get(0).device();
    return execute(arguments, context, device);
  }

  /**
   * Runs on {@code device}, one of the client's devices; every argument must already live there (move
   * one with {@link DeviceBuffer#copyToDevice}). The outputs are on {@code device}.
   */
  public List<DeviceBuffer> execute(List<DeviceBuffer> arguments, RunContext context, Device device) {
    Objects.requireNonNull(arguments, "arguments");
    checkDevice(device);
    checkArguments(arguments, device);
    return executeChecked(arguments, context, device);
  }

  /**
   * Runs on {@code arguments} (host tensors, device buffers, donated device buffers: see {@link Argument})
   * on the device of the first device-buffer argument (the first device when there is none). The caller
   * owns the returned buffers.
   */
  public List<DeviceBuffer> execute(Argument... arguments) {
    Device device = client().devices().get(0);
    for (Argument a : arguments) {
      if (a instanceof Argument.OnDevice d) {
        device = d.buffer().device();
        break;
      }
      if (a instanceof Argument.Donated d) {
        device = d.buffer().device();
        break;
      }
    }
    return executeArguments(Arrays.asList(arguments), null, device, null);
  }

  /**
   * Runs on {@code arguments} on {@code device}: host tensors are uploaded there for the run and freed
   * after it; device buffers must live there. Every argument is checked (type, client, device, donation)
   * before anything reaches the plugin. A donated buffer must fill a parameter of {@link
   * #donatableParameters()}, must not be shared ({@link DeviceBuffer#share()}) or passed twice; it is
   * closed when the run starts, whatever the run's outcome, and a later use fails naming the run ({@code
   * runName}, e.g. "run 3 of model 'gpt'"; null: this executable's own count). Every argument not
   * donated is passed to PJRT as non-donatable, so a run never consumes a buffer its caller still holds.
   */
  public List<DeviceBuffer> executeArguments(List<Argument> arguments, RunContext context, Device device, String runName) {
    Objects.requireNonNull(arguments, "arguments");
    checkDevice(device);
    int n = arguments.size();
    List<TensorType> types = new ArrayList<>(n);
    boolean anyDonated = false;
    for (int i = 0; i < n; i++) {
      Argument a = arguments.get(i);
      if (a == null) {
        throw new NullPointerException("argument " + i);
      }
      types.add(a.type());
      if (a instanceof Argument.OnDevice d) {
        checkPlacement(i, d.buffer(), device);
      } else if (a instanceof Argument.Donated d) {
        checkPlacement(i, d.buffer(), device);
        anyDonated = true;
      }
    }
    checkTypes(types);
    if (anyDonated) {
      checkDonations(arguments);
    }
    boolean[] donated = anyDonated ? new boolean[n] : null;
    List<NativeHandle.Lease> leases = new ArrayList<>(n + 1);
    List<DeviceBuffer> uploaded = new ArrayList<>();
    try {
      leases.add(lease());
      long[] argumentAddresses = new long[n];
      String run = null;
      for (int i = 0; i < n; i++) {
        Argument a = arguments.get(i);
        DeviceBuffer b;
        if (a instanceof Argument.Host h) {
          b = client().upload(h.tensor(), device);
          uploaded.add(b);
        } else if (a instanceof Argument.OnDevice d) {
          b = d.buffer();
        } else {
          continue; // donated last, once nothing else can fail before the run
        }
        leases.add(b.leaseBuffer());
        argumentAddresses[i] = b.pointer().address();
      }
      for (int i = 0; anyDonated && i < n; i++) {
        if (arguments.get(i) instanceof Argument.Donated d) {
          if (run == null) {
            run = runName != null ? runName : "run " + runsWithDonation.incrementAndGet() + " of executable '" + name() + "'";
          }
          leases.add(d.buffer().donateTo(run + " (argument " + i + " of @main)"));
          argumentAddresses[i] = d.buffer().pointer().address();
          donated[i] = true;
        }
      }
      return executeInto(argumentAddresses, n, context, device, donated);
    } finally {
      leases.forEach(NativeHandle.Lease::close);
      uploaded.forEach(DeviceBuffer::close);
    }
  }

  /** Donation is refused where the program does not alias the parameter, and for a buffer passed twice. */
  private void checkDonations(List<Argument> arguments) {
    java.util.Set<Integer> donors = donatableParameters();
    for (int i = 0; i < arguments.size(); i++) {
      if (!(arguments.get(i) instanceof Argument.Donated d)) {
        continue;
      }
      if (!donors.contains(i)) {
        throw new InvalidArgumentException(
            "argument " + i + " of @main (" + d.type() + ") is donated, but the program does not alias that parameter "
                + "to an output (donatable parameters: " + new java.util.TreeSet<>(donors) + "), so its memory could "
                + "not be reused: pass it with Argument.of(buffer), or mark the parameter {tf.aliasing_output = N : i32} "
                + "(jax.jit(f, donate_argnums=...))");
      }
      for (int j = 0; j < arguments.size(); j++) {
        Argument other = arguments.get(j);
        DeviceBuffer b = other instanceof Argument.OnDevice o ? o.buffer() : other instanceof Argument.Donated o ? o.buffer() : null;
        if (j != i && b != null && b.sameMemoryAs(d.buffer())) {
          throw new InvalidArgumentException(
              "argument " + i + " of @main (" + d.type() + ") is donated, and the same buffer is also argument " + j
                  + ": a donated buffer is given to the run and cannot be read as another argument; pass a copy");
        }
      }
    }
  }

  private void checkPlacement(int i, DeviceBuffer b, Device device) {
    if (b.client() != program.client()) {
      throw new InvalidArgumentException(
          "argument " + i + " lives on another client than this executable's " + program.client()
              + ": move it with copyToDevice(one of this client's devices)");
    }
    Device where = b.device();
    if (!where.equals(device)) {
      throw new InvalidArgumentException(
          "argument " + i + " lives on " + where + ", the run is on " + device + ": move it with copyToDevice");
    }
  }

  private void checkDevice(Device device) {
    client().checkDevice(device, "execution device");
    if (program.devicesAtOnce() > 1) {
      // Each run here executes on one device; the program's collectives would wait for the other replicas
      // or partitions, and the CPU plugin aborts the process when that rendezvous times out (40 s).
      throw new InvalidArgumentException(
          "executable '" + name() + "' was compiled for " + program.devicesAtOnce() + " devices at once (replicas x"
              + " partitions, see CompileOptions), and xla-actors runs an executable on one device at a time, where"
              + " its collectives would wait forever for the other devices (the plugin then aborts the process):"
              + " compile it with CompileOptions.defaults(), or split the work per device yourself");
    }
    if (!addressableDevices().contains(device)) {
      throw new InvalidArgumentException(
          "this executable was compiled for " + addressableDevices() + ", not for " + device
              + ": compile it with CompileOptions.defaults() (portable) to run it on any device");
    }
  }

  /** Runs on arguments already known to match the parameters and to live on {@code device}. */
  private List<DeviceBuffer> executeChecked(List<DeviceBuffer> arguments, RunContext context, Device device) {
    List<NativeHandle.Lease> leases = new ArrayList<>(arguments.size() + 1);
    try {
      leases.add(lease());
      int n = arguments.size();
      long[] argumentAddresses = new long[n];
      for (int i = 0; i < n; i++) {
        DeviceBuffer b = arguments.get(i);
        leases.add(b.leaseBuffer());
        argumentAddresses[i] = b.pointer().address();
      }
      return executeInto(argumentAddresses, n, context, device, new boolean[n]);
    } finally {
      leases.forEach(NativeHandle.Lease::close);
    }
  }

  /** One run on leased argument addresses; wraps the outputs as buffers the caller owns. */
  private List<DeviceBuffer> executeInto(
      long[] argumentAddresses, int n, RunContext context, Device device, boolean[] donated) {
    int numOutputs = outputTypes().size();
    long[] outputAddresses = new long[numOutputs];
    executeAddresses(argumentAddresses, n, context, device, outputAddresses, donated == null ? new boolean[n] : donated);
    List<DeviceBuffer> result = new ArrayList<>(numOutputs);
    for (int i = 0; i < numOutputs; i++) {
      PJRT_Buffer output = new PJRT_Buffer(new PjrtApi.Address(outputAddresses[i]));
      result.add(new DeviceBuffer(client(), output, outputTypes().get(i), device, program.readableByOutput(), i));
    }
    return result;
  }

  /**
   * One run on buffer addresses that the caller keeps alive; writes the outputs' addresses (all 0 when the
   * run fails, which throws). {@code donated} says which arguments PJRT may donate (null: any, for buffers
   * of this class's own that nobody else sees); every other one is passed as non-donatable.
   */
  private void executeAddresses(
      long[] argumentAddresses, int numArguments, RunContext context, Device device, long[] outputAddresses,
      boolean[] donated) {
    PjrtApi api = client().api();
    try (NativeHandle.Lease contextLease = context == null ? null : context.leaseContext()) {
      // Every run carries an execute context: an FFI handler that asks a run without one for its user
      // data makes the CPU plugin dereference a null pointer.
      PJRT_ExecuteContext executeContext = context != null ? context.executeContext() : EmptyContexts.of(api);
      // The lists cross in direct buffers the native side reads in place (a long[] would be copied
      // through a malloc'd array each way).
      AddressLists lists = AddressLists.acquire(numArguments, outputAddresses.length);
      PJRT_Error error;
      try (InFlightExecutions.Slot slot = client().inFlight().acquire(device, this::name)) {
        int numNonDonatable = 0;
        for (int i = 0; i < numArguments; i++) {
          lists.arguments.put(i, argumentAddresses[i]);
          if (donated != null && !donated[i]) {
            lists.nonDonatable.put(numNonDonatable++, i);
          }
        }
        error =
            XlaActors_ExecuteAndWait(
                api.api, program.loaded(), lists.arguments, numArguments, device.pointer(), executeContext,
                lists.outputs, outputAddresses.length, lists.nonDonatable, numNonDonatable);
        for (int i = 0; i < outputAddresses.length; i++) {
          outputAddresses[i] = lists.outputs.get(i);
        }
      } finally {
        lists.release();
      }
      api.check(error, PjrtApi.Failure.EXECUTION, "execution failed");
    }
  }

  /**
   * Per-thread direct buffers for a run's argument and output addresses. A run that starts while another
   * run of the same thread is in progress (a host-call sink that runs a program inline) gets its own.
   */
  private static final class AddressLists {
    private static final ThreadLocal<AddressLists> LISTS = ThreadLocal.withInitial(() -> new AddressLists(8, 8));

    final java.nio.LongBuffer arguments;
    final java.nio.LongBuffer outputs;
    final java.nio.LongBuffer nonDonatable; // argument indices PJRT must not donate
    private boolean inUse;

    private AddressLists(int numArguments, int numOutputs) {
      arguments = direct(numArguments);
      outputs = direct(numOutputs);
      nonDonatable = direct(numArguments);
    }

    private static java.nio.LongBuffer direct(int count) {
      return java.nio.ByteBuffer.allocateDirect(Math.max(1, count) * Long.BYTES)
          .order(java.nio.ByteOrder.nativeOrder())
          .asLongBuffer();
    }

    static AddressLists acquire(int numArguments, int numOutputs) {
      AddressLists lists = LISTS.get();
      if (lists.inUse) {
        return new AddressLists(numArguments, numOutputs); // nested: not the thread's own, never marked
      }
      if (numArguments > lists.arguments.capacity() || numOutputs > lists.outputs.capacity()) {
        lists = new AddressLists(
            Math.max(numArguments, lists.arguments.capacity()), Math.max(numOutputs, lists.outputs.capacity()));
        LISTS.set(lists);
      }
      lists.inUse = true;
      return lists;
    }

    void release() {
      inUse = false;
    }
  }

  /**
   * Uploads host tensors, runs, downloads every output and frees the device buffers. Outputs from 64 KiB
   * on hold pooled memory: close them when done (see {@link HostTensor#close()}).
   */
  public List<HostTensor> run(HostTensor... inputs) {
    return run(Arrays.asList(inputs), null);
  }

  /**
   * As {@link #run(HostTensor...)}, with a per-run context for FFI handlers (null for none). Runs on the
   * first device, or, when that one already runs as many executions as the plugin runs at once, on the
   * least busy one (see {@link InFlightExecutions}).
   */
  public List<HostTensor> run(List<HostTensor> inputs, RunContext context) {
    try (InFlightExecutions.Slot slot = client().inFlight().reserve(addressableDevices(), this::name)) {
      return run(inputs, context, slot.device());
    }
  }

  /** As {@link #run(List, RunContext)}, on {@code device}. */
  public List<HostTensor> run(List<HostTensor> inputs, RunContext context, Device device) {
    Objects.requireNonNull(inputs, "inputs");
    checkDevice(device);
    for (int i = 0; i < inputs.size(); i++) {
      if (inputs.get(i) == null) {
        throw new NullPointerException("input " + i);
      }
    }
    List<TensorType> types = new ArrayList<>(inputs.size());
    for (HostTensor input : inputs) {
      types.add(input.type());
    }
    checkTypes(types);
    // The buffers of a run() never reach the caller, so they stay unowned native buffers: no handle
    // objects, no cleaner registrations, destroyed here whatever happens.
    XlaClient client = program.client();
    PjrtApi api = client.api();
    int n = inputs.size();
    int numOutputs = outputTypes().size();
    long[] argumentAddresses = new long[n];
    long[] outputAddresses = new long[numOutputs];
    try (Lease self = lease();
        NativeHandle.Lease clientLease = client.leaseClient()) {
      for (int i = 0; i < n; i++) {
        argumentAddresses[i] = client.uploadUnowned(inputs.get(i), device).address();
      }
      // These buffers are this run's own, so PJRT may donate them where the program aliases a parameter.
      executeAddresses(argumentAddresses, n, context, device, outputAddresses, null);
      List<HostTensor> result = new ArrayList<>(numOutputs);
      int[] readable = program.readableByOutput();
      try {
        for (int i = 0; i < numOutputs; i++) {
          HostTensor tensor = HostTensor.uninitialized(outputTypes().get(i)); // the download overwrites it all
          result.add(tensor);
          int[] cache = {readable[i]};
          try (HostTensor.Hold hold = tensor.hold("download into")) {
            DeviceBuffer.download(
                api, new PJRT_Buffer(new PjrtApi.Address(outputAddresses[i])), tensor.type().byteSize(), hold.data(),
                cache);
          }
          readable[i] = cache[0];
        }
      } catch (RuntimeException e) {
        result.forEach(HostTensor::close);
        throw e;
      }
      return result;
    } finally {
      for (long address : argumentAddresses) {
        destroyQuietly(api, address);
      }
      for (long address : outputAddresses) {
        destroyQuietly(api, address);
      }
    }
  }

  private static void destroyQuietly(PjrtApi api, long address) {
    if (address != 0) {
      PJRT_Error error = XlaActors_BufferDestroy(api.api, new PJRT_Buffer(new PjrtApi.Address(address)));
      if (error != null) {
        api.toException(error, PjrtApi.Failure.GENERIC, "PJRT_Buffer_Destroy"); // freed; the run's outcome stands
      }
    }
  }

  private void checkArguments(List<DeviceBuffer> arguments, Device device) {
    List<TensorType> types = new ArrayList<>(arguments.size());
    for (int i = 0; i < arguments.size(); i++) {
      DeviceBuffer b = arguments.get(i);
      if (b == null) {
        throw new NullPointerException("argument " + i);
      }
      checkPlacement(i, b, device);
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

  // ---- what PJRT knows about the executable ------------------------------------------------------

  /** The executable's name, as XLA gives it (the module name). */
  public String name() {
    PjrtApi api = client().api();
    api.need(api.executableName, "PJRT_Executable_Name");
    try (Lease lease = lease();
        PJRT_Executable_Name_Args args = new PJRT_Executable_Name_Args()) {
      args.struct_size(PJRT_Executable_Name_Args_STRUCT_SIZE).executable(program.executable());
      api.check(() -> api.executableName.call(args), PjrtApi.Failure.GENERIC, "PJRT_Executable_Name");
      return PjrtApi.utf8(args.executable_name(), args.executable_name_size());
    }
  }

  /** Size of the generated code in bytes, or -1 when the plugin cannot say. */
  public long generatedCodeSize() {
    PjrtApi api = client().api();
    api.need(api.executableCodeSize, "PJRT_Executable_SizeOfGeneratedCodeInBytes");
    try (Lease lease = lease();
        PJRT_Executable_SizeOfGeneratedCodeInBytes_Args args = new PJRT_Executable_SizeOfGeneratedCodeInBytes_Args()) {
      args.struct_size(PJRT_Executable_SizeOfGeneratedCodeInBytes_Args_STRUCT_SIZE).executable(program.executable());
      api.check(() -> api.executableCodeSize.call(args), PjrtApi.Failure.GENERIC, "PJRT_Executable_SizeOfGeneratedCodeInBytes");
      return args.size_in_bytes();
    }
  }

  /** XLA's cost analysis (e.g. {@code flops}, {@code bytes accessed}); UNIMPLEMENTED where the plugin has none. */
  public Map<String, Object> costAnalysis() {
    PjrtApi api = client().api();
    api.need(api.executableCostAnalysis, "PJRT_Executable_GetCostAnalysis");
    try (Lease lease = lease();
        PJRT_Executable_GetCostAnalysis_Args args = new PJRT_Executable_GetCostAnalysis_Args()) {
      args.struct_size(PJRT_Executable_GetCostAnalysis_Args_STRUCT_SIZE).executable(program.executable());
      api.check(() -> api.executableCostAnalysis.call(args), PjrtApi.Failure.GENERIC, "PJRT_Executable_GetCostAnalysis");
      return Map.copyOf(PjrtApi.namedValues(args.properties(), args.num_properties()));
    }
  }

  /**
   * The memory XLA planned for this program when compiling it: parameters, results, the temporary buffers
   * of each run; UNIMPLEMENTED where the plugin does not report it.
   */
  public CompiledMemoryStats compiledMemoryStats() {
    PjrtApi api = client().api();
    api.need(api.executableMemoryStats, "PJRT_Executable_GetCompiledMemoryStats");
    try (Lease lease = lease();
        PJRT_Executable_GetCompiledMemoryStats_Args args = new PJRT_Executable_GetCompiledMemoryStats_Args()) {
      args.struct_size(PJRT_Executable_GetCompiledMemoryStats_Args_STRUCT_SIZE).executable(program.executable());
      api.check(() -> api.executableMemoryStats.call(args), PjrtApi.Failure.GENERIC, "PJRT_Executable_GetCompiledMemoryStats");
      return new CompiledMemoryStats(args.generated_code_size_in_bytes(), args.argument_size_in_bytes(),
          args.output_size_in_bytes(), args.alias_size_in_bytes(), args.temp_size_in_bytes(),
          args.peak_memory_in_bytes());
    }
  }

  /** The executable's fingerprint; UNIMPLEMENTED where the plugin does not compute one. */
  public String fingerprint() {
    PjrtApi api = client().api();
    api.need(api.executableFingerprint, "PJRT_Executable_Fingerprint");
    try (Lease lease = lease();
        PJRT_Executable_Fingerprint_Args args = new PJRT_Executable_Fingerprint_Args()) {
      args.struct_size(PJRT_Executable_Fingerprint_Args_STRUCT_SIZE).executable(program.executable());
      api.check(() -> api.executableFingerprint.call(args), PjrtApi.Failure.GENERIC, "PJRT_Executable_Fingerprint");
      return PjrtApi.utf8(args.executable_fingerprint(), args.executable_fingerprint_size());
    }
  }

  /**
   * The executable serialized by the plugin, loadable again with {@link XlaClient#deserialize} by the same
   * plugin version; UNIMPLEMENTED where the plugin cannot serialize.
   */
  public byte[] serialize() {
    try (Lease lease = lease()) {
      return program.serialize();
    }
  }

  @Override
  public String toString() {
    return "Executable(" + parameterTypes() + " -> " + outputTypes() + ")";
  }

  /**
   * One empty execute context per plugin, for runs that bring none. A context carries no state of a run
   * (nothing is added to it), so concurrent runs share it.
   */
  private static final class EmptyContexts {
    private static final java.util.Map<PjrtApi, PJRT_ExecuteContext> CONTEXTS =
        new java.util.concurrent.ConcurrentHashMap<>();

    static PJRT_ExecuteContext of(PjrtApi api) {
      return CONTEXTS.computeIfAbsent(
          api,
          a -> {
            try (PJRT_ExecuteContext_Create_Args create = new PJRT_ExecuteContext_Create_Args()) {
              create.struct_size(PJRT_ExecuteContext_Create_Args_STRUCT_SIZE);
              a.check(
                  a.api.PJRT_ExecuteContext_Create().call(create), PjrtApi.Failure.GENERIC, "PJRT_ExecuteContext_Create");
              return create.context(); // lives as long as the plugin, which is never unloaded
            }
          });
    }
  }
}
