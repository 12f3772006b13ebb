package dev.xlaactors.actors.jobs;

import dev.xlaactors.actors.ActorsSettings;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.RunHandle;
import dev.xlaactors.error.CompileException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.XlaClient;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.actor.typed.PostStop;
import org.apache.pekko.actor.typed.SupervisorStrategy;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.actor.typed.javadsl.StashBuffer;
import org.apache.pekko.pattern.StatusReply;

/**
 * A compiled program as an actor: it compiles its {@link Program} once, off the actor's thread, then
 * serves {@link Run} requests one at a time, each answered with the outputs or an error. Requests that
 * arrive while it compiles or while a run is in progress wait in its queue ({@code
 * xla-actors.actors.computations.queue-capacity}; past it a request is refused at once).
 *
 * <p>A failed run is an error reply to its requester only; the actor keeps serving. A program that does
 * not compile (or whose host callbacks cannot be registered) makes every request, queued or later, an
 * error reply naming the compile error. Programs with host callbacks run through the {@link
 * CallbackRuntime} (so their callbacks are supervised and a run can be cancelled); others run directly.
 * Compiling and running happen on the blocking run dispatcher ({@code xla-actors.actors.runs.dispatcher}).
 *
 * <p>When it stops, a run in progress is cancelled (its pending callbacks fail at once) and the
 * executable is closed.
 */
public final class ComputationActor extends AbstractBehavior<ComputationActor.Command> {

  /** Messages a computation understands. */
  public sealed interface Command {}

  /** Runs the program on {@code inputs}; the reply is its outputs, or the error that ended the run. */
  public record Run(List<HostTensor> inputs, ActorRef<StatusReply<List<HostTensor>>> replyTo) implements Command {}

  private record Compiled(Executable executable) implements Command {}

  private record CompileFailed(Throwable cause) implements Command {}

  private record RunFinished(Run request, List<HostTensor> outputs, Throwable failure) implements Command {}

  private final Program program;
  private final XlaClient client;
  private final CallbackRuntime callbacks;
  private final Executor blocking;
  private final StashBuffer<Command> queue;
  private Executable executable;
  private XlaException startFailure;
  private boolean busy;
  private RunHandle current;
  /** Guards the hand-over of the executable between the compiling thread and PostStop. */
  private final Object lifecycle = new Object();
  private boolean stopped;
  private Executable compiledExecutable;

  /**
   * A computation of {@code program} on {@code client}; {@code callbacks} runs programs with host
   * callbacks and may be null for programs without. A failure inside the actor (a bug, never a failed
   * run: those are replies) resumes it, keeping its executable and its queue: a restart would compile
   * again and drop the queued requests.
   */
  public static Behavior<Command> create(Program program, XlaClient client, CallbackRuntime callbacks, JobSettings settings) {
    if (program.callsHost() && callbacks == null) {
      throw new InvalidArgumentException(program + " calls host callbacks: give the computation a CallbackRuntime");
    }
    return Behaviors.<Command>supervise(
            Behaviors.setup(
                context ->
                    Behaviors.withStash(
                        settings.queueCapacity(),
                        queue -> new ComputationActor(context, queue, program, client, callbacks))))
        .onFailure(SupervisorStrategy.resume());
  }

  private ComputationActor(
      ActorContext<Command> context, StashBuffer<Command> queue, Program program, XlaClient client, CallbackRuntime callbacks) {
    super(context);
    this.queue = queue;
    this.program = program;
    this.client = client;
    this.callbacks = callbacks;
    ActorsSettings actors = callbacks != null ? callbacks.settings() : ActorsSettings.create(context.getSystem());
    this.blocking = context.getSystem().dispatchers().lookup(DispatcherSelector.fromConfig(actors.runDispatcher()));
    context.pipeToSelf(
        CompletableFuture.supplyAsync(this::compile, blocking),
        (exe, failure) -> failure == null ? new Compiled(exe) : new CompileFailed(unwrap(failure)));
  }

  @Override
  public Receive<Command> createReceive() {
    return newReceiveBuilder()
        .onMessage(Run.class, this::onRun)
        .onMessage(Compiled.class, this::onCompiled)
        .onMessage(CompileFailed.class, this::onCompileFailed)
        .onMessage(RunFinished.class, this::onRunFinished)
        .onSignal(PostStop.class, this::onPostStop)
        .build();
  }

  /**
   * Runs on the blocking dispatcher: registers the program's callbacks, then compiles it. If the actor
   * stopped meanwhile, its PostStop has run without this executable, so it is closed here instead.
   */
  private Executable compile() {
    if (!program.hostCallbacks().isEmpty()) {
      callbacks.registerAll(program.hostCallbacks()).toCompletableFuture().join();
    }
    Executable exe = client.compile(program.stablehlo());
    synchronized (lifecycle) {
      if (stopped) {
        exe.close();
        throw new CancellationException(program + ": the computation stopped while it compiled");
      }
      compiledExecutable = exe;
    }
    return exe;
  }

  private Behavior<Command> onRun(Run r) {
    if (startFailure != null) {
      r.replyTo().tell(StatusReply.error(startFailure));
    } else if (executable == null || busy) {
      if (queue.isFull()) {
        r.replyTo()
            .tell(StatusReply.error(new XlaException(ErrorCode.RESOURCE_EXHAUSTED,
                program + " has " + queue.size() + " requests waiting (xla-actors.actors.computations.queue-capacity)")));
      } else {
        queue.stash(r);
      }
    } else {
      start(r);
    }
    return this;
  }

  private void start(Run r) {
    busy = true;
    CompletionStage<List<HostTensor>> outputs;
    try {
      if (program.callsHost()) {
        current = callbacks.start(executable, r.inputs());
        outputs = current.result();
      } else {
        Executable exe = executable;
        outputs = CompletableFuture.supplyAsync(() -> exe.run(r.inputs(), null), blocking);
      }
    } catch (RuntimeException e) {
      // The run could not even start (e.g. its callback runtime's actor system is gone): answer this
      // request with the error, and stay free for the next one instead of busy forever.
      outputs = CompletableFuture.failedFuture(e);
    }
    getContext().pipeToSelf(outputs, (out, failure) -> new RunFinished(r, out, failure == null ? null : unwrap(failure)));
  }

  private Behavior<Command> onCompiled(Compiled c) {
    executable = c.executable();
    getContext().getLog().debug("{} compiled", program);
    return queue.unstashAll(this);
  }

  private Behavior<Command> onCompileFailed(CompileFailed f) {
    Throwable cause = f.cause();
    startFailure =
        cause instanceof CompileException ce
            ? new CompileException(ce.code(), program + " did not compile: " + ce.getMessage())
            : new InvalidArgumentException(program + " could not be prepared: " + cause.getClass().getName() + ": " + cause.getMessage());
    startFailure.initCause(cause);
    getContext().getLog().error("{}", startFailure.getMessage());
    return queue.unstashAll(this);
  }

  private Behavior<Command> onRunFinished(RunFinished f) {
    busy = false;
    current = null;
    if (f.failure() == null) {
      f.request().replyTo().tell(StatusReply.success(f.outputs()));
    } else {
      getContext().getLog().debug("a run of {} failed: {}", program, f.failure().toString());
      f.request().replyTo().tell(StatusReply.error(f.failure()));
    }
    return queue.isEmpty() ? this : queue.unstash(this, 1, m -> m);
  }

  private Behavior<Command> onPostStop(PostStop signal) {
    if (current != null) {
      current.cancel(program + " stopped");
    }
    Executable exe;
    synchronized (lifecycle) {
      stopped = true;
      exe = compiledExecutable; // set even if the Compiled message never arrived
    }
    if (exe != null) {
      exe.close(); // a run still in progress holds its own lease, so this is safe
    }
    return this;
  }

  private static Throwable unwrap(Throwable t) {
    return t instanceof CompletionException && t.getCause() != null ? t.getCause() : t;
  }
}
