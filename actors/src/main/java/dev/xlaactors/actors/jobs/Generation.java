package dev.xlaactors.actors.jobs;

import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.model.Argument;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * An autoregressive loop: step 0 runs on the first inputs; after each step, {@link Feedback} turns the
 * step's outputs into the next step's inputs, or says stop. At most {@code maxSteps} steps. The sampling
 * itself usually happens in a host callback of the step program (so it runs in the middle of the step);
 * the feedback then only reads the sampled token and the stop flag out of the outputs.
 *
 * <p>With device state ({@link #withDeviceState}), the first {@code k} parameters and outputs of the step
 * are a state that never leaves the device (a KV cache): each step's state outputs become the next step's
 * state inputs, donated to it, so PJRT updates the state in place; the feedback sees only the other
 * outputs, downloaded. The generation owns the state and frees it when the job ends.
 *
 * <p>Not resumable: a generation that is cancelled or fails is started again from its first inputs. With
 * device state a failed step cannot even be retried (its state was donated to it): the job fails at once.
 */
public final class Generation implements JobWork {

  /** Decides what comes after a step. Runs on a blocking dispatcher, one step at a time. */
  @FunctionalInterface
  public interface Feedback {
    /** The next step's inputs, or empty to stop after {@code step}. */
    Optional<List<HostTensor>> next(long step, List<HostTensor> outputs) throws Exception;
  }

  private final List<HostTensor> firstInputs;
  private final long maxSteps;
  private final Feedback feedback;
  private final List<DeviceBuffer> initialState; // empty without device state
  private List<HostTensor> current;
  private List<DeviceBuffer> state;

  private Generation(List<DeviceBuffer> initialState, List<HostTensor> firstInputs, long maxSteps, Feedback feedback) {
    if (maxSteps < 1) {
      throw new IllegalArgumentException("maxSteps must be at least 1, got " + maxSteps);
    }
    this.initialState = List.copyOf(initialState);
    this.firstInputs = List.copyOf(firstInputs);
    this.maxSteps = maxSteps;
    this.feedback = Objects.requireNonNull(feedback, "feedback");
    this.state = this.initialState;
  }

  /** A generation of at most {@code maxSteps} steps starting from {@code firstInputs}. */
  public static Generation create(List<HostTensor> firstInputs, long maxSteps, Feedback feedback) {
    return new Generation(List.of(), firstInputs, maxSteps, feedback);
  }

  /**
   * A generation whose step takes {@code initialState} (device buffers, given to the generation: it
   * donates them to step 0 and frees the last state when the job ends) as its first parameters, then the
   * host inputs; the step's first {@code initialState.size()} outputs are the next state. The step's
   * program must alias each state parameter to its output ({@code tf.aliasing_output}, JAX's {@code
   * donate_argnums}), else the first step fails naming the parameter. Run it in an {@link InferenceJob}.
   */
  public static Generation withDeviceState(
      List<DeviceBuffer> initialState, List<HostTensor> firstInputs, long maxSteps, Feedback feedback) {
    if (initialState.isEmpty()) {
      throw new IllegalArgumentException("withDeviceState needs at least one state buffer; use create otherwise");
    }
    return new Generation(initialState, firstInputs, maxSteps, feedback);
  }

  @Override
  public Plan open() {
    current = firstInputs;
    return new Plan(maxSteps, 0);
  }

  @Override
  public OptionalLong next(long previous) {
    return previous + 1 < maxSteps ? OptionalLong.of(previous + 1) : OptionalLong.empty();
  }

  @Override
  public List<HostTensor> input(long step) {
    return current;
  }

  @Override
  public List<Argument> arguments(long step) {
    List<Argument> arguments = new ArrayList<>(state.size() + current.size());
    for (DeviceBuffer b : state) {
      if (b.isDonated() || b.isClosed()) {
        throw new FatalJobException("step " + step + " of the generation cannot run: its device state " + b.type()
            + " was given to an earlier attempt of the step that failed, so it is gone; start the generation again");
      }
      arguments.add(Argument.donated(b));
    }
    for (HostTensor t : current) {
      arguments.add(Argument.of(t));
    }
    return arguments;
  }

  @Override
  public boolean outputsOnDevice() {
    return !initialState.isEmpty();
  }

  @Override
  public boolean acceptOnDevice(long step, List<DeviceBuffer> outputs) throws Exception {
    int k = initialState.size();
    if (outputs.size() < k) {
      outputs.forEach(DeviceBuffer::close);
      throw new FatalJobException("the step returned " + outputs.size() + " output(s), fewer than its " + k + " state buffer(s)");
    }
    state = List.copyOf(outputs.subList(0, k));
    List<HostTensor> rest = new ArrayList<>(outputs.size() - k);
    try {
      for (DeviceBuffer b : outputs.subList(k, outputs.size())) {
        rest.add(b.toHost());
      }
    } finally {
      outputs.subList(k, outputs.size()).forEach(DeviceBuffer::close);
    }
    return accept(step, rest);
  }

  @Override
  public boolean accept(long step, List<HostTensor> outputs) throws Exception {
    Optional<List<HostTensor>> next = feedback.next(step, outputs);
    next.ifPresent(inputs -> current = List.copyOf(inputs));
    return next.isPresent();
  }

  @Override
  public void close() {
    state.forEach(DeviceBuffer::close);
  }
}
