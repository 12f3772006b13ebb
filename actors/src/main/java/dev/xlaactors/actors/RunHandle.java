package dev.xlaactors.actors;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
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
  private final CompletionStage<List<HostTensor>> result;
  private final ActorRef<RunSupervisor.Command> supervisor;

  RunHandle(long runId, CompletionStage<List<HostTensor>> result, ActorRef<RunSupervisor.Command> supervisor) {
    this.runId = runId;
    this.result = result;
    this.supervisor = supervisor;
  }

  public long runId() {
    return runId;
  }

  /**
   * The run's outputs; completes exceptionally with a {@link dev.xlaactors.error.CallbackException} when a
   * callback aborted it, or another {@link dev.xlaactors.error.XlaException} when XLA failed.
   */
  public CompletionStage<List<HostTensor>> result() {
    return result;
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
    supervisor.tell(new RunSupervisor.Cancel(reason));
    return result.handle((outputs, failure) -> {
      if (failure == null) {
        return CancelOutcome.ALREADY_FINISHED;
      }
      Throwable cause = failure instanceof java.util.concurrent.CompletionException && failure.getCause() != null ? failure.getCause() : failure;
      return cause instanceof XlaException x && x.code() == ErrorCode.CANCELLED ? CancelOutcome.CANCELLED : CancelOutcome.ALREADY_FAILED;
    });
  }

  /** The run's supervisor, for callers that want to watch it. */
  public ActorRef<RunSupervisor.Command> supervisor() {
    return supervisor;
  }
}
