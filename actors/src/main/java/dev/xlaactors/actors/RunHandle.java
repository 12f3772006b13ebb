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

  /** Cancels the run: pending callbacks are failed at once and the run ends with a cancellation error. */
  public void cancel(String reason) {
    supervisor.tell(new RunSupervisor.Cancel(reason));
  }

  /** The run's supervisor, for callers that want to watch it. */
  public ActorRef<RunSupervisor.Command> supervisor() {
    return supervisor;
  }
}
