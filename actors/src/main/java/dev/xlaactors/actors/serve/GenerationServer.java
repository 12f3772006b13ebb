package dev.xlaactors.actors.serve;

import dev.xlaactors.actors.serve.SlotScheduler.Plan;
import dev.xlaactors.actors.serve.SlotScheduler.Sequence;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.ExecutionFailedException;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.OverloadedException;
import dev.xlaactors.error.RequestCancelledException;
import dev.xlaactors.error.RequestTimeoutException;
import dev.xlaactors.error.ServingException;
import dev.xlaactors.error.XlaException;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import org.apache.pekko.NotUsed;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.DispatcherSelector;
import org.apache.pekko.actor.typed.PostStop;
import org.apache.pekko.actor.typed.Terminated;
import org.apache.pekko.actor.typed.javadsl.AbstractBehavior;
import org.apache.pekko.actor.typed.javadsl.ActorContext;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.actor.typed.javadsl.Receive;
import org.apache.pekko.actor.typed.javadsl.TimerScheduler;
import org.apache.pekko.stream.ActorAttributes;
import org.apache.pekko.stream.OverflowStrategy;
import org.apache.pekko.stream.WatchedActorTerminatedException;
import org.apache.pekko.stream.javadsl.Source;
import org.apache.pekko.stream.typed.javadsl.ActorSource;

/**
 * Continuous batching for generation: many requests decode together on one {@link SlotDecoder}, each in a
 * slot of its KV cache, and join and leave the running batch at token boundaries, so a long generation does
 * not hold up short ones (iteration-level scheduling, as in Orca and vLLM: the server owns the batch and
 * the cache; requests never own device memory).
 *
 * <p>One iteration, run on a background thread while the actor stays responsive: every slot that was
 * already decoding takes one step, then the requests admitted at this boundary are prefilled into free
 * slots (each gives its first token). At the boundary the server streams each request's new token to its
 * {@code replyTo} ({@link Token}), retires finished, cancelled and expired requests (their slots are free
 * for the next iteration) and admits waiting ones.
 *
 * <p>Every request gets exactly one final event: {@link Finished} (a stop token, its token limit, or the
 * end of the context) or {@link Failed} carrying an {@link XlaException}: {@link InvalidArgumentException}
 * (the message names the field), {@link OverloadedException} (more than
 * {@code xla-actors.actors.generation.max-waiting} requests would wait for a slot: refused at once,
 * nothing computed), {@link RequestTimeoutException} (its deadline passed: while waiting it is never
 * computed), {@link RequestCancelledException} ({@link Cancel}), a {@link ServingException} with code
 * UNAVAILABLE (the server stopped), or an {@link ExecutionFailedException} (the decoder or its sampler
 * threw: a sampler fails its own request only; a decoder failure fails the requests of that iteration and
 * the decoder is {@link SlotDecoder#reset reset}). A request whose {@code replyTo} stops (a stream whose
 * consumer went away: {@link #events}) is cancelled without an answer, and its slot freed.
 *
 * <p>The actor wires messages, timers and events and speaks the client API ({@link #events}, {@link
 * #tokens}); what it decides and what it runs live apart, as in vLLM's scheduler and worker: {@link
 * SlotScheduler} holds the waiting queue and the slots and plans each iteration (who is admitted and
 * prefilled, who decodes, who finished), and {@link DecodeRunner} runs a plan on the decoder off the
 * actor's thread.
 *
 * <p>With {@code xla-actors.actors.generation.prompt-cache} on and a decoder that {@link SlotDecoder#keepsFreeRows
 * keeps free rows}, a request is admitted into the free slot whose row still holds the longest prefix of its
 * prompt and only the rest is prefilled (a chat's next turn, a shared system prompt); {@code
 * xla.generate.prompt.tokens.cached} counts the prompt tokens so reused.
 *
 * <p>The server owns the decoder: it closes it when it stops (after an iteration in flight, if any). Its
 * meters ({@link GenerationMetrics}) are registered on the registry given to {@link #create} and removed
 * when it stops.
 */
public final class GenerationServer extends AbstractBehavior<GenerationServer.Command> {

  /** What the server accepts. */
  public sealed interface Command permits Generate, Cancel, GetStatus, IterationDone, IterationFailed, Tick {}

  /**
   * Generate up to {@code maxTokens} tokens after {@code prompt}. {@code id} names the request in every
   * event and in {@link Cancel}; it must not be in use. Generation stops before a token of
   * {@code stopTokens} (not emitted). {@code timeout} (null: the configured default) counts from now.
   */
  public record Generate(String id, int[] prompt, int maxTokens, Set<Integer> stopTokens, TokenSampler sampler, Duration timeout,
      ActorRef<Event> replyTo) implements Command {}

  /**
   * Stops request {@code id}: it is answered {@link Failed} with a {@link RequestCancelledException} naming
   * {@code reason}, and its slot is freed. Unknown ids are ignored.
   */
  public record Cancel(String id, String reason) implements Command {}

  /** Asks for a {@link Status}. */
  public record GetStatus(ActorRef<Status> replyTo) implements Command {}

  /**
   * How busy server {@code model} is: {@code active} slots of {@code slots} hold a request, {@code waiting}
   * wait for one; since the start, {@code finished} requests ended with {@link Finished} (not the failed,
   * cancelled or expired ones: {@code xla.generate.requests} counts every outcome), {@code refused} were
   * refused as overloaded, and {@code tokens} tokens were streamed.
   */
  public record Status(String model, int slots, int active, int waiting, long finished, long refused, long tokens) {}

  /** What a request's {@code replyTo} receives: tokens in order, then exactly one {@link Finished} or {@link Failed}. */
  public sealed interface Event permits Token, Finished, Failed {
    /** The request's id. */
    String id();
  }

  /** The {@code index}-th (from 0) generated token of request {@code id}. */
  public record Token(String id, int index, int token) implements Event {}

  /** Request {@code id} is complete after {@code tokens} tokens. */
  public record Finished(String id, Reason reason, int tokens) implements Event {}

  /** Request {@code id} ended with {@code error} (after the tokens already streamed, if any). */
  public record Failed(String id, XlaException error) implements Event {}

  /** Why a generation finished. */
  public enum Reason {
    /** The model produced a stop token (not emitted). */
    STOP_TOKEN,
    /** The request's {@code maxTokens} were produced. */
    MAX_TOKENS,
    /** The sequence filled the model's context. */
    CONTEXT_FULL
  }

  /** An iteration ran: its plan and the tokens (or sampler errors) it gave. */
  private record IterationDone(Plan plan, DecodeRunner.Done result) implements Command {}

  /** An iteration's decoder failed; {@code resetFailed}: it could not be reset, the server stops. */
  private record IterationFailed(Plan plan, XlaException error, boolean resetFailed) implements Command {}

  private enum Tick implements Command {
    INSTANCE
  }

  /** The most events one {@link #events} stream holds for a consumer that does not read them: far more than a context. */
  private static final int MAX_EVENTS_BUFFERED = 1 << 20;

  /** Up to this many buffered events Pekko allocates the buffer whole; beyond, it grows as events arrive. */
  private static final int FIXED_EVENTS_BUFFER = 256;

  /** How often deadlines are checked while requests are in the server (between boundaries too). */
  private static final Duration TICK = Duration.ofMillis(20);

  /**
   * Creates server {@code model} over {@code decoder} (which it owns and closes when it stops), with
   * {@code settings}; its meters go to {@code registry}.
   */
  public static Behavior<Command> create(String model, SlotDecoder decoder, GenerationSettings settings, MeterRegistry registry) {
    // No restart on failure: the decoder's cache would be in an unknown state; the server stops, answering
    // every request it holds, and closes the decoder.
    return Behaviors.setup(ctx -> Behaviors.withTimers(timers -> new GenerationServer(ctx, timers, model, decoder, settings, registry)));
  }

  /** Creates server {@code model} with the settings of the actor system's configuration. */
  public static Behavior<Command> create(String model, SlotDecoder decoder, MeterRegistry registry) {
    return Behaviors.setup(ctx -> Behaviors.withTimers(
        timers -> new GenerationServer(ctx, timers, model, decoder, GenerationSettings.create(ctx.getSystem()), registry)));
  }

  /**
   * The events of one generation as a stream: its tokens, then its one final event ({@link Finished} or
   * {@link Failed}), then completion. Each materialization sends one {@link Generate} (a fresh id) to
   * {@code server}; cancelling the stream stops its receiving actor, which cancels the generation and
   * frees its slot. The request is checked by the server: a bad one gives a single {@link Failed}. A server
   * that has stopped (or stops before the final event) gives a {@link Failed} with a {@link ServingException}
   * of code UNAVAILABLE at once.
   */
  public static Source<Event, NotUsed> events(ActorRef<Command> server, int[] prompt, int maxTokens, Set<Integer> stopTokens,
      TokenSampler sampler, Duration timeout) {
    // The server streams at most maxTokens tokens (fewer than the context holds) and one final event; counted
    // in a long, so a limit near Integer.MAX_VALUE does not wrap. Past MAX_EVENTS_BUFFERED unread events the
    // stream fails. The buffer grows with the events (a fixed one would be allocated whole, up front).
    int buffer = (int) Math.min(MAX_EVENTS_BUFFERED, Math.max(16L, maxTokens + 2L));
    return Source.fromMaterializer((materializer, attributes) -> {
      String id = UUID.randomUUID().toString();
      return ActorSource.<Event>actorRef(e -> false, e -> Optional.empty(), buffer, OverflowStrategy.fail())
          .withAttributes(ActorAttributes.maxFixedBufferSize(FIXED_EVENTS_BUFFER))
          .mapMaterializedValue(replyTo -> {
            server.tell(new Generate(id, prompt, maxTokens, stopTokens, sampler, timeout, replyTo));
            return NotUsed.getInstance();
          })
          // A stopped server would never answer (its Generate goes to dead letters): its end is the answer.
          .watch(Adapter.toClassic(server))
          .recover(WatchedActorTerminatedException.class, () -> new Failed(id, new ServingException(ErrorCode.UNAVAILABLE, null, id,
              "the generation server " + server.path() + " has stopped: request '" + id + "' was not finished")))
          .takeWhile(e -> e instanceof Token, true);
    }).mapMaterializedValue(started -> NotUsed.getInstance());
  }

  /**
   * The tokens of one generation as a stream (see {@link #events}): it completes after the last token, or
   * fails with the request's {@link XlaException}.
   */
  public static Source<Integer, NotUsed> tokens(ActorRef<Command> server, int[] prompt, int maxTokens, Set<Integer> stopTokens,
      TokenSampler sampler, Duration timeout) {
    return events(server, prompt, maxTokens, stopTokens, sampler, timeout)
        .map(e -> {
          if (e instanceof Failed f) {
            throw f.error();
          }
          return e;
        })
        .collectType(Token.class)
        .map(Token::token);
  }

  private final TimerScheduler<Command> timers;
  private final String model;
  private final SlotDecoder decoder;
  private final GenerationMetrics metrics;
  private final GenerationSettings settings;
  private final SlotScheduler scheduler;
  private final DecodeRunner runner;
  private final Map<ActorRef<Event>, Integer> watched = new HashMap<>();
  private CompletableFuture<DecodeRunner.Result> inFlight; // null when no iteration runs
  private long finished;
  private long refused;
  private long tokens;

  private GenerationServer(ActorContext<Command> context, TimerScheduler<Command> timers, String model, SlotDecoder decoder,
      GenerationSettings settings, MeterRegistry registry) {
    super(context);
    this.timers = timers;
    this.model = model;
    this.decoder = decoder;
    this.metrics = new GenerationMetrics(registry, model);
    this.settings = settings;
    this.scheduler = new SlotScheduler(decoder.slots(), settings.maxWaiting(), decoder.contextLength(), decoder.prefillChunk(),
        settings.promptCache() && decoder.keepsFreeRows());
    this.runner = new DecodeRunner(decoder, context.getSystem().dispatchers().lookup(DispatcherSelector.fromConfig(settings.dispatcher())));
  }

  @Override
  public Receive<Command> createReceive() {
    return newReceiveBuilder()
        .onMessage(Generate.class, this::onGenerate)
        .onMessage(Cancel.class, this::onCancel)
        .onMessage(GetStatus.class, this::onGetStatus)
        .onMessage(IterationDone.class, this::onIterationDone)
        .onMessage(IterationFailed.class, this::onIterationFailed)
        .onMessageEquals(Tick.INSTANCE, this::onTick)
        .onSignal(Terminated.class, this::onReplyToStopped)
        .onSignal(PostStop.class, signal -> onPostStop())
        .build();
  }

  private Behavior<Command> onGenerate(Generate g) {
    if (g.replyTo() == null) {
      getContext().getLog().warn("generation request {} has no replyTo: dropped", g.id());
      return this;
    }
    XlaException invalid = validate(g);
    if (invalid != null) {
      metrics.outcome("invalid");
      g.replyTo().tell(new Failed(g.id(), invalid));
      return this;
    }
    if (scheduler.full()) {
      refused++;
      metrics.outcome("overloaded");
      g.replyTo().tell(new Failed(g.id(), new OverloadedException(model, g.id(), "generation server '" + model + "' overloaded: all "
          + scheduler.slots() + " slots are busy and " + settings.maxWaiting() + " requests already wait (xla-actors.actors.generation"
          + ".max-waiting); request '" + g.id() + "' was refused without being computed: retry later")));
      return this;
    }
    Duration timeout = g.timeout() != null ? g.timeout() : settings.defaultTimeout();
    long now = System.nanoTime();
    scheduler.enqueue(g, now, Deadlines.after(now, timeout));
    updateOccupancy();
    watch(g.replyTo());
    if (!timers.isTimerActive(Tick.INSTANCE)) {
      timers.startTimerWithFixedDelay(Tick.INSTANCE, TICK);
    }
    if (inFlight == null) {
      startIteration();
    }
    return this;
  }

  /** The request's error, or null when it can be served; names the field and what is accepted. */
  private XlaException validate(Generate g) {
    if (g.id() == null || g.id().isBlank()) {
      return new InvalidArgumentException("id: a generation request needs a non-blank id");
    }
    if (scheduler.holds(g.id())) {
      return new InvalidArgumentException("id: request id '" + g.id() + "' is already in use: give each request its own id");
    }
    int n = g.prompt() == null ? 0 : g.prompt().length;
    if (n < 1 || n > decoder.maxPromptLength()) {
      return new InvalidArgumentException("prompt: request '" + g.id() + "' has " + n + " prompt tokens, expected 1.."
          + decoder.maxPromptLength() + " (the longest prompt the model takes)");
    }
    for (int i = 0; i < n; i++) {
      if (g.prompt()[i] < 0 || g.prompt()[i] >= decoder.vocabulary()) {
        return new InvalidArgumentException("prompt[" + i + "]: token " + g.prompt()[i] + " of request '" + g.id()
            + "' is outside the vocabulary (0.." + (decoder.vocabulary() - 1) + ")");
      }
    }
    if (g.maxTokens() < 1) {
      return new InvalidArgumentException("max_tokens: request '" + g.id() + "' asks for " + g.maxTokens() + " tokens, expected >= 1");
    }
    if (g.sampler() == null || g.stopTokens() == null) {
      return new InvalidArgumentException((g.sampler() == null ? "sampler" : "stop_tokens") + ": request '" + g.id()
          + "' has none (use TokenSampler.greedy() and Set.of())");
    }
    if (g.timeout() != null && (g.timeout().isNegative() || g.timeout().isZero())) {
      return new InvalidArgumentException("timeout: request '" + g.id() + "' has timeout " + g.timeout() + ", expected > 0");
    }
    return null;
  }

  private Behavior<Command> onCancel(Cancel c) {
    Sequence s = scheduler.get(c.id());
    if (s != null) {
      end(s, new Failed(s.id(), new RequestCancelledException(model, s.id(), "request '" + s.id() + "' to '" + model
          + "' was cancelled after " + s.produced + " tokens" + (c.reason() != null ? ": " + c.reason() : ""))), "cancelled");
    }
    return this;
  }

  private Behavior<Command> onGetStatus(GetStatus g) {
    g.replyTo().tell(new Status(model, scheduler.slots(), scheduler.active(), scheduler.waiting(), finished, refused, tokens));
    return this;
  }

  private Behavior<Command> onTick() {
    expire();
    if (scheduler.isEmpty()) {
      timers.cancel(Tick.INSTANCE);
    }
    return this;
  }

  /** A request's replyTo stopped (e.g. a stream's consumer cancelled): its requests are dropped, unanswered. */
  private Behavior<Command> onReplyToStopped(Terminated t) {
    for (Sequence s : scheduler.held()) {
      if (s.request.replyTo().equals(t.getRef())) {
        end(s, null, "cancelled");
      }
    }
    return this;
  }

  private Behavior<Command> onIterationDone(IterationDone done) {
    inFlight = null;
    Plan plan = done.plan();
    DecodeRunner.Done result = done.result();
    scheduler.written(plan); // before any request leaves: the next plan may reuse what this one wrote
    metrics.iteration(System.nanoTime() - plan.started());
    for (int i = 0; i < plan.admitted().size(); i++) {
      Sequence s = plan.admitted().get(i);
      if (scheduler.live(s) && plan.endsPrompt(i)) { // else its prompt goes on in the next iteration
        accept(s, true, result.admitted()[i], result.admittedErrors()[i]);
      }
    }
    for (int slot = 0; slot < plan.occupants().length; slot++) {
      Sequence s = plan.occupants()[slot];
      if (plan.active()[slot] && s != null && scheduler.live(s)) {
        accept(s, false, result.decoded()[slot], result.decodedErrors()[slot]);
      }
    }
    expire();
    startIteration();
    return this;
  }

  private Behavior<Command> onIterationFailed(IterationFailed failed) {
    inFlight = null;
    scheduler.decoderReset(); // the decoder was reset (its cache is a fresh one) or could not be
    List<Sequence> involved = failed.plan().involved();
    getContext().getLog().warn("generation iteration failed for {} request(s): {}", involved.size(), failed.error().getMessage());
    for (Sequence s : involved) {
      if (scheduler.live(s)) {
        end(s, new Failed(s.id(), failed.error()), "failed");
      }
    }
    if (failed.resetFailed()) {
      getContext().getLog().error("the decoder could not be reset after a failure: the generation server stops");
      return Behaviors.stopped();
    }
    startIteration();
    return this;
  }

  /** Request {@code s}'s new token {@code token}, from its prefill or a decode step (or its sampler's {@code error}). */
  private void accept(Sequence s, boolean prefilled, int token, XlaException error) {
    SlotScheduler.Step step = scheduler.accept(s, prefilled, token);
    if (error != null) {
      end(s, new Failed(s.id(), error), "failed");
      return;
    }
    if (!step.emit()) {
      end(s, new Finished(s.id(), step.finish(), s.produced), "finished");
      return;
    }
    if (step.index() == 0) {
      metrics.firstToken(System.nanoTime() - s.arrived);
    }
    s.request.replyTo().tell(new Token(s.id(), step.index(), token));
    tokens++;
    metrics.token();
    if (step.finish() != null) {
      end(s, new Finished(s.id(), step.finish(), s.produced), "finished");
    }
  }

  /** Answers requests whose deadline passed: a waiting one is never computed, a decoding one stops. */
  private void expire() {
    for (Sequence s : scheduler.expired(System.nanoTime())) {
      Duration timeout = s.request.timeout() != null ? s.request.timeout() : settings.defaultTimeout();
      String where = s.slot < 0 ? "while waiting for a slot (nothing was computed)" : "after " + s.produced + " tokens";
      end(s, new Failed(s.id(), new RequestTimeoutException(model, s.id(), "request '" + s.id() + "' to '" + model + "' timed out "
          + where + ": its timeout was " + timeout)), "timeout");
    }
  }

  /** Removes {@code s} from the server, frees its slot, counts its {@code outcome} and sends its final {@code event} (none when null). */
  private void end(Sequence s, Event event, String outcome) {
    scheduler.remove(s);
    if (event instanceof Finished) {
      finished++;
    }
    metrics.outcome(outcome);
    updateOccupancy();
    unwatch(s.request.replyTo());
    if (event != null) {
      s.request.replyTo().tell(event);
    }
  }

  /** At a boundary: admits waiting requests into free slots and runs the next iteration, if there is work. */
  private void startIteration() {
    Plan plan = scheduler.plan(System.nanoTime());
    updateOccupancy();
    if (plan == null) {
      return; // idle
    }
    for (Sequence s : plan.newcomers()) {
      metrics.prompt(s.request.prompt().length, s.cached);
    }
    CompletableFuture<DecodeRunner.Result> work = runner.start(plan);
    inFlight = work;
    getContext().pipeToSelf(work, (result, thrown) -> {
      if (result instanceof DecodeRunner.Done d) {
        return new IterationDone(plan, d);
      }
      if (result instanceof DecodeRunner.Broken b) {
        return new IterationFailed(plan, b.error(), b.resetFailed());
      }
      return new IterationFailed(plan, new ExecutionFailedException(ErrorCode.INTERNAL, "generation iteration failed: " + thrown, thrown),
          false);
    });
  }

  private void updateOccupancy() {
    metrics.occupancy(scheduler.active(), scheduler.waiting());
  }

  private void watch(ActorRef<Event> ref) {
    if (watched.merge(ref, 1, Integer::sum) == 1) {
      getContext().watch(ref);
    }
  }

  private void unwatch(ActorRef<Event> ref) {
    Integer n = watched.get(ref);
    if (n == null) {
      return;
    }
    if (n == 1) {
      watched.remove(ref);
      getContext().unwatch(ref);
    } else {
      watched.put(ref, n - 1);
    }
  }

  /** Answers every request still held and closes the decoder (after an iteration in flight). */
  private Behavior<Command> onPostStop() {
    for (Sequence s : scheduler.held()) {
      end(s, new Failed(s.id(), new ServingException(ErrorCode.UNAVAILABLE, model, s.id(), "the generation server '" + model
          + "' stopped before request '" + s.id() + "' finished (after " + s.produced + " tokens)")), "stopped");
    }
    metrics.close();
    runner.stop("the generation server '" + model + "' stopped", inFlight); // nobody waits for the step any more
    return this;
  }

  @Override
  public String toString() {
    return "GenerationServer[" + scheduler + "]";
  }
}
