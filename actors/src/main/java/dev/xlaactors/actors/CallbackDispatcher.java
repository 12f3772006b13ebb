package dev.xlaactors.actors;

import dev.xlaactors.error.CallbackException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.HostFunction;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.KnownConfigKeys;
import dev.xlaactors.runtime.TensorType;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.SupervisorStrategy;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.pattern.StatusReply;
import org.slf4j.MDC;

/**
 * The single source of truth for host callbacks, in the role a GenServer plays for EXLA: it registers
 * callbacks, owns their ids, resolves the name a program calls to its callback at run time, and runs
 * callback functions on the runtime's callback threads (or forwards the call to the actor that serves
 * it). Answers go to the calling run's {@link RunSupervisor}.
 *
 * <p>Callbacks are named in programs ({@code callback = "tokenize"}), never by a process-specific id, so a
 * compiled program can be cached and reused across runs and processes.
 */
public final class CallbackDispatcher extends AbstractBehavior<CallbackDispatcher.Command> {

  /** Messages the dispatcher understands. */
  public sealed interface Command {}

  /**
   * Registers a Java function under {@code name} (null: the dispatcher names it {@code callback-<id>}),
   * called as {@code options} say (see {@link CallbackOptions}).
   * Registering the same function, template, static argument and options again yields the same id; a name already
   * taken by a different callback is an error reply ({@link XlaException} with ALREADY_EXISTS): {@link
   * Unregister} it first to bind the name to something else.
   */
  public record Register(
      String name,
      List<TensorType> outputTemplate,
      Object staticArgument,
      HostFunction function,
      CallbackOptions options,
      ActorRef<StatusReply<CallbackId>> replyTo)
      implements Command {
    public Register {
      Objects.requireNonNull(options, "options");
    }

    /** A function called with {@link CallbackOptions#DEFAULT}. */
    public Register(String name, List<TensorType> outputTemplate, Object staticArgument, HostFunction function,
        ActorRef<StatusReply<CallbackId>> replyTo) {
      this(name, outputTemplate, staticArgument, function, CallbackOptions.DEFAULT, replyTo);
    }
  }

  /**
   * Registers an actor that serves the callback {@code name} through the {@link CallbackServer} protocol.
   * The dispatcher watches it: when it stops, its names are unregistered, so a new actor can take them.
   */
  public record RegisterServer(
      String name,
      List<TensorType> outputTemplate,
      ActorRef<CallbackServer.Request> server,
      ActorRef<StatusReply<CallbackId>> replyTo)
      implements Command {}

  /**
   * Unregisters the name {@code name}: later calls to it fail as unknown, calls already dispatched carry
   * on. Replies the id it had, or an error ({@link XlaException} with NOT_FOUND) if it was not registered.
   */
  public record Unregister(String name, ActorRef<StatusReply<CallbackId>> replyTo) implements Command {}

  /** Lists the registered callbacks. */
  public record ListCallbacks(ActorRef<List<CallbackId>> replyTo) implements Command {}

  /** Stops the dispatcher; calls that arrive afterwards fail when their supervisor times them out. */
  public record Stop() implements Command {}

  /**
   * Runs one host call of a run; the outcome goes to {@code supervisor}. Sent by {@link RunSupervisor},
   * with the runtime's {@code metrics} and when the call reached Java ({@code arrivedNanos}), so a
   * successful call is counted before the waiting XLA thread is released. A direct call (not a message:
   * {@link CallbackRuntime}'s fast path) has a {@code directRun} and no supervisor until it needs one.
   */
  record Dispatch(
      HostCall call,
      ActorRef<RunSupervisor.Command> supervisor,
      ActorRef<CallbackServer.Response> serverReplies,
      RuntimeMetrics metrics,
      long arrivedNanos,
      CallbackExecution execution,
      RunState<?> directRun)
      implements Command {
    /** The run's supervisor; a direct call's run spawns it now if it has none. */
    ActorRef<RunSupervisor.Command> runSupervisor() {
      return directRun != null ? directRun.supervisor() : supervisor;
    }
  }

  /** A registered server stopped: its names are freed. */
  private record ServerStopped(ActorRef<CallbackServer.Request> server) implements Command {}

  private sealed interface Entry {
    CallbackId id();

    List<TensorType> outputTemplate();
  }

  /** A registered function, as the dispatcher publishes it for calls that go straight to the threads. */
  record FunctionEntry(
      CallbackId id, List<TensorType> outputTemplate, Object staticArgument, HostFunction function,
      CallbackOptions options)
      implements Entry {}

  private record ServerEntry(CallbackId id, List<TensorType> outputTemplate, ActorRef<CallbackServer.Request> server)
      implements Entry {}

  /** What makes two registrations "the same callback". */
  private record Identity(Object target, List<TensorType> outputTemplate, Object staticArgument, CallbackOptions options) {}

  private final CallbackThreads callbackThreads;
  private final AtomicReference<Map<String, FunctionEntry>> published;
  private final AtomicReference<Set<String>> publishedNames;
  private final Map<String, Entry> byName = new HashMap<>();
  private final Map<Identity, Entry> byIdentity = new HashMap<>();
  private long nextId = 1;
  private final Set<String> timeoutNames;

  /**
   * The dispatcher. Its registry is its whole value, so a failure while handling a message resumes it
   * (keeping the registry) instead of restarting it empty. After each change it publishes an immutable
   * snapshot of its registered functions by name into {@code published}: calls resolve their name there
   * without a message. Its functions run on {@code callbackThreads}.
   */
  static Behavior<Command> create(CallbackThreads callbackThreads, AtomicReference<Map<String, FunctionEntry>> published) {
    return create(callbackThreads, published, Set.of());
  }

  /**
   * The dispatcher, told the names that have a timeout of their own ({@code callbacks.timeouts.<name>}):
   * registering a name that has none, while one of those keys is a near miss of it naming no registered
   * callback, is refused, since that key's timeout would silently never apply.
   */
  static Behavior<Command> create(
      CallbackThreads callbackThreads, AtomicReference<Map<String, FunctionEntry>> published, Set<String> timeoutNames) {
    return create(callbackThreads, published, new AtomicReference<>(Set.of()), timeoutNames);
  }

  /**
   * As {@link #create(CallbackThreads, AtomicReference, Set)}, publishing also every registered name (functions
   * and servers) into {@code publishedNames}, so that a runtime can tell at once whether a model's callbacks
   * are all there ({@link CallbackRuntime#checkCallbacks}).
   */
  static Behavior<Command> create(CallbackThreads callbackThreads, AtomicReference<Map<String, FunctionEntry>> published,
      AtomicReference<Set<String>> publishedNames, Set<String> timeoutNames) {
    return Behaviors.<Command>supervise(
            Behaviors.setup(context -> new CallbackDispatcher(context, callbackThreads, published, publishedNames, timeoutNames)))
        .onFailure(SupervisorStrategy.resume());
  }

  private CallbackDispatcher(
      ActorContext<Command> context,
      CallbackThreads callbackThreads,
      AtomicReference<Map<String, FunctionEntry>> published,
      AtomicReference<Set<String>> publishedNames,
      Set<String> timeoutNames) {
    super(context);
    this.callbackThreads = callbackThreads;
    this.published = published;
    this.publishedNames = publishedNames;
    this.timeoutNames = Set.copyOf(timeoutNames);
  }

  private void publish() {
    Map<String, FunctionEntry> functions = new HashMap<>();
    byName.forEach((name, entry) -> {
      if (entry instanceof FunctionEntry f) {
        functions.put(name, f);
      }
    });
    published.set(Map.copyOf(functions));
    publishedNames.set(Set.copyOf(byName.keySet()));
  }

  @Override
  public Receive<Command> createReceive() {
    return newReceiveBuilder()
        .onMessage(Register.class, this::onRegister)
        .onMessage(RegisterServer.class, this::onRegisterServer)
        .onMessage(Unregister.class, this::onUnregister)
        .onMessage(ServerStopped.class, this::onServerStopped)
        .onMessage(ListCallbacks.class, this::onListCallbacks)
        .onMessage(Dispatch.class, this::onDispatch)
        .onMessage(Stop.class, stop -> Behaviors.stopped())
        .build();
  }

  private Behavior<Command> onRegister(Register r) {
    Objects.requireNonNull(r.function(), "function");
    Identity identity = new Identity(r.function(), List.copyOf(r.outputTemplate()), r.staticArgument(), r.options());
    r.replyTo()
        .tell(
            register(
                r.name(),
                identity,
                id -> new FunctionEntry(id, identity.outputTemplate(), r.staticArgument(), r.function(), r.options())));
    return this;
  }

  private Behavior<Command> onRegisterServer(RegisterServer r) {
    Objects.requireNonNull(r.server(), "server");
    Identity identity = new Identity(r.server(), List.copyOf(r.outputTemplate()), null, CallbackOptions.DEFAULT);
    StatusReply<CallbackId> reply =
        register(r.name(), identity, id -> new ServerEntry(id, identity.outputTemplate(), r.server()));
    if (reply.isSuccess()) {
      getContext().watchWith(r.server(), new ServerStopped(r.server())); // watching twice is harmless
    }
    r.replyTo().tell(reply);
    return this;
  }

  private Behavior<Command> onUnregister(Unregister u) {
    Entry entry = u.name() == null ? null : byName.remove(u.name());
    if (entry == null) {
      u.replyTo().tell(StatusReply.error(new XlaException(ErrorCode.NOT_FOUND,
          "cannot unregister callback '" + u.name() + "': no such name; registered callbacks: " + new TreeSet<>(byName.keySet()))));
      return this;
    }
    forgetIfUnnamed(entry);
    publish();
    u.replyTo().tell(StatusReply.success(new CallbackId(entry.id().id(), u.name())));
    return this;
  }

  private Behavior<Command> onServerStopped(ServerStopped m) {
    List<String> names =
        byName.entrySet().stream()
            .filter(e -> e.getValue() instanceof ServerEntry s && s.server().equals(m.server()))
            .map(Map.Entry::getKey)
            .toList();
    for (String name : names) {
      forgetIfUnnamed(byName.remove(name));
    }
    publish();
    getContext().getLog().info("callback server {} stopped; unregistered {}", m.server().path(), names);
    return this;
  }

  /**
   * A timeout key's name that looks like a misspelling of {@code name}: {@code name} has no key of its
   * own, the key names no registered callback, and the two differ by at most a quarter of their length
   * (at least 1), not only in digits ({@code step1} and {@code step2} are two callbacks).
   */
  private String misspeltTimeoutName(String name) {
    if (timeoutNames.contains(name)) {
      return null;
    }
    for (String key : timeoutNames) {
      if (byName.containsKey(key) || key.replaceAll("[0-9]", "").equals(name.replaceAll("[0-9]", ""))) {
        continue;
      }
      if (KnownConfigKeys.distance(key, name) <= Math.max(1, Math.max(key.length(), name.length()) / 4)) {
        return key;
      }
    }
    return null;
  }

  /** Drops an entry that no name refers to any more, so its function or server is not kept alive. */
  private void forgetIfUnnamed(Entry entry) {
    if (!byName.containsValue(entry)) {
      byIdentity.values().remove(entry);
    }
  }

  private StatusReply<CallbackId> register(
      String requestedName, Identity identity, java.util.function.Function<CallbackId, Entry> newEntry) {
    Entry existing = byIdentity.get(identity);
    String name = requestedName != null ? requestedName : existing != null ? existing.id().name() : null;
    if (name != null && name.isBlank()) {
      return StatusReply.error(new InvalidArgumentException("a callback name must not be blank, got \"" + name + "\""));
    }
    String misspelt = name == null ? null : misspeltTimeoutName(name);
    if (misspelt != null) {
      String keys = "xla-actors.actors.callbacks.timeouts.";
      return StatusReply.error(new InvalidArgumentException(
          "callback '" + name + "' has no timeout of its own, but the key " + keys + misspelt + " names no registered"
              + " callback: did you mean " + keys + name + "? (its timeout would never apply; rename the key, or"
              + " register '" + misspelt + "' first if it is another callback)"));
    }
    Entry named = name == null ? null : byName.get(name);
    if (named != null && named != existing) {
      String holder = named instanceof ServerEntry s ? "the actor " + s.server().path() : "a function";
      return StatusReply.error(new XlaException(ErrorCode.ALREADY_EXISTS,
          "callback name '" + name + "' is already registered (id " + named.id().id() + ", served by " + holder + ", outputs "
              + named.outputTemplate() + ") with another function, server, template or static argument;"
              + " unregister it first (CallbackRuntime.unregister(\"" + name + "\")) or choose another name"));
    }
    Entry entry = existing;
    if (entry == null) {
      long id = nextId++;
      entry = newEntry.apply(new CallbackId(id, name != null ? name : "callback-" + id));
      byIdentity.put(identity, entry);
      getContext().getLog().debug("registered callback '{}' as id {}", entry.id().name(), id);
    }
    // The same callback may be reachable under several names; all share its id.
    CallbackId id = new CallbackId(entry.id().id(), name != null ? name : entry.id().name());
    byName.put(id.name(), entry);
    publish();
    return StatusReply.success(id);
  }

  private Behavior<Command> onListCallbacks(ListCallbacks l) {
    l.replyTo()
        .tell(byName.entrySet().stream().map(e -> new CallbackId(e.getValue().id().id(), e.getKey())).toList());
    return this;
  }

  private Behavior<Command> onDispatch(Dispatch d) {
    HostCall call = d.call();
    Entry entry = byName.get(call.callbackName());
    if (entry == null) {
      fail(d, ErrorCode.NOT_FOUND, "unknown callback '" + call.callbackName() + "'; registered callbacks: "
          + new TreeSet<>(byName.keySet()));
      return this;
    }
    if (!entry.outputTemplate().equals(call.expectedOutputs())) {
      fail(d, ErrorCode.INVALID_ARGUMENT, "callback '" + call.callbackName() + "' is registered with output template "
          + entry.outputTemplate() + ", but the program expects " + call.expectedOutputs());
      return this;
    }
    if (entry instanceof FunctionEntry f) {
      try {
        callbackThreads.execute(() -> runFunction(f, d));
      } catch (java.util.concurrent.RejectedExecutionException e) {
        fail(d, ErrorCode.UNAVAILABLE, "callback '" + call.callbackName() + "' could not be scheduled: " + e);
      }
    } else if (entry instanceof ServerEntry s) {
      d.supervisor().tell(new RunSupervisor.ServedBy(call.tag(), s.server()));
      s.server().tell(new CallbackServer.Request(call, d.serverReplies()));
    }
    return this;
  }

  /**
   * Runs on a callback thread: calls the function (unless its call was already given up), checks its
   * result and answers the waiting XLA thread directly, so a successful call costs no further actor hop
   * before XLA resumes.
   */
  static void runFunction(FunctionEntry entry, Dispatch d) {
    HostCall call = d.call();
    if (!d.execution().begin()) {
      return; // given up before it started (its run was aborted): no effects after the failure
    }
    // User code inside the callback logs with the run id and callback name.
    MDC.put("runId", Long.toString(call.runId()));
    MDC.put("callback", call.callbackName());
    try {
      answer(entry, d);
    } finally {
      d.execution().end();
      MDC.remove("runId");
      MDC.remove("callback");
    }
  }

  private static void answer(FunctionEntry entry, Dispatch d) {
    HostCall call = d.call();
    List<HostTensor> outputs;
    CallbackException failure;
    try {
      outputs = entry.function().apply(call.inputs(), entry.staticArgument());
      failure = call.mismatch(outputs)
          .map(problem -> new CallbackException(call.callbackName(), ErrorCode.INVALID_ARGUMENT, problem))
          .orElse(null);
    } catch (Throwable thrown) {
      outputs = null;
      failure = RunSupervisor.threw(call.callbackName(), thrown);
    }
    if (!d.execution().returned()) {
      return; // late: the supervisor gave the call up (timeout, abort) and counted it as failed
    }
    if (failure != null) {
      // The supervisor aborts the run, failing and counting this call (a direct one too: its slot is
      // freed there, so the call stays findable until then).
      d.runSupervisor().tell(new RunSupervisor.CallbackFailed(call.tag(), failure));
      return;
    }
    if (!d.execution().claimAnswer()) {
      return; // given up just now
    }
    // Count it first: once complete() returns, XLA may finish the run, whose caller may read the metrics
    // at once.
    d.metrics().recordCallback(call.callbackName(), System.nanoTime() - d.arrivedNanos(), false, false);
    if (d.directRun() != null) {
      // A direct call: no supervisor message at all. The slot is freed before complete(), since XLA's
      // next call of the run may come as soon as this one is answered.
      d.directRun().directCallDone(d.execution());
    } else {
      // Before complete(): the run's RunEnded must not overtake this message.
      d.supervisor().tell(new RunSupervisor.CallbackSucceeded(call.tag()));
    }
    call.complete(outputs);
  }

  private static void fail(Dispatch d, ErrorCode code, String message) {
    d.runSupervisor()
        .tell(
            new RunSupervisor.CallbackFailed(
                d.call().tag(), new CallbackException(d.call().callbackName(), code, message)));
  }
}
