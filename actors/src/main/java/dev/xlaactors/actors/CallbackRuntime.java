package dev.xlaactors.actors;

import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.SegmentationOptions;
import dev.xlaactors.graph.SegmentedProgram;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostFunction;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.RunContext;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.BoundProgram;
import dev.xlaactors.runtime.model.Model;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.SegmentedModel;
import java.util.function.Consumer;
import java.util.function.Function;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pekko.actor.Cancellable;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.pattern.StatusReply;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;

/**
 * Runs compiled programs whose host callbacks are served by Java through actors: one {@link
 * CallbackDispatcher} per runtime, and one {@link RunSupervisor} per run that needs one (a call served
 * by an actor, a failed or overdue callback, a cancel, a run timeout; a run whose callbacks all go
 * straight to their functions in time ends without one). The entry point of the actors module for
 * callbacks.
 *
 * <pre>{@code
 * CallbackRuntime callbacks = CallbackRuntime.create(system, client);
 * callbacks.register("double", List.of(TensorType.of(F32, 4)), null, (in, s) -> List.of(twice(in.get(0))))
 *     .toCompletableFuture().join();
 * try (Model model = Model.of(executable)) {
 *   List<HostTensor> out = callbacks.run(model, Argument.of(List.of(x)));
 * }
 * }</pre>
 *
 * <p>Every run takes one handle, a {@link BoundProgram}: a {@link Model} (one fused program, weights
 * bound or not) or a {@link SegmentedModel} (stages with host calls between them), run four ways: {@link
 * #run} and {@link #start} with outputs on the host, {@link #runOnDevice} and {@link #startOnDevice}
 * with outputs left on the device. A graph becomes one by {@link #compile(Graph, RunMode)}, fused
 * (Phase 1) or segmented (Phase 2), chosen per graph or by {@code xla-actors.actors.runs.mode}; both use
 * this runtime's registry, timeouts and supervision.
 *
 * <p>Thread-safe. Closing it stops the dispatcher; the actor system and the client stay the caller's.
 */
public final class CallbackRuntime implements AutoCloseable {
  private static final AtomicLong RUN_IDS = new AtomicLong();
  private static final AtomicLong RUNTIME_IDS = new AtomicLong();
  private static final Logger METRICS_LOG = LoggerFactory.getLogger(RuntimeMetrics.class);

  private final ActorSystem<?> system;
  private final XlaClient client;
  private final ActorsSettings settings;
  private final ActorRef<CallbackDispatcher.Command> dispatcher;
  private final RuntimeMetrics metrics = new RuntimeMetrics();
  private final Executor runExecutor;
  private final CallbackThreads callbackThreads;
  private final DirectCallWatchdog watchdog;
  private final AtomicReference<Map<String, CallbackDispatcher.FunctionEntry>> functions = new AtomicReference<>(Map.of());
  private final AtomicReference<Set<String>> registeredNames = new AtomicReference<>(Set.of());
  private final AtomicInteger queuedRuns = new AtomicInteger();
  private final Cancellable metricsLogging;
  private final java.util.Map<Graph, SegmentedProgram> segmentedPrograms = new java.util.concurrent.ConcurrentHashMap<>();

  private CallbackRuntime(ActorSystem<?> system, XlaClient client, ActorsSettings settings) {
    this.system = system;
    this.client = client;
    this.settings = settings;
    long runtimeId = RUNTIME_IDS.incrementAndGet();
    this.callbackThreads =
        new CallbackThreads(
            "xla-callbacks-" + runtimeId, settings.callbackThreads(), settings.maxStuckThreads(), settings.callbackSpin());
    metrics.watchStuckThreads(callbackThreads::stuck);
    this.watchdog = new DirectCallWatchdog("xla-callback-timeouts-" + runtimeId, DirectCallWatchdog.tickFor(settings));
    HostCall.setAnswerSpin(settings.callbackSpin());
    this.dispatcher =
        system.systemActorOf(
            CallbackDispatcher.create(callbackThreads, functions, registeredNames, settings.callbackTimeouts().keySet()), "xla-callback-dispatcher-" + runtimeId, Props.empty());
    this.runExecutor = system.dispatchers().lookup(DispatcherSelector.fromConfig(settings.runDispatcher()));
    this.metricsLogging =
        settings.logMetrics()
            ? system
                .scheduler()
                .scheduleAtFixedRate(
                    settings.metricsLogInterval(),
                    settings.metricsLogInterval(),
                    this::logMetrics,
                    system.executionContext())
            : null;
  }

  private void logMetrics() {
    if (metrics.runs().count() > 0) {
      METRICS_LOG.info("{}", metrics);
    }
  }

  /** A runtime with the settings of the system's config ({@code xla-actors.actors}). */
  public static CallbackRuntime create(ActorSystem<?> system, XlaClient client) {
    return new CallbackRuntime(system, client, ActorsSettings.create(system));
  }

  /** A runtime with explicit settings (for instance read from another config than the system's). */
  public static CallbackRuntime create(ActorSystem<?> system, XlaClient client, ActorsSettings settings) {
    return new CallbackRuntime(system, client, settings);
  }

  /** The dispatcher, for registering callbacks or callback servers by message. */
  public ActorRef<CallbackDispatcher.Command> dispatcher() {
    return dispatcher;
  }

  /** Counts and latencies of the runs and callbacks of this runtime. */
  public RuntimeMetrics metrics() {
    return metrics;
  }

  /** The settings this runtime was created with. */
  public ActorsSettings settings() {
    return settings;
  }

  /** Registers {@code function} as the callback {@code name} (null: the dispatcher names it). */
  public CompletionStage<CallbackId> register(
      String name, List<TensorType> outputTemplate, Object staticArgument, HostFunction function) {
    String missing = missingArgument(name, outputTemplate, function, CallbackOptions.DEFAULT);
    if (missing != null) {
      return CompletableFuture.failedFuture(new InvalidArgumentException(missing));
    }
    return AskPattern.askWithStatus(
        dispatcher,
        (ActorRef<StatusReply<CallbackId>> replyTo) ->
            new CallbackDispatcher.Register(name, outputTemplate, staticArgument, function, replyTo),
        settings.registrationTimeout(),
        system.scheduler());
  }

  /**
   * What is missing from a registration, or null: a null argument fails the registration at once instead
   * of reaching the dispatcher, where it would only time out.
   */
  private static String missingArgument(String name, List<TensorType> outputTemplate, HostFunction function, CallbackOptions options) {
    String which = "register of callback " + (name == null ? "(unnamed)" : "'" + name + "'");
    if (outputTemplate == null) {
      return which + " needs an output template (a list of tensor types, empty for none), got null";
    }
    for (int i = 0; i < outputTemplate.size(); i++) {
      if (outputTemplate.get(i) == null) {
        return which + " has a null output type at index " + i + " of its template";
      }
    }
    if (function == null) {
      return which + " needs a function, got null";
    }
    if (options == null) {
      return which + " needs options (CallbackOptions.DEFAULT for the usual), got null";
    }
    return null;
  }

  /** Registers a callback a graph uses (see {@code GraphBuilder.hostCall}). */
  public CompletionStage<CallbackId> register(HostCallback callback) {
    return register(callback, CallbackOptions.DEFAULT);
  }

  /**
   * Registers {@code callback}, called as {@code options} say: inline on XLA's thread, with inputs
   * borrowed from XLA instead of copied, or both (see {@link CallbackOptions}).
   */
  public CompletionStage<CallbackId> register(HostCallback callback, CallbackOptions options) {
    String missing = callback == null ? "register needs a callback, got null"
        : missingArgument(callback.name(), callback.outputTemplate(), callback.function(), options);
    if (missing != null) {
      return CompletableFuture.failedFuture(new InvalidArgumentException(missing));
    }
    return AskPattern.askWithStatus(
        dispatcher,
        (ActorRef<StatusReply<CallbackId>> replyTo) -> new CallbackDispatcher.Register(callback.name(),
            callback.outputTemplate(), callback.staticArgument(), callback.function(), options, replyTo),
        settings.registrationTimeout(),
        system.scheduler());
  }

  /**
   * Registers {@code callback} to run inline: on the thread that made the call (XLA's thread, as JAX runs
   * its callbacks), saving the two thread hand-offs of a call (a few microseconds when both threads are
   * awake, tens when one has to be woken). Only for functions that never block, run programs or wait for
   * other callbacks: while the function runs, that XLA thread computes nothing else.
   *
   * <p>Timeouts still hold, checked from outside: when the call's timeout passes, the run fails at once
   * with {@code DEADLINE_EXCEEDED} naming the callback, and what the function returns later is dropped
   * and not counted. The function itself is not interrupted (the thread is XLA's). A call that cannot
   * take the direct path (a run's second concurrent call, say) runs on the callback threads as usual.
   */
  public CompletionStage<CallbackId> registerInline(HostCallback callback) {
    return register(callback, CallbackOptions.DEFAULT.withInline());
  }

  /** Registers every callback of {@code callbacks} (e.g. {@code graph.hostCallbacks()}). */
  public CompletionStage<List<CallbackId>> registerAll(List<HostCallback> callbacks) {
    List<CompletableFuture<CallbackId>> registrations =
        callbacks.stream().map(c -> register(c).toCompletableFuture()).toList();
    return CompletableFuture.allOf(registrations.toArray(CompletableFuture[]::new))
        .thenApply(done -> registrations.stream().map(CompletableFuture::join).toList());
  }

  /** Registers an actor that serves the callback {@code name} (see {@link CallbackServer}). */
  public CompletionStage<CallbackId> registerServer(
      String name, List<TensorType> outputTemplate, ActorRef<CallbackServer.Request> server) {
    String missing = server == null ? "registerServer of callback '" + name + "' needs a server actor, got null"
        : missingArgument(name, outputTemplate, (in, s) -> in, CallbackOptions.DEFAULT);
    if (missing != null) {
      return CompletableFuture.failedFuture(new InvalidArgumentException(missing));
    }
    return AskPattern.askWithStatus(
        dispatcher,
        (ActorRef<StatusReply<CallbackId>> replyTo) ->
            new CallbackDispatcher.RegisterServer(name, outputTemplate, server, replyTo),
        settings.registrationTimeout(),
        system.scheduler());
  }

  /**
   * Refuses, before anything runs, to serve {@code pkg} on this runtime while any of its {@link
   * ModelPackage#hostCallbacks()} is not registered here: a run would otherwise start and fail at its first
   * call. Whoever serves a package calls it where the package meets the runtime (a {@code ModelServer} of
   * a package's batched model, a {@code ComputationActor} or job of a package's program). Registration is
   * asynchronous: call it after the registrations' stages have completed.
   *
   * @throws XlaException FAILED_PRECONDITION naming the missing callbacks and how to register them
   */
  public void checkCallbacks(ModelPackage pkg) {
    Objects.requireNonNull(pkg, "pkg");
    checkCallbacks("model package '" + pkg.name() + "' (" + pkg.directory() + ")", pkg.hostCallbacks());
  }

  /**
   * As {@link #checkCallbacks(ModelPackage)}, for {@code what} (named in the refusal) calling the host
   * callbacks {@code names}.
   */
  public void checkCallbacks(String what, Collection<String> names) {
    List<String> missing = missingCallbacks(names);
    if (!missing.isEmpty()) {
      throw new XlaException(ErrorCode.FAILED_PRECONDITION, what + " calls host callbacks " + missing + " that are not "
          + "registered on this CallbackRuntime (registered: " + new TreeSet<>(registeredNames.get()) + "): register "
          + (missing.size() == 1 ? "it" : "each") + " first (callbacks.register(name, outputTemplate, staticArgument, "
          + "function), registerInline or registerServer) and wait for the registration to complete");
    }
  }

  /** The names of {@code names} not registered on this runtime now, sorted; empty when all are. */
  public List<String> missingCallbacks(Collection<String> names) {
    Set<String> registered = registeredNames.get();
    return new TreeSet<>(names).stream().filter(n -> !registered.contains(n)).toList();
  }

  /**
   * Unregisters the callback name {@code name} (see {@link CallbackDispatcher.Unregister}), so it can be
   * registered again with another function or server; fails with NOT_FOUND if it was not registered.
   */
  public CompletionStage<CallbackId> unregister(String name) {
    return AskPattern.askWithStatus(
        dispatcher,
        (ActorRef<StatusReply<CallbackId>> replyTo) -> new CallbackDispatcher.Unregister(name, replyTo),
        settings.registrationTimeout(),
        system.scheduler());
  }

  // ---------------------------------------------------------------------------------------------
  // Runs: one program handle (a Model or a SegmentedModel), outputs on the host or left on the device

  /**
   * Starts a run of {@code program} on its per-request {@code inputs} (host tensors, device buffers,
   * donated buffers: see {@link Argument}; {@link Argument#of(List)} turns host tensors into arguments) on
   * the run dispatcher; returns at once, and the handle's result gives the outputs on the host. The bound
   * parameters stay on the device and are not sent again; a segmented program can be cancelled between
   * stages. The run waits for a run thread if all are busy (its timeout starts when it executes); past
   * {@code xla-actors.actors.runs.queue-capacity} waiting runs it is refused with RESOURCE_EXHAUSTED.
   */
  public RunHandle start(BoundProgram program, List<Argument> inputs) {
    Started<List<HostTensor>> run = startQueued(KEEP, toHost(program, inputs));
    return new RunHandle(run.runId(), run.state());
  }

  /**
   * Runs {@code program} on {@code inputs} on the calling thread and returns its outputs on the host, as
   * JAX does: no hand-off to another thread and back. The run is bounded all the same (run and callback
   * timeouts, native backstop). Throws a {@link CallbackException} when a callback aborted the run, or
   * another {@link XlaException}. An aborted run never returns outputs; but XLA cannot be stopped
   * mid-computation, so if the run is aborted while XLA computes without calling back, this returns
   * (throwing the cause) only when XLA gives the thread back: use {@link #start} to learn of the abort at
   * once. Do not call it from an actor's thread: it blocks. Called from a callback (a nested run), another
   * thread serves callbacks while this one waits.
   */
  public List<HostTensor> run(BoundProgram program, List<Argument> inputs) {
    return runHere(KEEP, toHost(program, inputs));
  }

  /**
   * Starts a run of {@code program} whose outputs stay on the device: the handle's result gives buffers
   * the caller owns and closes (one run's output can be the next run's input, with no host round trip).
   * A run that fails or is cancelled gives no buffers: outputs XLA produced after the abort are freed.
   */
  public DeviceRunHandle startOnDevice(BoundProgram program, List<Argument> inputs) {
    Started<List<DeviceBuffer>> run = startQueued(CLOSE, onDevice(program, inputs));
    return new DeviceRunHandle(run.runId(), run.state());
  }

  /**
   * Runs {@code program} on the calling thread, as {@link #run}, with its outputs left on the device (see
   * {@link #startOnDevice}): the caller owns and closes them.
   */
  public List<DeviceBuffer> runOnDevice(BoundProgram program, List<Argument> inputs) {
    return runHere(CLOSE, onDevice(program, inputs));
  }

  /** The body of a run of {@code program} whose outputs are downloaded to the host. */
  private RunBody<List<HostTensor>> toHost(BoundProgram program, List<Argument> inputs) {
    Objects.requireNonNull(program, "program");
    if (program instanceof SegmentedModel segmented) {
      return (runId, state) -> executeSegmented(invoker -> segmented.run(inputs, invoker).outputs(), runId, state);
    }
    Model model = (Model) program;
    return (runId, state) -> execute(context -> model.run(inputs, context), runId, state);
  }

  /** The body of a run of {@code program} whose outputs stay on the device, the caller's. */
  private RunBody<List<DeviceBuffer>> onDevice(BoundProgram program, List<Argument> inputs) {
    Objects.requireNonNull(program, "program");
    if (program instanceof SegmentedModel segmented) {
      return (runId, state) -> executeSegmented(invoker -> segmented.execute(inputs, invoker).outputs(), runId, state);
    }
    Model model = (Model) program;
    return (runId, state) -> execute(context -> model.execute(inputs, context), runId, state);
  }

  private static final Consumer<List<HostTensor>> KEEP = outputs -> {}; // host outputs: the GC takes them
  private static final Consumer<List<DeviceBuffer>> CLOSE = outputs -> outputs.forEach(DeviceBuffer::close);

  /** A started run: its id and its state (its eventual outcome, its supervisor when it needs one). */
  private record Started<T>(long runId, RunState<T> state) {}

  /** The body of a run, on the thread that executes it, given the run's id and state. */
  private interface RunBody<T> {
    T execute(long runId, RunState<T> state);
  }

  private <T> T runHere(Consumer<? super T> discard, RunBody<T> body) {
    // Called from a callback (a nested run): another thread serves callbacks while this one waits.
    return callbackThreads.whileWaiting(() -> {
      long runId = RUN_IDS.incrementAndGet();
      RunState<T> state = newRunState(runId, discard);
      state.executing(settings.runTimeout());
      return body.execute(runId, state);
    });
  }
  private <T> Started<T> startQueued(Consumer<? super T> discard, RunBody<T> body) {
    if (queuedRuns.incrementAndGet() > settings.runQueueCapacity()) {
      queuedRuns.decrementAndGet();
      throw new XlaException(ErrorCode.RESOURCE_EXHAUSTED,
          "run refused: " + settings.runQueueCapacity() + " started runs already wait for a run thread"
              + " (xla-actors.actors.runs.queue-capacity = " + settings.runQueueCapacity() + "); wait for runs to finish,"
              + " or raise that key or the run-dispatcher's pool size");
    }
    long runId = RUN_IDS.incrementAndGet();
    RunState<T> state = newRunState(runId, discard);
    try {
      runExecutor.execute(() -> {
        queuedRuns.decrementAndGet();
        if (state.decided()) {
          state.ended(); // cancelled while it waited: never executed
          return;
        }
        state.executing(settings.runTimeout());
        try {
          body.execute(runId, state);
        } catch (RuntimeException failed) {
          // already the run's outcome (state.result()), which is what the handle reports
        }
      });
    } catch (RuntimeException rejected) {
      queuedRuns.decrementAndGet();
      state.ended();
      throw new XlaException(ErrorCode.UNAVAILABLE, "run refused: the run dispatcher did not accept it: " + rejected, rejected);
    }
    return new Started<>(runId, state);
  }

  /** The state of run {@code runId}, which spawns the run's supervisor when the run first needs it. */
  private <T> RunState<T> newRunState(long runId, Consumer<? super T> discard) {
    return new RunState<>(metrics, (state, deadlineNanos) -> {
      metrics.recordSupervisorSpawned();
      return system.systemActorOf(
          RunSupervisor.create(runId, state, dispatcher, settings, metrics, callbackThreads, deadlineNanos),
          "xla-run-" + runId, Props.empty());
    }, discard);
  }

  /**
   * How long the native side waits for an answer to a call of {@code callback} made now: the call's own
   * timeout, or what is left of the run's if that is shorter, plus the slack.
   */
  private Duration nativeBackstop(String callback, long runDeadlineNanos) {
    Duration callTimeout = settings.callbackTimeoutOf(callback);
    Duration runLeft = Duration.ofNanos(Math.max(0, runDeadlineNanos - System.nanoTime()));
    return min(callTimeout, runLeft).plus(settings.nativeBackstopSlack());
  }

  /** Executes a run whose {@link RunState#executing} was called: its deadline is set. */
  private <T> T execute(Function<RunContext, T> body, long runId, RunState<T> state) {
    long runDeadline = state.deadlineNanos();
    MDC.put("runId", Long.toString(runId));
    watchdog.watch(state);
    try (RunContext context =
        RunContext.withHostCalls(
            client.plugin(),
            runId,
            call -> {
              state.issued(call);
              if (!dispatchDirectly(call, state)) {
                state.supervisor().tell(new RunSupervisor.HostCallArrived(call));
              }
            },
            name -> nativeBackstop(name, runDeadline),
            this::borrowsInputs)) {
      state.attach(context);
      T outputs;
      try {
        outputs = body.apply(context);
      } catch (RuntimeException e) {
        List<HostCall> givenUp = countGivenUpNatively(state);
        throw state.failed(givenUp.isEmpty() ? e : backstopFired(givenUp.get(0), e));
      }
      countGivenUpNatively(state);
      return state.succeeded(outputs);
    } finally {
      watchdog.unwatch(state);
      state.ended();
      MDC.remove("runId");
    }
  }

  /**
   * The fast path of a host call, on the XLA thread: a call to a registered function (resolved in the
   * dispatcher's published snapshot) whose run has no other call in flight goes straight to the callback
   * threads, one hand-off, and its function answers XLA directly, one hand-off back, with no actor
   * message and no supervisor (the run spawns one only if the call fails, or is overdue: the {@link
   * DirectCallWatchdog} tells it then); a supervisor that aborts the run finds the call in the run's
   * state. Anything else (an actor-served or unknown name, a wrong template, a call while another of the
   * run is in flight, an aborted run) takes the supervisor's path. False if the call was not taken.
   */
  private boolean dispatchDirectly(HostCall call, RunState<?> state) {
    CallbackDispatcher.FunctionEntry function = functions.get().get(call.callbackName());
    if (function == null || !function.outputTemplate().equals(call.expectedOutputs()) || state.abortCause() != null) {
      return false;
    }
    CallbackExecution execution = new CallbackExecution(callbackThreads, function.options().inline());
    long arrived = System.nanoTime();
    long deadline = arrived + settings.callbackTimeoutOf(call.callbackName()).toNanos();
    if (!state.claimDirectCall(new DirectCall(call, execution, arrived, deadline))) {
      return false;
    }
    CallbackDispatcher.Dispatch dispatch =
        new CallbackDispatcher.Dispatch(call, null, null, metrics, arrived, execution, state);
    if (function.options().inline()) {
      CallbackDispatcher.runFunction(function, dispatch); // answers (or fails) the call before returning
      return true;
    }
    try {
      callbackThreads.execute(() -> CallbackDispatcher.runFunction(function, dispatch));
    } catch (java.util.concurrent.RejectedExecutionException closed) {
      state.supervisor().tell(new RunSupervisor.CallbackFailed(call.tag(), new CallbackException(call.callbackName(),
          ErrorCode.UNAVAILABLE, "callback '" + call.callbackName() + "' could not be scheduled: the runtime is closed")));
    }
    return true;
  }

  /** Whether calls of {@code callback} get XLA's input buffers: a function registered with borrowed inputs. */
  private boolean borrowsInputs(String callback) {
    CallbackDispatcher.FunctionEntry function = functions.get().get(callback);
    return function != null && function.options().borrowedInputs();
  }

  /** Calls the native backstop gave up on are timeouts of their callbacks, counted here; returns them. */
  private List<HostCall> countGivenUpNatively(RunState<?> state) {
    List<HostCall> givenUp = state.givenUpNatively();
    for (HostCall call : givenUp) {
      metrics.recordCallback(call.callbackName(), 0, true, true);
    }
    return givenUp;
  }

  /** The run's failure when the native backstop gave up on {@code call}: a timeout of that callback. */
  private CallbackException backstopFired(HostCall call, RuntimeException failure) {
    String name = call.callbackName();
    return new CallbackException(name, ErrorCode.DEADLINE_EXCEEDED,
        "callback '" + name + "' was never answered by the actors, so the native backstop (its timeout, "
            + settings.callbackTimeout(name).key() + ", plus xla-actors.actors.runs.native-backstop-slack) ended the run: "
            + failure.getMessage(), failure);
  }

  // ---------------------------------------------------------------------------------------------
  // Graphs, fused or segmented

  /** {@code graph} ready to run in the mode of {@code xla-actors.actors.runs.mode}; see {@link #compile(Graph, RunMode)}. */
  public BoundProgram compile(Graph graph) {
    return compile(graph, settings.runMode());
  }

  /**
   * {@code graph} ready to run on this runtime's client: {@link RunMode#FUSED} compiles it into one
   * program ({@link Model#of}); {@link RunMode#SEGMENTED} cuts it at its host calls into stages on the
   * client's first device, with the callbacks served through the dispatcher between them ({@link
   * SegmentedModel#of}; the segmented program is made once per graph and kept until this runtime closes).
   * The outputs of a run are equal either way, and the callbacks must be registered either way. The
   * caller closes what it gets. A graph that cannot be segmented (one parsed from StableHLO text) is
   * refused here with INVALID_ARGUMENT.
   */
  public BoundProgram compile(Graph graph, RunMode mode) {
    Objects.requireNonNull(graph, "graph");
    Objects.requireNonNull(mode, "mode");
    if (mode == RunMode.FUSED) {
      try (Executable exe = graph.compile(client)) {
        return Model.of(exe);
      }
    }
    SegmentedProgram program = segmentedPrograms.computeIfAbsent(graph,
        g -> new SegmentedProgram(g.segment(SegmentationOptions.defaults()), SegmentedProgram.Placement.on(client)));
    return SegmentedModel.of(program);
  }

  /**
   * A segmented run's body, given the supervised host calls. The run's {@link RunState#executing} was
   * called: its deadline is set.
   */
  private <T> T executeSegmented(Function<SegmentedProgram.HostCallInvoker, T> body, long runId, RunState<T> state) {
    long runDeadline = state.deadlineNanos();
    MDC.put("runId", Long.toString(runId));
    watchdog.watch(state);
    try {
      T outputs;
      try {
        outputs = body.apply(new SupervisedHostCalls(runId, state,
            name -> nativeBackstop(name, runDeadline), metrics, call -> dispatchDirectly(call, state),
            settings.callbackSpin()));
      } catch (RuntimeException e) {
        throw state.failed(e);
      }
      return state.succeeded(outputs);
    } finally {
      watchdog.unwatch(state);
      state.ended();
      MDC.remove("runId");
    }
  }
  private static Duration min(Duration a, Duration b) {
    return a.compareTo(b) <= 0 ? a : b;
  }

  /** Stops the dispatcher. Runs in progress fail their later callbacks. */
  @Override
  public void close() {
    if (metricsLogging != null) {
      metricsLogging.cancel();
    }
    dispatcher.tell(new CallbackDispatcher.Stop());
    callbackThreads.close();
    watchdog.close();
    segmentedPrograms.values().forEach(SegmentedProgram::close);
    segmentedPrograms.clear();
  }
}
