package dev.xlaactors.actors.jobs;

import dev.xlaactors.actors.ActorsSettings;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.DeviceRunHandle;
import dev.xlaactors.actors.RunHandle;
import dev.xlaactors.error.CompileException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.graph.SegmentedProgram;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.LoadedPackage;
import dev.xlaactors.runtime.model.Model;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.Role;
import dev.xlaactors.runtime.model.SegmentedModel;
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
 * <p>A computation may also serve a {@link Model} (see {@link #create(Model, CallbackRuntime,
 * JobSettings)}): nothing to compile, the bound parameters stay on the device, and each request passes
 * only its per-request inputs; a program of a {@link LoadedPackage} is served the same way (see {@link
 * #create(LoadedPackage, Role, int, CallbackRuntime, JobSettings)}). Either kind takes {@link RunArguments} (host tensors, device buffers or
 * donated buffers) and {@link RunOnDevice} (outputs left on the device, owned by the requester).
 *
 * <p>When it stops, a run in progress is cancelled (its pending callbacks fail at once) and the
 * executable is closed (a model given by the caller stays the caller's).
 */
public final class ComputationActor extends AbstractBehavior<ComputationActor.Command> {

  /** Messages a computation understands. */
  public sealed interface Command {}

  /** Runs the program on {@code inputs}; the reply is its outputs, or the error that ended the run. */
  public record Run(List<HostTensor> inputs, ActorRef<StatusReply<List<HostTensor>>> replyTo) implements Command {}

  /**
   * Runs on {@code inputs} ({@link Argument}s: host tensors, device buffers, donated buffers); a model's
   * computation takes its per-request inputs only. The reply is the outputs on the host, or the error.
   */
  public record RunArguments(List<Argument> inputs, ActorRef<StatusReply<List<HostTensor>>> replyTo) implements Command {}

  /**
   * As {@link RunArguments}, with the outputs left on the device: the reply's buffers belong to the
   * requester, who closes them (or passes them to the next run). A failed or cancelled run replies with
   * the error and leaves no buffers behind.
   */
  public record RunOnDevice(List<Argument> inputs, ActorRef<StatusReply<List<DeviceBuffer>>> replyTo) implements Command {}

  private record Compiled(Executable executable) implements Command {}

  private record CompileFailed(Throwable cause) implements Command {}

  private record RunFinished(Command request, List<?> outputs, Throwable failure) implements Command {}

  private final Program program;
  private final XlaClient client;
  private final CallbackRuntime callbacks;
  private final Executor blocking;
  private final StashBuffer<Command> queue;
  private Executable executable;
  private XlaException startFailure;
  private boolean busy;
  private Runnable cancelCurrent;
  private Model model; // the caller's (model computations) or made over the executable for argument runs
  private SegmentedModel segmented; // the caller's, for a segmented model's computation; else null
  private final boolean ownsModel;
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
    return resumingWithQueue(settings, (context, queue) -> new ComputationActor(context, queue, program, client, callbacks));
  }

  /**
   * A computation serving {@code model}, which stays the caller's (close it after the computation has
   * stopped; closing it earlier makes later requests fail naming it). Requests pass the model's
   * per-request inputs ({@link Run} host tensors, or {@link RunArguments}/{@link RunOnDevice}). With
   * {@code callbacks} every run goes through that runtime (supervised callbacks, cancellation); without,
   * runs execute directly, so a model whose program calls host callbacks needs {@code callbacks}. Several
   * computations (a {@link ComputationPool}) may serve one model: its bound buffers are shared read-only.
   * Supervision as {@link #create(Program, XlaClient, CallbackRuntime, JobSettings)}.
   */
  public static Behavior<Command> create(Model model, CallbackRuntime callbacks, JobSettings settings) {
    java.util.Objects.requireNonNull(model, "model");
    return resumingWithQueue(settings, (context, queue) -> new ComputationActor(context, queue, model, callbacks));
  }

  /**
   * A computation serving the {@code main} program of {@code loaded} at its smallest batch size: {@link
   * #create(LoadedPackage, Role, int, CallbackRuntime, JobSettings)} with {@link Role#MAIN}.
   */
  public static Behavior<Command> create(LoadedPackage loaded, CallbackRuntime callbacks, JobSettings settings) {
    java.util.Objects.requireNonNull(loaded, "loaded");
    java.util.SortedMap<Integer, Model> main = loaded.models(Role.MAIN);
    if (main.isEmpty()) {
      throw new InvalidArgumentException("model package '" + loaded.modelPackage().name() + "' (kind "
          + loaded.modelPackage().kind().jsonName() + ") has no main program to default to: name the role and size, "
          + "one of " + loaded.modelPackage().programs().stream().map(p -> p.describe()).toList());
    }
    return create(loaded, Role.MAIN, main.firstKey(), callbacks, settings);
  }

  /**
   * A computation serving the program of {@code role} at {@code size} of a loaded package, as {@link
   * #create(Model, CallbackRuntime, JobSettings)}: requests pass the program's inputs after the weights.
   * The package lends the Model ({@code loaded} closes it: close the package after the computation has
   * stopped). Refused at once when the package calls host callbacks and {@code callbacks} is null, or
   * when any of them is not registered on {@code callbacks} ({@link CallbackRuntime#checkCallbacks}).
   */
  public static Behavior<Command> create(LoadedPackage loaded, Role role, int size, CallbackRuntime callbacks,
      JobSettings settings) {
    return create(programOf(loaded, role, size, callbacks), callbacks, settings);
  }

  /**
   * The Model of {@code role} at {@code size} of {@code loaded}, once the package's host callbacks are known
   * to be served by {@code callbacks}: where a package meets the runtime.
   */
  static Model programOf(LoadedPackage loaded, Role role, int size, CallbackRuntime callbacks) {
    java.util.Objects.requireNonNull(loaded, "loaded");
    ModelPackage pkg = loaded.modelPackage();
    if (callbacks == null) {
      if (!pkg.hostCallbacks().isEmpty()) {
        throw new InvalidArgumentException("model package '" + pkg.name() + "' calls host callbacks "
            + pkg.hostCallbacks() + ": give the computation a CallbackRuntime on which they are registered");
      }
    } else {
      callbacks.checkCallbacks(pkg);
    }
    return loaded.model(role, size);
  }

  /**
   * A computation serving a segmented {@code model} (stages with host calls between them, weights bound
   * once), as {@link #create(Model, CallbackRuntime, JobSettings)}: requests pass its per-request inputs,
   * {@link RunOnDevice} leaves the outputs on the device, a donated input is consumed by its stage. With
   * {@code callbacks} the host calls are supervised (timeouts, cancellation between stages); without,
   * they are called directly on the run thread. The model stays the caller's.
   */
  public static Behavior<Command> create(SegmentedModel model, CallbackRuntime callbacks, JobSettings settings) {
    java.util.Objects.requireNonNull(model, "model");
    return resumingWithQueue(settings, (context, queue) -> new ComputationActor(context, queue, model, callbacks));
  }

  /**
   * The computation made by {@code make}, with its queue of {@code settings.queueCapacity()} requests; a
   * failure inside the actor resumes it (see {@link #create(Program, XlaClient, CallbackRuntime, JobSettings)}).
   */
  private static Behavior<Command> resumingWithQueue(
      JobSettings settings, java.util.function.BiFunction<ActorContext<Command>, StashBuffer<Command>, ComputationActor> make) {
    return Behaviors.<Command>supervise(
            Behaviors.setup(context -> Behaviors.withStash(settings.queueCapacity(), queue -> make.apply(context, queue))))
        .onFailure(SupervisorStrategy.resume());
  }

  private ComputationActor(
      ActorContext<Command> context, StashBuffer<Command> queue, Program program, XlaClient client, CallbackRuntime callbacks) {
    super(context);
    this.queue = queue;
    this.program = program;
    this.client = client;
    this.callbacks = callbacks;
    this.ownsModel = true;
    ActorsSettings actors = callbacks != null ? callbacks.settings() : ActorsSettings.create(context.getSystem());
    this.blocking = context.getSystem().dispatchers().lookup(DispatcherSelector.fromConfig(actors.runDispatcher()));
    context.pipeToSelf(
        CompletableFuture.supplyAsync(this::compile, blocking),
        (exe, failure) -> failure == null ? new Compiled(exe) : new CompileFailed(unwrap(failure)));
  }

  private ComputationActor(ActorContext<Command> context, StashBuffer<Command> queue, Model model, CallbackRuntime callbacks) {
    super(context);
    this.queue = queue;
    this.program = null;
    this.client = model.client();
    this.callbacks = callbacks;
    this.model = model;
    this.ownsModel = false;
    ActorsSettings actors = callbacks != null ? callbacks.settings() : ActorsSettings.create(context.getSystem());
    this.blocking = context.getSystem().dispatchers().lookup(DispatcherSelector.fromConfig(actors.runDispatcher()));
  }

  private ComputationActor(
      ActorContext<Command> context, StashBuffer<Command> queue, SegmentedModel segmented, CallbackRuntime callbacks) {
    super(context);
    this.queue = queue;
    this.program = null;
    this.client = null;
    this.callbacks = callbacks;
    this.segmented = segmented;
    this.ownsModel = false;
    ActorsSettings actors = callbacks != null ? callbacks.settings() : ActorsSettings.create(context.getSystem());
    this.blocking = context.getSystem().dispatchers().lookup(DispatcherSelector.fromConfig(actors.runDispatcher()));
  }

  private String describe() {
    if (segmented != null) {
      return segmented.toString();
    }
    return program != null ? program.toString() : "Model(" + model.name() + ")";
  }

  private boolean ready() {
    return program == null || executable != null;
  }

  @Override
  public Receive<Command> createReceive() {
    return newReceiveBuilder()
        .onMessage(Run.class, this::onRun)
        .onMessage(RunArguments.class, this::onRun)
        .onMessage(RunOnDevice.class, this::onRun)
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

  private Behavior<Command> onRun(Command r) {
    if (startFailure != null) {
      fail(r, startFailure);
    } else if (!ready() || busy) {
      if (queue.isFull()) {
        fail(r, new XlaException(ErrorCode.RESOURCE_EXHAUSTED,
            describe() + " has " + queue.size() + " requests waiting (xla-actors.actors.computations.queue-capacity)"));
      } else {
        queue.stash(r);
      }
    } else {
      start(r);
    }
    return this;
  }

  private static void fail(Command request, Throwable failure) {
    if (request instanceof Run r) {
      r.replyTo().tell(StatusReply.error(failure));
    } else if (request instanceof RunArguments r) {
      r.replyTo().tell(StatusReply.error(failure));
    } else if (request instanceof RunOnDevice r) {
      r.replyTo().tell(StatusReply.error(failure));
    }
  }

  @SuppressWarnings("unchecked")
  private static void succeed(Command request, List<?> outputs) {
    if (request instanceof Run r) {
      r.replyTo().tell(StatusReply.success((List<HostTensor>) outputs));
    } else if (request instanceof RunArguments r) {
      r.replyTo().tell(StatusReply.success((List<HostTensor>) outputs));
    } else if (request instanceof RunOnDevice r) {
      r.replyTo().tell(StatusReply.success((List<DeviceBuffer>) outputs));
    }
  }

  /**
   * The model every run uses: the caller's, or one made once over the compiled executable ({@link
   * Model#of}: a run of host tensors takes the executable's own path, as a program's runs always have).
   */
  private Model model() {
    if (model == null) {
      model = Model.of(executable);
    }
    return model;
  }

  private boolean supervised() {
    return program != null ? program.callsHost() : callbacks != null;
  }

  private void start(Command request) {
    busy = true;
    CompletionStage<? extends List<?>> outputs;
    try {
      if (segmented != null) {
        outputs = startSegmented(request);
      } else if (request instanceof RunOnDevice r) {
        Model m = model();
        if (supervised()) {
          DeviceRunHandle handle = callbacks.startOnDevice(m, r.inputs());
          cancelCurrent = () -> handle.cancel(describe() + " stopped");
          outputs = handle.result();
        } else {
          outputs = CompletableFuture.supplyAsync(() -> m.execute(r.inputs(), null), blocking);
        }
      } else {
        Model m = model();
        List<Argument> in = request instanceof RunArguments r ? r.inputs() : Argument.of(((Run) request).inputs());
        if (supervised()) {
          RunHandle handle = callbacks.start(m, in);
          cancelCurrent = () -> handle.cancel(describe() + " stopped");
          outputs = handle.result();
        } else {
          outputs = CompletableFuture.supplyAsync(() -> m.run(in, null), blocking);
        }
      }
    } catch (RuntimeException e) {
      // The run could not even start (e.g. its callback runtime's actor system is gone): answer this
      // request with the error, and stay free for the next one instead of busy forever.
      outputs = CompletableFuture.failedFuture(e);
    }
    getContext().pipeToSelf(outputs, (out, failure) -> new RunFinished(request, out, failure == null ? null : unwrap(failure)));
  }

  /** A run of the segmented model: supervised through the callback runtime, or direct on the run dispatcher. */
  private CompletionStage<? extends List<?>> startSegmented(Command request) {
    SegmentedModel m = segmented;
    if (request instanceof RunOnDevice r) {
      if (callbacks != null) {
        DeviceRunHandle handle = callbacks.startOnDevice(m, r.inputs());
        cancelCurrent = () -> handle.cancel(describe() + " stopped");
        return handle.result();
      }
      return CompletableFuture.supplyAsync(() -> m.execute(r.inputs(), SegmentedProgram.HostCallInvoker.direct()).outputs(),
          blocking);
    }
    List<Argument> in = request instanceof RunArguments r ? r.inputs() : Argument.of(((Run) request).inputs());
    if (callbacks != null) {
      RunHandle handle = callbacks.start(m, in);
      cancelCurrent = () -> handle.cancel(describe() + " stopped");
      return handle.result();
    }
    return CompletableFuture.supplyAsync(() -> m.run(in, SegmentedProgram.HostCallInvoker.direct()).outputs(), blocking);
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
    cancelCurrent = null;
    if (f.failure() == null) {
      succeed(f.request(), f.outputs());
    } else {
      getContext().getLog().debug("a run of {} failed: {}", describe(), f.failure().toString());
      fail(f.request(), f.failure());
    }
    return queue.isEmpty() ? this : queue.unstash(this, 1, m -> m);
  }

  private Behavior<Command> onPostStop(PostStop signal) {
    if (cancelCurrent != null) {
      cancelCurrent.run();
    }
    if (ownsModel && model != null) {
      model.close(); // a run in progress holds the model until it ends
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
