package dev.xlaactors.actors;

import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.ExecutionFailedException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.SegmentationOptions;
import dev.xlaactors.graph.SegmentedProgram;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostFunction;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.RunContext;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicLong;
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
 * CallbackDispatcher} per runtime, and one {@link RunSupervisor} per run. The entry point of the actors
 * module for callbacks.
 *
 * <pre>{@code
 * CallbackRuntime callbacks = CallbackRuntime.create(system, client);
 * callbacks.register("double", List.of(TensorType.of(F32, 4)), null, (in, s) -> List.of(twice(in.get(0))))
 *     .toCompletableFuture().join();
 * List<HostTensor> out = callbacks.run(executable, List.of(x));
 * }</pre>
 *
 * <p>Graphs run fused (Phase 1) or segmented (Phase 2, {@link RunMode}), chosen per run or by {@code
 * xla-actors.actors.runs.mode}; both use this runtime's registry, timeouts and supervision.
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
  private final Duration nativeBackstop;
  private final Cancellable metricsLogging;
  private final java.util.Map<Graph, SegmentedProgram> segmentedPrograms = new java.util.concurrent.ConcurrentHashMap<>();

  private CallbackRuntime(ActorSystem<?> system, XlaClient client, ActorsSettings settings) {
    this.system = system;
    this.client = client;
    this.settings = settings;
    this.dispatcher =
        system.systemActorOf(
            CallbackDispatcher.create(settings), "xla-callback-dispatcher-" + RUNTIME_IDS.incrementAndGet(), Props.empty());
    this.runExecutor = system.dispatchers().lookup(DispatcherSelector.fromConfig(settings.runDispatcher()));
    Duration longestCallback =
        settings.callbackTimeouts().values().stream().reduce(settings.defaultCallbackTimeout(), (a, b) -> a.compareTo(b) >= 0 ? a : b);
    // Behind the supervisor's timeouts: the native side gives up on its own only if the actors failed to.
    this.nativeBackstop = min(longestCallback, settings.runTimeout()).plus(settings.nativeBackstopSlack());
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
    return AskPattern.askWithStatus(
        dispatcher,
        (ActorRef<StatusReply<CallbackId>> replyTo) ->
            new CallbackDispatcher.Register(name, outputTemplate, staticArgument, function, replyTo),
        settings.registrationTimeout(),
        system.scheduler());
  }

  /** Registers a callback a graph uses (see {@code GraphBuilder.hostCall}). */
  public CompletionStage<CallbackId> register(HostCallback callback) {
    return register(callback.name(), callback.outputTemplate(), callback.staticArgument(), callback.function());
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
    return AskPattern.askWithStatus(
        dispatcher,
        (ActorRef<StatusReply<CallbackId>> replyTo) ->
            new CallbackDispatcher.RegisterServer(name, outputTemplate, server, replyTo),
        settings.registrationTimeout(),
        system.scheduler());
  }

  /** Starts a run of {@code executable} on {@code inputs} on the run dispatcher; returns at once. */
  public RunHandle start(Executable executable, List<HostTensor> inputs) {
    long runId = RUN_IDS.incrementAndGet();
    RunState state = new RunState();
    ActorRef<RunSupervisor.Command> supervisor = spawnSupervisor(runId, state);
    CompletableFuture<List<HostTensor>> result =
        CompletableFuture.supplyAsync(() -> execute(executable, inputs, runId, state, supervisor), runExecutor);
    return new RunHandle(runId, result, supervisor);
  }

  /**
   * Runs {@code executable} on {@code inputs} on the calling thread and returns its outputs, as JAX does:
   * no hand-off to another thread and back. The run is bounded all the same (run and callback timeouts,
   * native backstop). Throws a {@link CallbackException} when a callback aborted the run, or another
   * {@link XlaException}. Do not call it from an actor's thread: it blocks.
   */
  public List<HostTensor> run(Executable executable, List<HostTensor> inputs) {
    long runId = RUN_IDS.incrementAndGet();
    RunState state = new RunState();
    return execute(executable, inputs, runId, state, spawnSupervisor(runId, state));
  }

  private ActorRef<RunSupervisor.Command> spawnSupervisor(long runId, RunState state) {
    return system.systemActorOf(
        RunSupervisor.create(runId, state, dispatcher, settings, metrics), "xla-run-" + runId, Props.empty());
  }

  private List<HostTensor> execute(
      Executable executable, List<HostTensor> inputs, long runId, RunState state, ActorRef<RunSupervisor.Command> supervisor) {
    long start = System.nanoTime();
    boolean failed = true;
    MDC.put("runId", Long.toString(runId));
    try (RunContext context =
        RunContext.withHostCalls(
            client.plugin(), runId, call -> supervisor.tell(new RunSupervisor.HostCallArrived(call)), nativeBackstop)) {
      state.attach(context);
      List<HostTensor> outputs = executable.run(inputs, context);
      failed = false;
      return outputs;
    } catch (ExecutionFailedException e) {
      CallbackException cause = state.abortCause();
      if (cause != null) {
        throw cause; // names the callback, carries the Java exception as its cause
      }
      throw e;
    } finally {
      supervisor.tell(new RunSupervisor.RunEnded());
      CallbackException cause = state.abortCause();
      metrics.recordRun(
          System.nanoTime() - start, failed, cause != null && cause.code() == ErrorCode.DEADLINE_EXCEEDED);
      MDC.remove("runId");
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Graphs, fused or segmented

  /** Runs {@code graph} in the mode of {@code xla-actors.actors.runs.mode}; see {@link #run(Graph, List, RunMode)}. */
  public List<HostTensor> run(Graph graph, List<HostTensor> inputs) {
    return run(graph, inputs, settings.runMode());
  }

  /**
   * Runs {@code graph} on {@code inputs} on the calling thread, fused (one compiled program) or segmented
   * (stages on this runtime's client's first device, callbacks through the dispatcher between them). The
   * outputs are equal; the callbacks must be registered either way. Do not call it from an actor's thread.
   */
  public List<HostTensor> run(Graph graph, List<HostTensor> inputs, RunMode mode) {
    if (mode == RunMode.FUSED) {
      try (Executable exe = graph.compile(client)) {
        return run(exe, inputs);
      }
    }
    return runSegmented(segmented(graph), inputs).outputs();
  }

  /** Starts a run of {@code graph} in {@code mode} on the run dispatcher; returns at once. */
  public RunHandle start(Graph graph, List<HostTensor> inputs, RunMode mode) {
    if (mode == RunMode.FUSED) {
      Executable exe = graph.compile(client);
      RunHandle handle = start(exe, inputs);
      handle.result().whenComplete((r, e) -> exe.close());
      return handle;
    }
    return start(segmented(graph), inputs);
  }

  /**
   * Runs a segmented program (with the placement it was built with) on the calling thread, supervised
   * like a fused run; returns the outputs and what crossed between host and devices.
   */
  public SegmentedProgram.Result runSegmented(SegmentedProgram program, List<HostTensor> inputs) {
    long runId = RUN_IDS.incrementAndGet();
    RunState state = new RunState();
    return executeSegmented(program, inputs, runId, state, spawnSupervisor(runId, state));
  }

  /** Starts a run of a segmented program on the run dispatcher; returns at once. */
  public RunHandle start(SegmentedProgram program, List<HostTensor> inputs) {
    long runId = RUN_IDS.incrementAndGet();
    RunState state = new RunState();
    ActorRef<RunSupervisor.Command> supervisor = spawnSupervisor(runId, state);
    CompletableFuture<List<HostTensor>> result =
        CompletableFuture.supplyAsync(
            () -> executeSegmented(program, inputs, runId, state, supervisor).outputs(), runExecutor);
    return new RunHandle(runId, result, supervisor);
  }

  /**
   * The segmented program of {@code graph} on this runtime's client (all stages on its first device),
   * made once per graph and kept until the runtime closes.
   */
  public SegmentedProgram segmented(Graph graph) {
    return segmentedPrograms.computeIfAbsent(graph,
        g -> new SegmentedProgram(g.segment(SegmentationOptions.defaults()), SegmentedProgram.Placement.on(client)));
  }

  private SegmentedProgram.Result executeSegmented(
      SegmentedProgram program, List<HostTensor> inputs, long runId, RunState state,
      ActorRef<RunSupervisor.Command> supervisor) {
    long start = System.nanoTime();
    boolean failed = true;
    MDC.put("runId", Long.toString(runId));
    try {
      SegmentedProgram.Result result = program.run(inputs, new SupervisedHostCalls(runId, state, supervisor, nativeBackstop));
      failed = false;
      return result;
    } catch (XlaException e) {
      CallbackException cause = state.abortCause();
      if (cause != null && cause != e) {
        throw cause;
      }
      throw e;
    } finally {
      supervisor.tell(new RunSupervisor.RunEnded());
      CallbackException cause = state.abortCause();
      metrics.recordRun(
          System.nanoTime() - start, failed, cause != null && cause.code() == ErrorCode.DEADLINE_EXCEEDED);
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
    segmentedPrograms.values().forEach(SegmentedProgram::close);
    segmentedPrograms.clear();
  }
}
