package dev.xlaactors.graph;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.graph.SegmentedGraph.HostCallStep;
import dev.xlaactors.graph.SegmentedGraph.IfStep;
import dev.xlaactors.graph.SegmentedGraph.Plan;
import dev.xlaactors.graph.SegmentedGraph.StageStep;
import dev.xlaactors.graph.SegmentedGraph.Step;
import dev.xlaactors.graph.SegmentedGraph.WhileStep;
import dev.xlaactors.runtime.Device;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * A {@link SegmentedGraph} compiled for a {@link Placement}, run by a plain-Java orchestrator: stage →
 * host call → stage …, loops and conditionals that call the host driven from Java. Values stay where they
 * were made: a stage's outputs stay on its device until a later stage uses them (moved through the host
 * only when that stage is on another client), a callback's results stay on the host until a stage needs
 * them, and a Java-driven loop brings only its one-element predicate to the host per iteration.
 *
 * <p>Thread-safe: runs are independent (each owns its buffers and frees them, on success or failure,
 * before {@link #run} returns). Close it to release the stages' executables.
 */
public final class SegmentedProgram implements AutoCloseable {
  /** Where a stage runs: a device of a client (of any plugin). */
  public record Target(XlaClient client, Device device) {
    public Target {
      if (client == null || device == null) {
        throw new InvalidArgumentException("a stage target needs a client and a device, got " + client + ", " + device);
      }
    }

    /** Device {@code index} of {@code client}. */
    public static Target of(XlaClient client, int index) {
      List<Device> devices = client.devices();
      if (index < 0 || index >= devices.size()) {
        throw new InvalidArgumentException("device index " + index + " out of range: " + client + " has "
            + devices.size() + " device(s)");
      }
      return new Target(client, devices.get(index));
    }

    @Override
    public String toString() {
      return client.platformName() + "@" + System.identityHashCode(client) + ":" + device.index();
    }
  }

  /** Chooses the target of each stage. */
  @FunctionalInterface
  public interface Placement {
    Target place(Stage stage);

    /** Every stage on {@code device} of {@code client} (the default: its first device). */
    static Placement on(XlaClient client, Device device) {
      Target t = new Target(client, device);
      return stage -> t;
    }

    /** Every stage on the first device of {@code client}. */
    static Placement on(XlaClient client) {
      return on(client, client.devices().get(0));
    }
  }

  /**
   * Runs the host calls of a segmented run. {@link #checkContinue} is called before every step, so that a
   * cancel or a run timeout stops the run between stages.
   */
  public interface HostCallInvoker {
    /** Runs {@code callback} on {@code inputs}; returns tensors matching its output template. */
    List<HostTensor> invoke(HostCallback callback, List<HostTensor> inputs) throws Exception;

    /** Throws (an {@link XlaException}) to stop the run before its next step. */
    default void checkContinue() {}

    /** Calls the callback's function on the calling thread. */
    static HostCallInvoker direct() {
      return (callback, inputs) -> callback.function().apply(inputs, callback.staticArgument());
    }
  }

  /**
   * What a run moved and executed.
   *
   * @param stageExecutions every stage executed, in order (a stage in a loop once per iteration)
   * @param hostCalls callbacks called
   * @param predicateReads one-element predicates brought to the host (loop conditions, branch choices)
   * @param bytesToHost bytes downloaded from devices (callback inputs, predicates, outputs, cross-client moves)
   * @param bytesToDevice bytes uploaded (inputs, callback results, cross-client moves)
   * @param crossClientMoves buffers moved between clients through the host
   * @param deviceMoves buffers copied directly between two devices of one client
   */
  public record RunStats(List<Executed> stageExecutions, int hostCalls, int predicateReads, long bytesToHost,
      long bytesToDevice, int crossClientMoves, int deviceMoves) {
    public RunStats {
      stageExecutions = List.copyOf(stageExecutions);
    }
  }

  /** One stage execution: the stage's index and where it ran (from its output buffers' client and device). */
  public record Executed(int stage, Target target) {}

  /** A run's outputs and what it moved. */
  public record Result(List<HostTensor> outputs, RunStats stats) {}

  private static final HostCall.JavaAnswer NO_ANSWER = new HostCall.JavaAnswer() {
    @Override
    public boolean complete(List<HostTensor> outputs) {
      return false;
    }

    @Override
    public boolean fail(ErrorCode code, String message) {
      return false;
    }
  };

  private final SegmentedGraph graph;
  private final Target[] targets;
  private final Executable[] executables;
  private final java.util.concurrent.atomic.AtomicLong openBuffers = new java.util.concurrent.atomic.AtomicLong();
  private final java.util.concurrent.atomic.AtomicLong runNumbers = new java.util.concurrent.atomic.AtomicLong();

  /** Compiles every stage for the target {@code placement} gives it. */
  public SegmentedProgram(SegmentedGraph graph, Placement placement) {
    this.graph = graph;
    List<Stage> stages = graph.stages();
    this.targets = new Target[stages.size()];
    this.executables = new Executable[stages.size()];
    try {
      for (Stage s : stages) {
        Target t = placement.place(s);
        if (t == null) {
          throw new InvalidArgumentException("placement returned no target for " + s);
        }
        checkPlaceable(t, s);
        targets[s.index()] = t;
        executables[s.index()] = t.client().compile(s.stablehlo());
        if (!executables[s.index()].addressableDevices().contains(t.device())) {
          throw new InvalidArgumentException("placement put " + s + " on " + t.device() + ", but its executable "
              + "can run only on " + executables[s.index()].addressableDevices());
        }
      }
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  private static void checkPlaceable(Target t, Stage s) {
    if (!t.client().devices().contains(t.device())) {
      throw new InvalidArgumentException("placement put " + s + " on device " + t.device()
          + ", which is not a device of " + t.client() + "; use one of " + t.client().devices());
    }
  }

  /** The plan this program runs. */
  public SegmentedGraph graph() {
    return graph;
  }

  /**
   * Device buffers the runs of this program hold right now: zero whenever no run is in progress, however
   * the runs ended (a check that nothing leaks).
   */
  public long openBuffers() {
    return openBuffers.get();
  }

  /** Where stage {@code index} runs. */
  public Target target(int index) {
    if (index < 0 || index >= targets.length) {
      throw new InvalidArgumentException("stage " + index + " of segmented program '" + graph.graph().name()
          + "' does not exist; its stages are 0 to " + (targets.length - 1));
    }
    return targets[index];
  }

  /** Runs the plan on {@code inputs} (checked against the graph's parameter types). */
  public Result run(List<HostTensor> inputs, HostCallInvoker invoker) {
    if (inputs == null) {
      throw new InvalidArgumentException("graph '" + graph.graph().name() + "': inputs are null");
    }
    List<Argument> arguments = new ArrayList<>(inputs.size());
    for (HostTensor t : inputs) {
      arguments.add(t == null ? null : Argument.of(t));
    }
    return runArguments(arguments, invoker);
  }

  /**
   * Runs the plan on {@code inputs}: host tensors, device buffers (weights kept on the device between
   * runs, outputs of an earlier run) that a stage on the buffer's own device reads in place, with no
   * upload, and that stay the caller's (a stage placed elsewhere gets a copy), or donated buffers. Only a
   * parameter the graph was segmented to donate ({@link SegmentationOptions#donating}) takes a donated
   * buffer: its one stage writes an output in the buffer's memory, and the buffer is closed when that
   * stage runs (a later use fails naming the run; a run that fails before that stage leaves it the
   * caller's); it must live on that stage's device.
   */
  public Result runArguments(List<Argument> inputs, HostCallInvoker invoker) {
    return runBound(inputs, Map.of(), invoker, null);
  }

  /**
   * As {@link #runArguments}, with the outputs left on the device: the caller owns (and closes) them. An
   * output a stage made stays where that stage ran, with no copy; an output that is on the host (a
   * callback's result, a host input) is uploaded to {@code outputs}, and one that is an input buffer, or
   * an output returned twice, is copied there, so every returned buffer is the caller's own.
   */
  public DeviceResult executeArguments(List<Argument> inputs, HostCallInvoker invoker, Target outputs) {
    return executeBound(inputs, Map.of(), invoker, outputs, null);
  }

  /** A run's outputs, left on the device (the caller owns and closes them), and what it moved. */
  public record DeviceResult(List<DeviceBuffer> outputs, RunStats stats) {}

  /**
   * As {@link #runArguments}, where each input {@code i} in {@code copies} is a buffer bound for many runs
   * (a model's weight, see {@code dev.xlaactors.runtime.model.SegmentedModel}) together with its copies
   * already made on other targets: a stage on one of those targets reads that copy, so nothing is copied
   * or uploaded per run. {@code runName} names the run in donation errors (null: this program's count).
   */
  public Result runBound(List<Argument> inputs, Map<Integer, Map<Target, DeviceBuffer>> copies, HostCallInvoker invoker,
      String runName) {
    return start(inputs, copies, invoker, runName, (run, root) -> {
      List<HostTensor> outputs = new ArrayList<>();
      for (Value v : graph.plan().results()) {
        outputs.add(run.toHost(root.lookup(v)));
      }
      return new Result(outputs, run.stats());
    });
  }

  /** As {@link #runBound}, with the outputs left on the device (see {@link #executeArguments}). */
  public DeviceResult executeBound(List<Argument> inputs, Map<Integer, Map<Target, DeviceBuffer>> copies,
      HostCallInvoker invoker, Target outputs, String runName) {
    if (outputs == null) {
      throw new InvalidArgumentException("segmented program '" + graph.graph().name() + "': no target for the outputs");
    }
    return start(inputs, copies, invoker, runName, (run, root) -> new DeviceResult(run.handOver(root, outputs), run.stats()));
  }

  private <T> T start(List<Argument> inputs, Map<Integer, Map<Target, DeviceBuffer>> copies, HostCallInvoker invoker,
      String runName, java.util.function.BiFunction<Execution, Frame, T> finish) {
    List<TensorType> expected = graph.graph().parameterTypes();
    if (inputs == null || inputs.size() != expected.size()) {
      throw new InvalidArgumentException("graph '" + graph.graph().name() + "' expects " + expected.size()
          + " input(s) " + expected + ", got " + (inputs == null ? "null" : inputs.size()));
    }
    for (int i = 0; i < inputs.size(); i++) {
      if (inputs.get(i) == null || !inputs.get(i).type().equals(expected.get(i))) {
        throw new InvalidArgumentException("input " + i + " of graph '" + graph.graph().name() + "': expected "
            + expected.get(i) + ", got " + (inputs.get(i) == null ? "null" : inputs.get(i).type()));
      }
      if (inputs.get(i) instanceof Argument.Donated && !graph.donatedParameters().contains(i)) {
        throw new InvalidArgumentException("input " + i + " of graph '" + graph.graph().name() + "' is donated, but this "
            + "segmented program does not take donated buffers for it (donatable inputs: " + graph.donatedParameters()
            + "): pass Argument.of(buffer), or segment with SegmentationOptions.defaults().donating(" + i + ")");
      }
    }
    Execution run = new Execution(invoker, runName != null ? runName
        : "run " + runNumbers.incrementAndGet() + " of segmented program '" + graph.graph().name() + "'");
    Frame root = new Frame(null);
    try {
      for (int i = 0; i < inputs.size(); i++) {
        Argument a = inputs.get(i);
        if (a instanceof Argument.OnDevice d) {
          Slot slot = new Slot();
          slot.device = d.buffer(); // the caller's: bound, never created, so never closed by the run
          slot.copies = copies.get(i);
          root.bind(graph.parameters().get(i), slot);
        } else if (a instanceof Argument.Donated d) {
          Slot slot = new Slot();
          slot.device = d.buffer(); // given to its one stage, which closes it (Executable.executeArguments)
          slot.donated = true;
          root.bind(graph.parameters().get(i), slot);
        } else {
          root.create(graph.parameters().get(i), onHost(((Argument.Host) a).tensor()));
        }
      }
      run.plan(graph.plan(), root);
      return finish.apply(run, root);
    } finally {
      root.closeExcept(Set.of());
    }
  }

  /**
   * Runs one stage on its placed device (its arguments already live there); a donated argument goes
   * through {@link Executable#executeArguments}, which checks and consumes it.
   */
  private List<DeviceBuffer> executeStage(int index, List<Argument> arguments, boolean donating, String runName) {
    if (donating) {
      return executables[index].executeArguments(arguments, null, targets[index].device(), runName + " (stage " + index + ")");
    }
    List<DeviceBuffer> buffers = new ArrayList<>(arguments.size());
    for (Argument a : arguments) {
      buffers.add(((Argument.OnDevice) a).buffer());
    }
    return executables[index].execute(buffers, null, targets[index].device());
  }

  @Override
  public void close() {
    for (Executable e : executables) {
      if (e != null) {
        e.close();
      }
    }
  }

  // ---------------------------------------------------------------------------------------------

  /** A value of a run: on the host, on a device, or both (a download is kept for the next host use). */
  private final class Slot {
    HostTensor host;
    DeviceBuffer device;
    Map<Target, DeviceBuffer> copies; // a bound buffer's copies on other targets, made once, not the run's
    boolean donated; // device is a donated input, given to the one stage that reads it

    void close() {
      if (device != null) {
        device.close();
        device = null;
        openBuffers.decrementAndGet();
      }
    }
  }

  private Slot onHost(HostTensor t) {
    Slot s = new Slot();
    s.host = t;
    return s;
  }

  private Slot onDevice(DeviceBuffer b) {
    openBuffers.incrementAndGet();
    Slot s = new Slot();
    s.device = b;
    return s;
  }

  /** The values of one scope (the run, one loop iteration, one branch) and the slots it owns. */
  private final class Frame {
    final Frame parent;
    final Map<Value, Slot> values = new IdentityHashMap<>();
    final List<Slot> created = new ArrayList<>();

    Frame(Frame parent) {
      this.parent = parent;
    }

    void bind(Value v, Slot s) {
      values.put(v, s);
    }

    void create(Value v, Slot s) {
      values.put(v, s);
      created.add(s);
    }

    Slot lookup(Value v) {
      Value r = graph.resolve(v);
      for (Frame f = this; f != null; f = f.parent) {
        Slot s = f.values.get(r);
        if (s != null) {
          return s;
        }
      }
      throw new IllegalStateException("segmented run of '" + graph.graph().name() + "': no value for " + r);
    }

    /** Moves {@code s} to {@code to}'s ownership if this frame owns it. */
    boolean transfer(Slot s, Frame to) {
      for (int i = 0; i < created.size(); i++) {
        if (created.get(i) == s) {
          created.remove(i);
          to.created.add(s);
          return true;
        }
      }
      return false;
    }

    void closeExcept(Set<Slot> keep) {
      for (Slot s : created) {
        if (!keep.contains(s)) {
          s.close();
        }
      }
      created.clear();
    }
  }

  private final class Execution {
    final HostCallInvoker invoker;
    final String runName;
    final List<Executed> executed = new ArrayList<>();
    int hostCalls;
    int predicateReads;
    long bytesToHost;
    long bytesToDevice;
    int crossClientMoves;
    int deviceMoves;

    Execution(HostCallInvoker invoker, String runName) {
      this.invoker = invoker;
      this.runName = runName;
    }

    /**
     * The results as buffers the caller owns: those the run made are handed over as they are; the others
     * (host values, input buffers, a buffer returned twice) are uploaded to, or copied through the host
     * to, {@code outputs}. On failure nothing is handed over.
     */
    List<DeviceBuffer> handOver(Frame root, Target outputs) {
      List<DeviceBuffer> result = new ArrayList<>();
      List<DeviceBuffer> made = new ArrayList<>(); // uploaded here: closed here if a later one fails
      Set<Slot> handed = identitySet();
      try {
        for (Value v : graph.plan().results()) {
          Slot s = root.lookup(v);
          if (s.device != null && !s.donated && !handed.contains(s) && root.created.contains(s)) {
            result.add(s.device);
            handed.add(s);
          } else {
            HostTensor host = toHost(s);
            DeviceBuffer b = outputs.client().upload(host, outputs.device());
            made.add(b);
            result.add(b);
            bytesToDevice += host.type().byteSize();
          }
        }
      } catch (RuntimeException e) {
        made.forEach(DeviceBuffer::close); // the handed ones are still the run's, closed with its frame
        throw e;
      }
      for (Slot s : handed) { // now the caller's: the run no longer closes them
        root.created.remove(s);
        openBuffers.decrementAndGet();
      }
      return result;
    }

    RunStats stats() {
      return new RunStats(executed, hostCalls, predicateReads, bytesToHost, bytesToDevice, crossClientMoves,
          deviceMoves);
    }

    void plan(Plan plan, Frame frame) {
      for (Step step : plan.steps()) {
        invoker.checkContinue();
        if (step instanceof StageStep s) {
          stage(s, frame);
        } else if (step instanceof HostCallStep h) {
          hostCall(h, frame);
        } else if (step instanceof WhileStep w) {
          loop(w, frame);
        } else if (step instanceof IfStep i) {
          branch(i, frame);
        }
      }
    }

    void stage(StageStep s, Frame frame) {
      int index = s.stage().index();
      Target target = targets[index];
      List<Argument> args = new ArrayList<>(s.inputs().size());
      List<DeviceBuffer> temporaries = new ArrayList<>();
      boolean donating = false;
      try {
        for (Value v : s.inputs()) {
          Slot slot = frame.lookup(v);
          if (slot.donated) {
            args.add(Argument.donated(donatedOn(slot, target, index)));
            donating = true;
          } else {
            args.add(Argument.of(onTarget(slot, target, temporaries)));
          }
        }
        List<DeviceBuffer> outs = executeStage(index, args, donating, runName);
        // Where it ran, as the output buffers say (not as the placement asked).
        executed.add(new Executed(index, outs.isEmpty() ? target
            : new Target(outs.get(0).client(), outs.get(0).device())));
        for (int i = 0; i < outs.size(); i++) {
          frame.create(s.outputs().get(i), onDevice(outs.get(i)));
        }
      } finally {
        for (DeviceBuffer t : temporaries) {
          t.close();
          openBuffers.decrementAndGet();
        }
      }
    }

    /**
     * The slot's buffer on {@code target}: as it is when it already lives on that client; uploaded from
     * the host (the upload kept in the slot when the slot had no buffer yet); or, on another client,
     * moved through the host (a temporary the caller frees).
     */
    DeviceBuffer onTarget(Slot slot, Target target, List<DeviceBuffer> temporaries) {
      if (slot.copies != null && slot.copies.containsKey(target)) {
        return slot.copies.get(target); // a bound buffer's copy, made when it was bound
      }
      if (slot.device != null && slot.device.client() == target.client()) {
        if (slot.device.device().equals(target.device())) {
          return slot.device;
        }
        DeviceBuffer moved = slot.device.copyToDevice(target.device()); // a direct PJRT copy
        openBuffers.incrementAndGet();
        temporaries.add(moved);
        deviceMoves++;
        return moved;
      }
      if (slot.device != null) {
        crossClientMoves++;
      }
      HostTensor host = toHost(slot);
      DeviceBuffer uploaded = target.client().upload(host, target.device());
      openBuffers.incrementAndGet();
      bytesToDevice += host.type().byteSize();
      if (slot.device == null) {
        slot.device = uploaded;
      } else {
        temporaries.add(uploaded);
      }
      return uploaded;
    }

    /** A donated input's buffer, which must already live where its stage runs (it is consumed there). */
    DeviceBuffer donatedOn(Slot slot, Target target, int stage) {
      DeviceBuffer b = slot.device;
      if (b.client() != target.client() || !b.device().equals(target.device())) {
        throw new InvalidArgumentException("a donated input of " + runName + " lives on " + b.device() + ", but stage "
            + stage + ", which consumes it, runs on " + target + ": donate a buffer on that device (copyToDevice)");
      }
      return b;
    }

    HostTensor toHost(Slot slot) {
      if (slot.host == null) {
        slot.host = slot.device.toHost();
        bytesToHost += slot.host.type().byteSize();
      }
      return slot.host;
    }

    void hostCall(HostCallStep h, Frame frame) {
      HostCallback callback = h.callback();
      List<HostTensor> inputs = new ArrayList<>(h.inputs().size());
      for (int i = 0; i < h.inputs().size(); i++) { // refused as a fused run refuses it, before any download
        TensorType type = h.inputs().get(i).type();
        if (type.byteSize() > HostCall.MAX_INPUT_BYTES) {
          // The exception a fused run gets when the bridge refuses the input.
          throw new dev.xlaactors.error.ExecutionFailedException(ErrorCode.RESOURCE_EXHAUSTED,
              "execution failed: " + HostCall.inputTooLarge(callback.name(), i, type));
        }
      }
      for (Value v : h.inputs()) {
        inputs.add(toHost(frame.lookup(v)));
      }
      List<HostTensor> outputs;
      try {
        outputs = invoker.invoke(callback, inputs);
      } catch (XlaException e) {
        throw e;
      } catch (Exception e) {
        throw new dev.xlaactors.error.CallbackException(callback.name(), ErrorCode.ABORTED, "callback '"
            + callback.name() + "' threw " + e.getClass().getName() + ": " + e.getMessage(), e);
      }
      hostCalls++;
      Optional<String> mismatch = HostCall.madeByJava(0, -1, callback.name(), inputs, callback.outputTemplate(),
          NO_ANSWER).mismatch(outputs);
      if (mismatch.isPresent()) {
        throw new dev.xlaactors.error.CallbackException(callback.name(), ErrorCode.INVALID_ARGUMENT, mismatch.get());
      }
      for (int i = 0; i < outputs.size(); i++) {
        frame.create(h.results().get(i), onHost(outputs.get(i)));
      }
    }

    boolean predicate(Slot slot) {
      predicateReads++;
      return toHost(slot).toBooleanArray()[0];
    }

    void loop(WhileStep w, Frame frame) {
      List<Slot> carried = new ArrayList<>();
      for (Value v : w.initial()) {
        carried.add(frame.lookup(v));
      }
      Set<Slot> loopOwned = identitySet();
      boolean done = false;
      try {
        while (true) {
          Frame condition = new Frame(frame);
          boolean again;
          try {
            bindAll(condition, w.conditionArguments(), carried);
            plan(w.condition(), condition);
            again = predicate(condition.lookup(w.condition().results().get(0)));
          } finally {
            condition.closeExcept(Set.of());
          }
          if (!again) {
            break;
          }
          invoker.checkContinue();
          Frame body = new Frame(frame);
          List<Slot> next = new ArrayList<>();
          Set<Slot> nextOwned = identitySet();
          try {
            bindAll(body, w.bodyArguments(), carried);
            plan(w.body(), body);
            for (Value v : w.body().results()) {
              Slot s = body.lookup(v);
              next.add(s);
              if (loopOwned.contains(s) || body.created.contains(s)) {
                nextOwned.add(s);
              }
            }
          } finally {
            body.closeExcept(nextOwned);
          }
          for (Slot s : loopOwned) {
            if (!nextOwned.contains(s)) {
              s.close();
            }
          }
          loopOwned = nextOwned;
          carried = next;
        }
        bindAll(frame, w.results(), carried);
        frame.created.addAll(loopOwned);
        done = true;
      } finally {
        if (!done) {
          loopOwned.forEach(Slot::close);
        }
      }
    }

    void branch(IfStep i, Frame frame) {
      boolean which = predicate(frame.lookup(i.predicate()));
      Plan chosen = which ? i.onTrue() : i.onFalse();
      Frame branch = new Frame(frame);
      Set<Slot> keep = identitySet();
      try {
        plan(chosen, branch);
        for (int k = 0; k < chosen.results().size(); k++) {
          Slot s = branch.lookup(chosen.results().get(k));
          if (branch.created.contains(s)) {
            keep.add(s);
          }
          frame.bind(i.results().get(k), s);
        }
        frame.created.addAll(keep);
      } finally {
        branch.closeExcept(keep);
      }
    }
  }

  private static void bindAll(Frame frame, List<Value> names, List<Slot> slots) {
    for (int i = 0; i < names.size(); i++) {
      frame.bind(names.get(i), slots.get(i));
    }
  }

  private static Set<Slot> identitySet() {
    return Collections.newSetFromMap(new IdentityHashMap<>());
  }

  @Override
  public String toString() {
    return "SegmentedProgram(" + graph + ")";
  }
}
