package dev.xlaactors.actors;

import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.graph.SegmentedProgram;
import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import java.util.function.Predicate;

/**
 * The host calls of a segmented run, made by Java between stages and handed to the run's {@link
 * RunSupervisor} exactly as the native bridge hands a fused run's calls: the same dispatcher, timeouts,
 * errors and metrics. The orchestrating thread waits for the answer (at most the call's backstop, as an
 * XLA thread would), and stops before the next step once the supervisor aborted the run.
 */
final class SupervisedHostCalls implements SegmentedProgram.HostCallInvoker {
  /** Tags of Java-made calls are negative, so they never meet the native bridge's. */
  private static final AtomicLong JAVA_TAGS = new AtomicLong();

  private final long runId;
  private final RunState<?> state;
  private final Function<String, Duration> backstop;
  private final RuntimeMetrics metrics;
  private final Predicate<HostCall> direct;
  private final long spinNanos;

  /**
   * Calls of run {@code runId}: each is first offered to {@code direct} (the runtime's fast path, true if
   * it took the call), else told to the run's supervisor (spawned then if the run has none yet); the
   * orchestrating thread spins {@code spin} for the answer before it parks, and waits at most the call's
   * {@code backstop}.
   */
  SupervisedHostCalls(long runId, RunState<?> state,
      Function<String, Duration> backstop, RuntimeMetrics metrics, Predicate<HostCall> direct, Duration spin) {
    this.runId = runId;
    this.state = state;
    this.backstop = backstop;
    this.metrics = metrics;
    this.direct = direct;
    this.spinNanos = spin.toNanos();
  }

  @Override
  public List<HostTensor> invoke(HostCallback callback, List<HostTensor> inputs) {
    checkContinue();
    CompletableFuture<List<HostTensor>> answer = new CompletableFuture<>();
    HostCall call = HostCall.madeByJava(runId, JAVA_TAGS.decrementAndGet(), callback.name(), inputs, callback.outputTemplate(),
        new HostCall.JavaAnswer() {
          @Override
          public boolean complete(List<HostTensor> outputs) {
            return answer.complete(outputs);
          }

          @Override
          public boolean fail(ErrorCode code, String message) {
            return answer.completeExceptionally(new CallbackException(callback.name(), code, message));
          }
        });
    Duration wait = backstop.apply(callback.name());
    long arrived = System.nanoTime();
    if (!direct.test(call)) {
      state.supervisor().tell(new RunSupervisor.HostCallArrived(call));
    }
    for (long until = arrived + spinNanos; !answer.isDone() && System.nanoTime() < until; ) {
      Thread.onSpinWait();
    }
    try {
      return answer.get(Math.max(1, wait.toMillis()), TimeUnit.MILLISECONDS);
    } catch (ExecutionException e) {
      throw abortCauseOr((CallbackException) e.getCause());
    } catch (TimeoutException e) {
      if (call.fail(ErrorCode.DEADLINE_EXCEEDED, "no answer within the backstop")) {
        metrics.recordCallback(callback.name(), System.nanoTime() - arrived, true, true); // the actors lost it
      }
      throw abortCauseOr(new CallbackException(callback.name(), ErrorCode.DEADLINE_EXCEEDED,
          "callback '" + callback.name() + "' got no answer within " + wait.toMillis()
              + " ms (the backstop behind its timeout, xla-actors.actors.runs.native-backstop-slack)"));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      call.fail(ErrorCode.CANCELLED, "the orchestrating thread was interrupted");
      throw new CallbackException(callback.name(), ErrorCode.CANCELLED, "run " + runId + " was interrupted");
    }
  }

  private CallbackException abortCauseOr(CallbackException fallback) {
    CallbackException cause = state.abortCause();
    return cause != null ? cause : fallback;
  }

  /** Stops the run between stages once its supervisor aborted it (cancel, run timeout, failed callback). */
  @Override
  public void checkContinue() {
    CallbackException cause = state.abortCause();
    if (cause != null) {
      throw cause;
    }
  }
}
