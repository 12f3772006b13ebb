package dev.xlaactors.actors;

import dev.xlaactors.runtime.DeviceBuffer;
import java.util.List;
import java.util.concurrent.CompletionStage;
import org.apache.pekko.actor.typed.ActorRef;

/**
 * A run in progress whose outputs stay on the device, started by {@link CallbackRuntime#startOnDevice}:
 * its id, its eventual output buffers (the caller owns and closes them), and a way to cancel it. A run
 * that fails or is cancelled gives no buffers, and frees any XLA produced after the abort.
 */
public final class DeviceRunHandle {
  private final long runId;
  private final RunState<List<DeviceBuffer>> state;

  DeviceRunHandle(long runId, RunState<List<DeviceBuffer>> state) {
    this.runId = runId;
    this.state = state;
  }

  public long runId() {
    return runId;
  }

  /**
   * The run's output buffers, owned by the caller; completes exceptionally with a {@link
   * dev.xlaactors.error.CallbackException} when a callback aborted the run, or another {@link
   * dev.xlaactors.error.XlaException} when XLA failed.
   */
  public CompletionStage<List<DeviceBuffer>> result() {
    return state.result();
  }

  /**
   * Cancels the run, as {@link RunHandle#cancel}: pending callbacks are failed at once and the run ends
   * with a cancellation error. A run that finishes before the cancel reaches it keeps its buffers (still
   * the caller's to close), so the returned stage says, once the run has ended, what happened.
   */
  public CompletionStage<RunHandle.CancelOutcome> cancel(String reason) {
    return state.cancel(reason);
  }

  /** The run's supervisor, for callers that want to watch it: see {@link RunHandle#supervisor()}. */
  public ActorRef<RunSupervisor.Command> supervisor() {
    return state.supervisor();
  }
}
