package dev.xlaactors.actors.jobs;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Model;
import dev.xlaactors.runtime.model.SegmentedModel;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.javadsl.Routers;

/**
 * A pool of {@link ComputationActor}s of one program, for concurrent requests: {@code
 * xla-actors.actors.computations.pool-size} workers, each serving one run at a time, requests handed
 * round robin. Spawn it and send it {@link ComputationActor.Run} as to a single computation.
 *
 * <p>Every worker compiles the program; the client's compile cache makes all but the first compile
 * cheap. A worker resumes after an internal failure (see {@link ComputationActor#create}), so the pool
 * keeps its size; if every worker stopped, the pool would stop too.
 */
public final class ComputationPool {
  private ComputationPool() {}

  /** A pool of {@code settings.poolSize()} computations of {@code program}. */
  public static Behavior<ComputationActor.Command> create(
      Program program, XlaClient client, CallbackRuntime callbacks, JobSettings settings) {
    return Routers.pool(settings.poolSize(), ComputationActor.create(program, client, callbacks, settings))
        .withRoundRobinRouting();
  }

  /**
   * A pool of {@code settings.poolSize()} computations serving one {@code model}: nothing is compiled or
   * uploaded per worker, every worker's runs share the model's bound buffers read-only. The model stays
   * the caller's (see {@link ComputationActor#create(Model, CallbackRuntime, JobSettings)}).
   */
  public static Behavior<ComputationActor.Command> create(Model model, CallbackRuntime callbacks, JobSettings settings) {
    return Routers.pool(settings.poolSize(), ComputationActor.create(model, callbacks, settings)).withRoundRobinRouting();
  }

  /**
   * A pool of {@code settings.poolSize()} computations serving one segmented {@code model}, its weights
   * shared read-only by every worker's runs (see {@link ComputationActor#create(SegmentedModel,
   * CallbackRuntime, JobSettings)}). The model stays the caller's.
   */
  public static Behavior<ComputationActor.Command> create(SegmentedModel model, CallbackRuntime callbacks,
      JobSettings settings) {
    return Routers.pool(settings.poolSize(), ComputationActor.create(model, callbacks, settings)).withRoundRobinRouting();
  }
}
