package dev.xlaactors.actors.jobs;

import dev.xlaactors.runtime.HostTensor;
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
 * <p>Not resumable: a generation that is cancelled or fails is started again from its first inputs.
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
  private List<HostTensor> current;

  private Generation(List<HostTensor> firstInputs, long maxSteps, Feedback feedback) {
    if (maxSteps < 1) {
      throw new IllegalArgumentException("maxSteps must be at least 1, got " + maxSteps);
    }
    this.firstInputs = List.copyOf(firstInputs);
    this.maxSteps = maxSteps;
    this.feedback = Objects.requireNonNull(feedback, "feedback");
  }

  /** A generation of at most {@code maxSteps} steps starting from {@code firstInputs}. */
  public static Generation create(List<HostTensor> firstInputs, long maxSteps, Feedback feedback) {
    return new Generation(firstInputs, maxSteps, feedback);
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
  public boolean accept(long step, List<HostTensor> outputs) throws Exception {
    Optional<List<HostTensor>> next = feedback.next(step, outputs);
    next.ifPresent(inputs -> current = List.copyOf(inputs));
    return next.isPresent();
  }

  @Override
  public void close() {}
}
