package dev.xlaactors.runtime.model;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.graph.SegmentedProgram;
import dev.xlaactors.graph.SegmentedProgram.DeviceResult;
import dev.xlaactors.graph.SegmentedProgram.HostCallInvoker;
import dev.xlaactors.graph.SegmentedProgram.Result;
import dev.xlaactors.graph.SegmentedProgram.Target;
import dev.xlaactors.runtime.Device;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.NativeHandle;
import dev.xlaactors.runtime.TensorType;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A {@link SegmentedProgram} (stages and host calls between them) with some of its graph's parameters
 * bound to device buffers, as {@link Model} binds a fused program's: the weights are uploaded once and
 * shared, read-only, by every run and every stage that reads them; a run passes only the per-request
 * inputs ({@link #inputNames()}, in order: host tensors, device buffers, donated buffers), and its
 * outputs may stay on the device ({@link #execute}).
 *
 * <pre>{@code
 * SegmentedProgram program = new SegmentedProgram(graph.segment(SegmentationOptions.defaults()), Placement.on(client));
 * try (SegmentedModel model = SegmentedModel.load(program, List.of("w", "x"), Map.of("w", weights), client.devices().get(0))) {
 *   List<HostTensor> y = model.run(List.of(Argument.of(x)), HostCallInvoker.direct()).outputs();
 * }
 * }</pre>
 *
 * <p>Where the weights live: on {@link #device()}; a program whose placement puts stages on other devices
 * (or clients) gets one copy of each weight on each of those when the model is made, so no run uploads or
 * copies a weight. Donation: an input the program was segmented to donate ({@link
 * dev.xlaactors.graph.SegmentationOptions#donating}) takes {@link Argument#donated}; a bound buffer is
 * never donated.
 *
 * <p>Lifetime: the model keeps its own owner of each bound buffer ({@link DeviceBuffer#share()}) and owns
 * its uploads and copies; it does not own the program, which must stay open while the model is used.
 * Every run holds a reference on the model; {@link #close()} while runs are in flight is safe (they
 * finish, later runs fail naming the model, the buffers are freed when the last run ends). Thread-safe.
 */
public final class SegmentedModel extends NativeHandle implements BoundProgram {
  private final String name;
  private final SegmentedProgram program;
  private final List<String> parameterNames;
  private final DeviceBuffer[] boundByPosition; // null where the parameter is a per-request input
  private final Map<Integer, Map<Target, DeviceBuffer>> copies; // bound position -> its copies on other targets
  private final int[] inputPositions;
  private final List<String> inputNames;
  private final List<TensorType> inputTypes;
  private final Target home;
  private final AtomicLong runs = new AtomicLong();

  private SegmentedModel(SegmentedProgram program, List<String> parameterNames, DeviceBuffer[] boundByPosition,
      Map<Integer, Map<Target, DeviceBuffer>> copies, Target home) {
    super(null, destroyer(boundByPosition, copies));
    this.name = program.graph().graph().name();
    this.program = program;
    this.parameterNames = List.copyOf(parameterNames);
    this.boundByPosition = boundByPosition;
    this.copies = copies;
    this.home = home;
    List<TensorType> parameterTypes = program.graph().graph().parameterTypes();
    List<Integer> positions = new ArrayList<>();
    List<String> names = new ArrayList<>();
    List<TensorType> types = new ArrayList<>();
    for (int p = 0; p < boundByPosition.length; p++) {
      if (boundByPosition[p] == null) {
        positions.add(p);
        names.add(parameterNames.get(p));
        types.add(parameterTypes.get(p));
      }
    }
    this.inputPositions = positions.stream().mapToInt(Integer::intValue).toArray();
    this.inputNames = Collections.unmodifiableList(names);
    this.inputTypes = Collections.unmodifiableList(types);
  }

  private static Destroyer destroyer(DeviceBuffer[] bound, Map<Integer, Map<Target, DeviceBuffer>> copies) {
    return () -> closeAll(bound, copies);
  }

  private static void closeAll(DeviceBuffer[] bound, Map<Integer, Map<Target, DeviceBuffer>> copies) {
    for (Map<Target, DeviceBuffer> c : copies.values()) {
      c.values().forEach(DeviceBuffer::close);
    }
    for (DeviceBuffer b : bound) {
      if (b != null) {
        b.close();
      }
    }
  }

  /**
   * A model of {@code program} with nothing bound: every graph parameter is a per-request input, named
   * {@code arg0}, {@code arg1}, ... in order; outputs left on the device live on the first stage's target.
   * Like every segmented model it does not own the program, which must stay open while the model is used.
   */
  public static SegmentedModel of(SegmentedProgram program) {
    Objects.requireNonNull(program, "program");
    int n = program.graph().graph().parameterTypes().size();
    List<String> names = new ArrayList<>(n);
    for (int p = 0; p < n; p++) {
      names.add("arg" + p);
    }
    return bind(program, names, Map.of());
  }

  /**
   * A model of {@code program} whose graph parameters are named {@code parameterNames} (one per
   * parameter, in order), each parameter named in {@code bound} bound to that buffer (shared: the caller
   * still owns and closes theirs, and may bind it to other models too). The buffers must live on one
   * device, the model's; any mismatch fails here, naming the parameter, expected vs got.
   */
  public static SegmentedModel bind(SegmentedProgram program, List<String> parameterNames, Map<String, DeviceBuffer> bound) {
    Objects.requireNonNull(bound, "bound");
    Map<String, TensorType> types = new LinkedHashMap<>();
    Device device = null;
    for (Map.Entry<String, DeviceBuffer> e : bound.entrySet()) {
      DeviceBuffer b = Objects.requireNonNull(e.getValue(), () -> "bound buffer '" + e.getKey() + "'");
      types.put(e.getKey(), b.type());
      if (device != null && !device.equals(b.device())) {
        throw new InvalidArgumentException("bound buffer '" + e.getKey() + "' lives on " + b.device() + ", the others on "
            + device + ": a model's weights live on one device; copy it with copyToDevice(" + device + ")");
      }
      device = b.device();
    }
    checkBinding(program, parameterNames, types, "bound buffer");
    // A program of host calls only has no stage, so no device: its runs are all on the host.
    Target home = device != null ? new Target(device.client(), device)
        : program.graph().stages().isEmpty() ? null : program.target(0);
    DeviceBuffer[] byPosition = new DeviceBuffer[parameterNames.size()];
    Map<Integer, Map<Target, DeviceBuffer>> copies = new HashMap<>();
    try {
      for (Map.Entry<String, DeviceBuffer> e : bound.entrySet()) {
        int p = parameterNames.indexOf(e.getKey());
        byPosition[p] = e.getValue().share();
        copies.put(p, copiesElsewhere(program, home, byPosition[p]));
      }
      return new SegmentedModel(program, parameterNames, byPosition, copies, home);
    } catch (RuntimeException e) {
      closeAll(byPosition, copies);
      throw e;
    }
  }

  /**
   * A model of {@code program} with each weight of {@code weights} uploaded once to {@code device} (and
   * copied once to every other target the program's placement uses) and bound to the parameter of that
   * name; the parameters without a weight are the per-request inputs. A weight with no parameter, or of
   * the wrong dtype or shape, fails before anything is uploaded, naming it, expected vs got. The host
   * tensors may be closed once this returns.
   */
  public static SegmentedModel load(SegmentedProgram program, List<String> parameterNames, Map<String, HostTensor> weights,
      Device device) {
    Objects.requireNonNull(weights, "weights");
    Objects.requireNonNull(device, "device");
    Map<String, TensorType> types = new LinkedHashMap<>();
    weights.forEach((n, t) -> types.put(n, Objects.requireNonNull(t, () -> "weight '" + n + "'").type()));
    checkBinding(program, parameterNames, types, "weight");
    Target home = new Target(device.client(), device);
    DeviceBuffer[] byPosition = new DeviceBuffer[parameterNames.size()];
    Map<Integer, Map<Target, DeviceBuffer>> copies = new HashMap<>();
    try {
      for (Map.Entry<String, HostTensor> e : weights.entrySet()) {
        int p = parameterNames.indexOf(e.getKey());
        byPosition[p] = device.client().upload(e.getValue(), device);
        copies.put(p, copiesElsewhere(program, home, byPosition[p]));
      }
      return new SegmentedModel(program, parameterNames, byPosition, copies, home);
    } catch (RuntimeException e) {
      closeAll(byPosition, copies);
      throw e;
    }
  }

  /** One copy of {@code buffer} on every target of the program's stages other than {@code home}. */
  private static Map<Target, DeviceBuffer> copiesElsewhere(SegmentedProgram program, Target home, DeviceBuffer buffer) {
    Map<Target, DeviceBuffer> copies = new HashMap<>();
    try {
      for (int s = 0; s < program.graph().stages().size(); s++) {
        Target t = program.target(s);
        if (!t.equals(home) && !copies.containsKey(t)) {
          copies.put(t, buffer.copyToDevice(t.device()));
        }
      }
      return copies;
    } catch (RuntimeException e) {
      copies.values().forEach(DeviceBuffer::close);
      throw e;
    }
  }

  /** Checks the names against the graph, and each bound name and type against its parameter. */
  private static void checkBinding(SegmentedProgram program, List<String> parameterNames, Map<String, TensorType> bound,
      String what) {
    Objects.requireNonNull(program, "program");
    Objects.requireNonNull(parameterNames, "parameterNames");
    String graph = program.graph().graph().name();
    List<TensorType> parameters = program.graph().graph().parameterTypes();
    if (parameterNames.size() != parameters.size()) {
      throw new InvalidArgumentException("graph '" + graph + "' takes " + parameters.size() + " parameter(s) " + parameters
          + ", but " + parameterNames.size() + " name(s) were given " + parameterNames + ": name every parameter, in order");
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
        throw new InvalidArgumentException(what + " '" + e.getKey() + "' (" + e.getValue() + ") has no parameter of that "
            + "name in graph '" + graph + "': the parameters are " + parameterNames);
      }
      if (!parameters.get(p).equals(e.getValue())) {
        throw new InvalidArgumentException(what + " '" + e.getKey() + "' for parameter " + p + " of graph '" + graph
            + "': expected " + parameters.get(p) + ", got " + e.getValue());
      }
      if (program.graph().donatedParameters().contains(p)) {
        throw new InvalidArgumentException(what + " '" + e.getKey() + "' is bound to parameter " + p + " of graph '" + graph
            + "', which the program was segmented to donate: a bound parameter is shared read-only by every run and "
            + "cannot be donated; segment without donating(" + p + ")");
      }
    }
  }

  /** The model's name (its graph's). */
  public String name() {
    return name;
  }

  /** The program the model runs (not owned by the model). */
  public SegmentedProgram program() {
    return program;
  }

  /** The names of every parameter of the graph, in order (bound ones included). */
  public List<String> parameterNames() {
    return parameterNames;
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
    return program.graph().graph().outputTypes();
  }

  /**
   * The device the bound buffers live on, where outputs that are not a stage's are uploaded. A program of
   * host calls only (no stage, nothing bound) has none: refused with FAILED_PRECONDITION naming it.
   */
  public Device device() {
    if (home == null) {
      throw new XlaException(ErrorCode.FAILED_PRECONDITION, "segmented model '" + name + "' has no stage, so no device: "
          + "its graph is host calls only and runs on the host; run it with outputs on the host");
    }
    return home.device();
  }

  /** The names of the per-request inputs a run may donate (the program's donated parameters). */
  public Set<String> donatableInputs() {
    Set<String> names = new LinkedHashSet<>();
    for (int p : new java.util.TreeSet<>(program.graph().donatedParameters())) {
      names.add(parameterNames.get(p));
    }
    return Collections.unmodifiableSet(names);
  }

  /**
   * Runs on the per-request {@code inputs} (in {@link #inputNames()} order), host calls through {@code
   * invoker}; the outputs stay on the device and the caller owns them (see {@link
   * SegmentedProgram#executeArguments}). Blocks until the run is complete.
   */
  public DeviceResult execute(List<Argument> inputs, HostCallInvoker invoker) {
    try (Lease run = lease()) { // a closed model refuses here, naming itself
      String runName = "run " + runs.incrementAndGet() + " of segmented model '" + name + "'";
      return program.executeBound(all(inputs), copies, invoker, home, runName);
    }
  }

  /** As {@link #execute}, with every output downloaded to the host. */
  public Result run(List<Argument> inputs, HostCallInvoker invoker) {
    try (Lease run = lease()) {
      String runName = "run " + runs.incrementAndGet() + " of segmented model '" + name + "'";
      return program.runBound(all(inputs), copies, invoker, runName);
    }
  }

  /** Every parameter's argument: the bound buffers, and the checked inputs in their places. */
  private List<Argument> all(List<Argument> inputs) {
    Objects.requireNonNull(inputs, "inputs");
    if (inputs.size() != inputPositions.length) {
      throw new InvalidArgumentException("segmented model '" + name + "' takes " + inputPositions.length + " input(s) "
          + describeInputs() + ", got " + inputs.size());
    }
    for (int i = 0; i < inputs.size(); i++) {
      Argument a = inputs.get(i);
      if (a == null) {
        throw new NullPointerException("input " + i + " '" + inputNames.get(i) + "' of segmented model '" + name + "'");
      }
      if (!a.type().equals(inputTypes.get(i))) {
        throw new InvalidArgumentException("input " + i + " '" + inputNames.get(i) + "' of segmented model '" + name
            + "': expected " + inputTypes.get(i) + ", got " + a.type());
      }
      if (a instanceof Argument.Donated d) {
        for (int q = 0; q < boundByPosition.length; q++) {
          if (boundByPosition[q] != null && boundByPosition[q].sameMemoryAs(d.buffer())) {
            throw new InvalidArgumentException("input " + i + " '" + inputNames.get(i) + "' of segmented model '" + name
                + "' donates the buffer bound to parameter '" + parameterNames.get(q) + "': bound parameters are shared "
                + "read-only by every run and cannot be donated; donate a copy (copyToDevice)");
          }
        }
        if (!program.graph().donatedParameters().contains(inputPositions[i])) {
          throw new InvalidArgumentException("input " + i + " '" + inputNames.get(i) + "' of segmented model '" + name
              + "' is donated, but the program was not segmented to donate it; donatable inputs: " + donatableInputs()
              + ". Pass it with Argument.of(buffer), or segment with SegmentationOptions.defaults().donating("
              + inputPositions[i] + ")");
        }
      }
    }
    List<Argument> all = new ArrayList<>(boundByPosition.length);
    int next = 0;
    for (DeviceBuffer b : boundByPosition) {
      all.add(b != null ? Argument.of(b) : inputs.get(next++));
    }
    return all;
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
    return new XlaException(ErrorCode.FAILED_PRECONDITION, "segmented model '" + name + "' is closed: runs started "
        + "before close() finish, new runs are refused; load or bind it again");
  }

  @Override
  public String toString() {
    return "SegmentedModel(" + name + ", inputs " + describeInputs() + (isClosed() ? ", closed)" : ")");
  }
}
