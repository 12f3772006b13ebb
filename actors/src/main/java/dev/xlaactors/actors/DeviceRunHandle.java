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
  private final CompletionStage<List<DeviceBuffer>> result;
  private final ActorRef<RunSupervisor.Command> supervisor;

  DeviceRunHandle(long runId, CompletionStage<List<DeviceBuffer>> result, ActorRef<RunSupervisor.Command> supervisor) {
    this.runId = runId;
    this.result = result;
    this.supervisor = supervisor;
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
    return result;
  }

  /** Cancels the run: pending callbacks are failed at once and the run ends with a cancellation error. */
  public void cancel(String reason) {
    supervisor.tell(new RunSupervisor.Cancel(reason));
  }

  /** The run's supervisor, for callers that want to watch it. */
  public ActorRef<RunSupervisor.Command> supervisor() {
    return supervisor;
  }
}
