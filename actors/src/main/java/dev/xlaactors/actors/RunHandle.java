package dev.xlaactors.actors;

import dev.xlaactors.runtime.HostTensor;
import java.util.List;
import java.util.concurrent.CompletionStage;
import org.apache.pekko.actor.typed.ActorRef;

/**
 * A run in progress, started by {@link CallbackRuntime#start}: its id, its eventual outputs, and a way to
 * cancel it.
 */
public final class RunHandle {
  private final long runId;
  private final RunState<List<HostTensor>> state;

  RunHandle(long runId, RunState<List<HostTensor>> state) {
    this.runId = runId;
    this.state = state;
  }

  public long runId() {
    return runId;
  }

  /**
   * The run's outputs; completes exceptionally with a {@link dev.xlaactors.error.CallbackException} when a
   * callback aborted it, or another {@link dev.xlaactors.error.XlaException} when XLA failed.
   */
  public CompletionStage<List<HostTensor>> result() {
    return state.result();
  }

  /**
   * Completes when the run has really ended: its execution returned (XLA gave its thread back), or it will
   * never execute (cancelled while it waited for a run thread, or refused). A cancelled or timed-out run's
   * {@link #result()} fails at once, while XLA may still compute; a caller that bounds how many runs are in
   * progress (a model server's batches in flight) counts one until this completes. Never fails.
   */
  public CompletionStage<Void> ended() {
    return state.whenEnded().minimalCompletionStage();
  }

  /** What a {@link #cancel} did, once the run has ended. */
  public enum CancelOutcome {
    /** The run ended cancelled: its result failed with {@code CANCELLED}. */
    CANCELLED,
    /** The run had already finished, or finished before the cancel reached it: its outputs stand. */
    ALREADY_FINISHED,
    /** The run had already failed, or failed for another reason before the cancel reached it. */
    ALREADY_FAILED
  }

  /**
   * Cancels the run: pending callbacks are failed at once and the run ends with a cancellation error. A
   * run that finishes before the cancel reaches it keeps its outputs, so the returned stage says, once the
   * run has ended, what happened; callers that do not care may ignore it.
   */
  public CompletionStage<CancelOutcome> cancel(String reason) {
    return state.cancel(reason);
  }

  /**
   * The run's supervisor, for callers that want to watch it. A run spawns its supervisor only when it
   * needs one (see {@link RunSupervisor}): asking for it spawns it. If the run has already ended, the
   * supervisor is spawned stopping, so watching it still tells its end.
   */
  public ActorRef<RunSupervisor.Command> supervisor() {
    return state.supervisor();
  }
}
