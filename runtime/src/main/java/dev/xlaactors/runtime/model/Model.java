package dev.xlaactors.runtime.model;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.Device;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.NativeHandle;
import dev.xlaactors.runtime.RunContext;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A compiled program with some of its parameters bound to device buffers (weights), uploaded once: a run
 * passes only the per-request inputs ({@link #inputNames()}, in order), and the bound buffers are shared,
 * read-only, by every run, from any number of threads at once.
 *
 * <pre>{@code
 * try (Model model = Model.load(exe, List.of("x", "w"), Map.of("w", weights), client.devices().get(0))) {
 *   List<HostTensor> y = model.run(List.of(Argument.of(x)), null);
 * }
 * }</pre>
 *
 * <p>Lifetime: the model keeps its own view of the executable ({@link Executable#share()}) and its own
 * owner of each bound buffer ({@link DeviceBuffer#share()}, or the uploads of {@link #load}), so the caller
 * may close theirs at once. Every run holds a reference on the model for its duration. {@link #close()}
 * while runs are in flight is safe: those runs finish normally, a run started afterwards fails with a
 * FAILED_PRECONDITION naming the model, and the bound buffers are freed when the last run ends. A bound
 * buffer cannot be donated (it is shared). Thread-safe.
 */
public final class Model extends NativeHandle implements BoundProgram {
  private final String name;
  private final Executable executable;
  private final List<String> parameterNames;
  private final DeviceBuffer[] boundByPosition; // null where the parameter is a per-request input
  private final int[] inputPositions;
  private final List<String> inputNames;
  private final List<TensorType> inputTypes;
  private final Device device;
  private final boolean anyDevice; // made by of(): a run of host inputs goes where Executable.run puts it
  private final AtomicLong runs = new AtomicLong();

  private Model(String name, Executable executable, List<String> parameterNames, DeviceBuffer[] boundByPosition,
      Device device) {
    this(name, executable, parameterNames, boundByPosition, device, false);
  }

  private Model(String name, Executable executable, List<String> parameterNames, DeviceBuffer[] boundByPosition,
      Device device, boolean anyDevice) {
    super(null, destroyer(executable, boundByPosition));
    this.name = name;
    this.anyDevice = anyDevice;
    this.executable = executable;
    this.parameterNames = List.copyOf(parameterNames);
    this.boundByPosition = boundByPosition;
    this.device = device;
    List<Integer> positions = new ArrayList<>();
    List<String> names = new ArrayList<>();
    List<TensorType> types = new ArrayList<>();
    for (int p = 0; p < boundByPosition.length; p++) {
      if (boundByPosition[p] == null) {
        positions.add(p);
        names.add(parameterNames.get(p));
        types.add(executable.parameterTypes().get(p));
      }
    }
    this.inputPositions = positions.stream().mapToInt(Integer::intValue).toArray();
    this.inputNames = Collections.unmodifiableList(names);
    this.inputTypes = Collections.unmodifiableList(types);
  }

  private static Destroyer destroyer(Executable executable, DeviceBuffer[] bound) {
    return () -> {
      for (DeviceBuffer b : bound) {
        if (b != null) {
          b.close();
        }
      }
      executable.close();
    };
  }

  /**
   * A model of {@code exe} with nothing bound: every parameter is a per-request input, named {@code arg0},
   * {@code arg1}, ... as in the program's {@code @main}. It keeps its own view of the executable ({@link
   * Executable#share()}), so the caller still closes theirs. A run whose inputs are all host tensors takes
   * {@link Executable#run(List, RunContext)}'s path: no device buffer handles, and the least busy of the
   * executable's devices when its first is saturated; {@link #device()} (the client's first device) is
   * where every other run executes and where outputs left on the device live.
   */
  public static Model of(Executable exe) {
    Objects.requireNonNull(exe, "exe");
    int n = exe.parameterTypes().size();
    List<String> names = new ArrayList<>(n);
    for (int p = 0; p < n; p++) {
      names.add("arg" + p);
    }
    return new Model(exe.name(), exe.share(), names, new DeviceBuffer[n], exe.client().devices().get(0), true);
  }

  /**
   * The program {@code stablehlo} compiled on {@code client} (through its compile cache), as a model with
   * nothing bound ({@link #of}) that owns its executable: closing the model frees it.
   */
  public static Model compile(XlaClient client, String stablehlo) {
    Objects.requireNonNull(client, "client");
    try (Executable exe = client.compile(stablehlo)) {
      return of(exe);
    }
  }

  /**
   * A model of {@code exe} whose parameters are named {@code parameterNames} (one per parameter of
   * {@code @main}, in order) and where each parameter named in {@code bound} is bound to that buffer. The
   * model shares the buffers ({@link DeviceBuffer#share()}): the caller still owns (and closes) theirs,
   * and the same buffers may be bound to several models (a prefill and a decode step sharing weights).
   * Every bound buffer must match its parameter's type and live on one device of {@code exe}'s client;
   * any mismatch fails here, naming the parameter, expected vs got.
   */
  public static Model bind(Executable exe, List<String> parameterNames, Map<String, DeviceBuffer> bound) {
    Objects.requireNonNull(bound, "bound");
    Map<String, TensorType> types = new LinkedHashMap<>();
    Device device = null;
    for (Map.Entry<String, DeviceBuffer> e : bound.entrySet()) {
      DeviceBuffer b = Objects.requireNonNull(e.getValue(), () -> "bound buffer '" + e.getKey() + "'");
      types.put(e.getKey(), b.type());
      if (b.client() != exe.client()) {
        throw new InvalidArgumentException("bound buffer '" + e.getKey() + "' lives on another client than the executable's "
            + exe.client() + ": copy it with copyToDevice(one of that client's devices)");
      }
      if (device == null) {
        device = b.device();
      } else if (!device.equals(b.device())) {
        throw new InvalidArgumentException("bound buffer '" + e.getKey() + "' lives on " + b.device() + ", the others on "
            + device + ": a model runs on one device; copy it with copyToDevice(" + device + ")");
      }
    }
    checkBinding(exe, parameterNames, types, "bound buffer");
    DeviceBuffer[] byPosition = new DeviceBuffer[parameterNames.size()];
    Executable view = exe.share();
    try {
      for (Map.Entry<String, DeviceBuffer> e : bound.entrySet()) {
        int p = parameterNames.indexOf(e.getKey());
        byPosition[p] = e.getValue().share();
      }
      return new Model(exe.name(), view, parameterNames, byPosition, device != null ? device : exe.client().devices().get(0));
    } catch (RuntimeException e) {
      closeAll(view, byPosition);
      throw e;
    }
  }

  /**
   * A model of {@code exe} with each weight of {@code weights} uploaded once to {@code device} and bound to
   * the parameter of that name (see {@link #bind}); parameters without a weight are the per-request inputs.
   * A weight with no parameter, or of the wrong dtype or shape, fails before anything is uploaded, naming
   * it, expected vs got. The model owns the uploads; the host tensors may be closed at once (an upload
   * that uses a tensor's memory in place keeps that memory until the model is gone).
   */
  public static Model load(Executable exe, List<String> parameterNames, Map<String, HostTensor> weights, Device device) {
    Objects.requireNonNull(weights, "weights");
    Objects.requireNonNull(device, "device");
    Map<String, TensorType> types = new LinkedHashMap<>();
    weights.forEach((n, t) -> types.put(n, Objects.requireNonNull(t, () -> "weight '" + n + "'").type()));
    checkBinding(exe, parameterNames, types, "weight");
    if (device.client() != exe.client()) {
      throw new InvalidArgumentException("device " + device + " belongs to another client than the executable's " + exe.client());
    }
    DeviceBuffer[] byPosition = new DeviceBuffer[parameterNames.size()];
    Executable view = exe.share();
    try {
      for (Map.Entry<String, HostTensor> e : weights.entrySet()) {
        byPosition[parameterNames.indexOf(e.getKey())] = exe.client().upload(e.getValue(), device);
      }
      return new Model(exe.name(), view, parameterNames, byPosition, device);
    } catch (RuntimeException e) {
      closeAll(view, byPosition);
      throw e;
    }
  }

  /**
   * A model as models are shipped: the {@code jax.export} artifact {@code export}, compiled for {@code
   * device}'s client, with every tensor of {@code weights} uploaded once and bound to the parameter whose
   * name ({@link JaxExport#parameterNames()}: a flat dict argument's keys) is the tensor's; the export's
   * constants (the platform index of a multi-platform export) are bound too, and the parameters left are
   * the per-request inputs, in order. A weight with no parameter of its name, or of another dtype or shape,
   * fails before anything is uploaded, naming it, expected vs got. The weights file may be closed once this
   * returns.
   */
  public static Model load(JaxExport export, SafeTensors weights, Device device) {
    Objects.requireNonNull(export, "export");
    Objects.requireNonNull(weights, "weights");
    Objects.requireNonNull(device, "device");
    Map<String, HostTensor> bound = new LinkedHashMap<>(export.constants(device.client()));
    for (String name : weights.types().keySet()) {
      bound.put(name, weights.tensor(name));
    }
    try (Executable exe = export.compile(device.client())) {
      return load(exe, export.parameterNames(), bound, device);
    }
  }

  private static void closeAll(Executable view, DeviceBuffer[] buffers) {
    for (DeviceBuffer b : buffers) {
      if (b != null) {
        b.close();
      }
    }
    view.close();
  }

  /** Checks the names against the program, and each bound name and type against its parameter. */
  private static void checkBinding(
      Executable exe, List<String> parameterNames, Map<String, TensorType> bound, String what) {
    Objects.requireNonNull(exe, "exe");
    Objects.requireNonNull(parameterNames, "parameterNames");
    List<TensorType> parameters = exe.parameterTypes();
    if (parameterNames.size() != parameters.size()) {
      throw new InvalidArgumentException("@main takes " + parameters.size() + " parameter(s) " + parameters + ", but "
          + parameterNames.size() + " name(s) were given " + parameterNames + ": name every parameter, in order");
    }
    Set<String> seen = new HashSet<>();
    for (String n : parameterNames) {
      if (n == null || !seen.add(n)) {
        throw new InvalidArgumentException("parameter names must be unique and non-null, got " + parameterNames);
      }
    }
    for (Map.Entry<String, TensorType> e : bound.entrySet()) {
      int p = parameterNames.indexOf(e.getKey());
      if (p < 0) {
        throw new InvalidArgumentException(what + " '" + e.getKey() + "' (" + e.getValue() + ") has no parameter of that name: "
            + "the parameters are " + parameterNames);
      }
      if (!parameters.get(p).equals(e.getValue())) {
        throw new InvalidArgumentException(what + " '" + e.getKey() + "' for parameter " + p + " of @main: expected "
            + parameters.get(p) + ", got " + e.getValue());
      }
    }
  }

  /** The model's name (the executable's, as XLA gives it). */
  public String name() {
    return name;
  }

  /** The names of every parameter of {@code @main}, in order (bound ones included). */
  public List<String> parameterNames() {
    return parameterNames;
  }

  /**
   * Whether parameter {@code parameter} is bound to {@code buffer}'s memory ({@code buffer} or a share of it):
   * how a caller sees that two models share one upload of a weight. Refused for a name that is no parameter.
   */
  public boolean isBoundTo(String parameter, DeviceBuffer buffer) {
    int p = parameterNames.indexOf(Objects.requireNonNull(parameter, "parameter"));
    if (p < 0) {
      throw new InvalidArgumentException("model '" + name + "' has no parameter '" + parameter + "'; it has "
          + parameterNames);
    }
    try (Lease lease = lease()) {
      return boundByPosition[p] != null && boundByPosition[p].sameMemoryAs(buffer);
    }
  }

  /** The names of the per-request inputs a run takes, in order. */
  public List<String> inputNames() {
    return inputNames;
  }

  /** The types of the per-request inputs a run takes, in order. */
  public List<TensorType> inputTypes() {
    return inputTypes;
  }

  /** The types of the outputs. */
  public List<TensorType> outputTypes() {
    return executable.outputTypes();
  }

  /** The device the model runs on (where its bound buffers live). */
  public Device device() {
    return device;
  }

  /** The client of the model's executable. */
  public XlaClient client() {
    return executable.client();
  }

  /**
   * The names of the per-request inputs the program lets a run donate ({@link Argument#donated}); a
   * bound parameter is never donatable.
   */
  public Set<String> donatableInputs() {
    Set<String> names = new java.util.LinkedHashSet<>();
    for (int p : executable.donatableParameters()) {
      if (boundByPosition[p] == null) {
        names.add(parameterNames.get(p));
      }
    }
    return Collections.unmodifiableSet(names);
  }

  /**
   * Runs on the per-request {@code inputs} (in {@link #inputNames()} order) on {@link #device()}; the
   * outputs stay on the device and the caller owns them. {@code context} is the run's FFI context (host
   * callbacks), or null. Blocks until the run is complete.
   */
  public List<DeviceBuffer> execute(List<Argument> inputs, RunContext context) {
    Objects.requireNonNull(inputs, "inputs");
    try (Lease run = lease()) { // a closed model refuses here, naming itself
      long runNumber = runs.incrementAndGet();
      checkInputs(inputs);
      List<Argument> all = new ArrayList<>(boundByPosition.length);
      int next = 0;
      for (DeviceBuffer b : boundByPosition) {
        all.add(b != null ? Argument.of(b) : inputs.get(next++));
      }
      return executable.executeArguments(all, context, device, "run " + runNumber + " of model '" + name + "'");
    }
  }

  /**
   * As {@link #execute}, with every output downloaded to the host (the device buffers are freed). A model
   * made by {@link #of} given only host tensors runs them as {@link Executable#run(List, RunContext)} does.
   */
  public List<HostTensor> run(List<Argument> inputs, RunContext context) {
    Objects.requireNonNull(inputs, "inputs");
    if (anyDevice && allOnHost(inputs)) {
      try (Lease run = lease()) { // a closed model refuses here, naming itself
        runs.incrementAndGet();
        List<HostTensor> tensors = new ArrayList<>(inputs.size());
        for (Argument a : inputs) {
          tensors.add(a == null ? null : ((Argument.Host) a).tensor());
        }
        return executable.run(tensors, context);
      }
    }
    List<DeviceBuffer> outputs = execute(inputs, context);
    List<HostTensor> result = new ArrayList<>(outputs.size());
    try {
      for (DeviceBuffer b : outputs) {
        result.add(b.toHost());
      }
      return result;
    } catch (RuntimeException e) {
      result.forEach(HostTensor::close);
      throw e;
    } finally {
      outputs.forEach(DeviceBuffer::close);
    }
  }

  private static boolean allOnHost(List<Argument> inputs) {
    for (Argument a : inputs) {
      if (a != null && !(a instanceof Argument.Host)) { // a null is named by Executable.run's check
        return false;
      }
    }
    return true;
  }

  private void checkInputs(List<Argument> inputs) {
    if (inputs.size() != inputPositions.length) {
      throw new InvalidArgumentException("model '" + name + "' takes " + inputPositions.length + " input(s) " + describeInputs()
          + ", got " + inputs.size());
    }
    for (int i = 0; i < inputs.size(); i++) {
      Argument a = inputs.get(i);
      if (a == null) {
        throw new NullPointerException("input " + i + " '" + inputNames.get(i) + "' of model '" + name + "'");
      }
      int p = inputPositions[i];
      if (!a.type().equals(inputTypes.get(i))) {
        throw new InvalidArgumentException("input " + i + " '" + inputNames.get(i) + "' of model '" + name + "' (parameter " + p
            + " of @main): expected " + inputTypes.get(i) + ", got " + a.type());
      }
      if (a instanceof Argument.Donated d) {
        for (int q = 0; q < boundByPosition.length; q++) {
          if (boundByPosition[q] != null && boundByPosition[q].sameMemoryAs(d.buffer())) {
            throw new InvalidArgumentException("input " + i + " '" + inputNames.get(i) + "' of model '" + name
                + "' donates the buffer bound to parameter '" + parameterNames.get(q) + "': bound parameters are shared "
                + "read-only by every run and cannot be donated; donate a copy (copyToDevice)");
          }
        }
        if (!executable.donatableParameters().contains(p)) {
          throw new InvalidArgumentException("input " + i + " '" + inputNames.get(i) + "' of model '" + name + "' (parameter "
              + p + " of @main) is donated, but the program does not alias it to an output; donatable inputs: "
              + donatableInputs() + ". Pass it with Argument.of(buffer), or export with donate_argnums");
        }
      }
    }
  }

  private String describeInputs() {
    List<String> parts = new ArrayList<>();
    for (int i = 0; i < inputNames.size(); i++) {
      parts.add(inputNames.get(i) + ": " + inputTypes.get(i));
    }
    return parts.toString();
  }

  @Override
  protected RuntimeException closedError() {
    return new XlaException(ErrorCode.FAILED_PRECONDITION,
        "model '" + name + "' is closed: runs started before close() finish, new runs are refused; load or bind it again");
  }

  @Override
  public String toString() {
    return "Model(" + name + ", inputs " + describeInputs() + (isClosed() ? ", closed)" : ")");
  }
}
