package dev.xlaactors.bench;

import dev.xlaactors.actors.serve.GenerationServer;
import dev.xlaactors.actors.serve.GenerationServer.Event;
import dev.xlaactors.actors.serve.GenerationServer.Failed;
import dev.xlaactors.actors.serve.GenerationServer.Finished;
import dev.xlaactors.actors.serve.GenerationServer.Token;
import dev.xlaactors.actors.serve.GenerationSettings;
import dev.xlaactors.actors.serve.SlotDecoder;
import dev.xlaactors.actors.serve.TokenSampler;
import dev.xlaactors.error.OverloadedException;
import dev.xlaactors.error.RequestTimeoutException;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.lm.LanguageModel;
import dev.xlaactors.lm.PackageSlotDecoder;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.ModelPackage;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReferenceArray;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * The language-model phase of {@code bench/run.sh serve}: the GPT of tools/jax_gpt.py as a model package
 * ({@code tools/jax_gpt.py package}; its slot programs at the most slots, a {@link PackageSlotDecoder} of
 * the library's {@link LanguageModel}) behind a {@link GenerationServer}, continuous batching over all S slots against
 * the same server given one slot (one generation at a time, the same compiled programs: a decode step then
 * computes S rows of which one is in use).
 *
 * <ol>
 *   <li>Burst, closed: N requests sent at once, prompts of 1 to the longest prompt and outputs of several
 *       lengths (greedy, no stop token, so each gives exactly its token limit): generated tokens/s, time to
 *       first token p50/p99, total time, lost requests (not exactly one final event).
 *   <li>Open loop: N requests sent at a fixed rate, half of the batched side's burst capacity in
 *       requests/s, whatever the answers: the same figures.
 *   <li>Rate sweep, on a third server with the default generation settings (max-waiting 64) over all S
 *       slots: its capacity in requests/s of fixed-length generations (closed loop, 2 S requests always in
 *       flight), then open-loop fixed-interval arrivals of those generations at 10/50/80/100/120% of it
 *       (short: 10/80/120%), each request with a deadline: offered and achieved requests/s, time to first
 *       token and whole-request latency p50/p99, answers by kind, lost requests.
 * </ol>
 * Also counts requests whose tokens differ between the two sides (greedy: they must be equal). Prints
 * {@code LM}, {@code LM_CAPACITY} and {@code LM_SWEEP} lines and one {@code LM_RESULT} line; bench/run.sh
 * makes the tables and merges the result into {@code RESULT serve}. Arguments: the package directory, then
 * {@code full} or {@code short}.
 */
public final class ServeLmBench {
  // The one-slot server's 124 M burst takes about a minute quiet and over two on a loaded machine: a
  // deadline there would cut requests short and make the two sides' tokens incomparable.
  private static final Duration REQUEST_TIMEOUT = Duration.ofMinutes(10);
  private static final long WAIT_NANOS = TimeUnit.MINUTES.toNanos(15);

  /** Forwards to the shared decoder; the server's close is ignored (the bench closes the decoder once, at the end). */
  private static class Shared implements SlotDecoder {
    final SlotDecoder inner;

    Shared(SlotDecoder inner) {
      this.inner = inner;
    }

    @Override
    public int slots() {
      return inner.slots();
    }

    @Override
    public int vocabulary() {
      return inner.vocabulary();
    }

    @Override
    public int maxPromptLength() {
      return inner.maxPromptLength();
    }

    @Override
    public int contextLength() {
      return inner.contextLength();
    }

    @Override
    public float[] prefill(int slot, int[] prompt) {
      return inner.prefill(slot, prompt);
    }

    @Override
    public float[] decode(int[] tokens, int[] positions, boolean[] active) {
      return inner.decode(tokens, positions, active);
    }

    @Override
    public void reset() {
      inner.reset();
    }

    @Override
    public void close() {}
  }

  /** Slot 0 of the shared decoder only: the server holds one generation at a time. */
  private static final class OneSlot extends Shared {
    OneSlot(SlotDecoder inner) {
      super(inner);
    }

    @Override
    public int slots() {
      return 1;
    }

    @Override
    public float[] decode(int[] tokens, int[] positions, boolean[] active) {
      int s = inner.slots();
      int[] t = new int[s];
      int[] p = new int[s];
      boolean[] a = new boolean[s];
      t[0] = tokens[0];
      p[0] = positions[0];
      a[0] = active[0];
      return Arrays.copyOf(inner.decode(t, p, a), inner.vocabulary());
    }
  }

  /** What the requests of one phase received; written by the phase's receiving actor only. */
  private static final class Record {
    final long[] sent;
    final AtomicLongArray firstToken;
    final AtomicLongArray done;
    final AtomicIntegerArray finals;
    final AtomicIntegerArray tokenCount;
    final AtomicReferenceArray<Event> last;
    final int[][] tokens;
    final CountDownLatch answered;

    Record(int n, int[] maxTokens, int count) {
      sent = new long[n];
      firstToken = new AtomicLongArray(n);
      done = new AtomicLongArray(n);
      finals = new AtomicIntegerArray(n);
      tokenCount = new AtomicIntegerArray(n);
      last = new AtomicReferenceArray<>(n);
      tokens = new int[n][];
      for (int i = 0; i < n; i++) {
        tokens[i] = new int[maxTokens[i]];
      }
      answered = new CountDownLatch(count);
    }

    void on(Event e) {
      long now = System.nanoTime();
      int i = Integer.parseInt(e.id().substring(e.id().indexOf('-') + 1));
      if (e instanceof Token t) {
        if (t.index() == 0) {
          firstToken.set(i, now);
        }
        int c = tokenCount.getAndIncrement(i);
        if (c < tokens[i].length) {
          tokens[i][c] = t.token();
        }
      } else {
        last.set(i, e);
        done.set(i, now);
        if (finals.getAndIncrement(i) == 0) {
          answered.countDown();
        }
      }
    }
  }

  /** The prompts and token limits of a phase's requests (request i: {@code prompts[i]}, {@code maxTokens[i]}). */
  private record Workload(int[][] prompts, int[] maxTokens) {
    int size() {
      return prompts.length;
    }
  }

  private record Phase(String side, String kind, double rate, int n, long ok, long refused, long timedOut, long failed, long lost,
      long generated, double seconds, double achievedPerSecond, double ttftP50, double ttftP99, double latencyP50, double latencyP99,
      double sendLateP99, Record record) {
    double tokensPerSecond() {
      return generated / seconds;
    }
  }

  private record Capacity(double perSecond, double tokensPerSecond, long sent, long lost) {}

  private final ActorSystem<Void> system;
  private final Workload workload;
  private final boolean full;
  private int phaseNumber;

  private ServeLmBench(ActorSystem<Void> system, Workload workload, boolean full) {
    this.system = system;
    this.workload = workload;
    this.full = full;
  }

  public static void main(String[] args) throws Exception {
    Path dir = Path.of(args[0]);
    boolean full = args.length < 2 || !args[1].equals("short");
    ModelPackage pkg = ModelPackage.open(dir);
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "serve-lm-bench");
    try (XlaClient client = XlaClient.create();
        CallbackRuntime runtime = CallbackRuntime.create(system, client)) {
      long loadStart = System.nanoTime();
      LanguageModel model = LanguageModel.load(pkg, client.devices().get(0), runtime);
      List<Integer> slotCounts = model.slotCounts();
      PackageSlotDecoder decoder = model.decoder(slotCounts.get(slotCounts.size() - 1)); // all the slots exported
      try {
        boolean tiny = decoder.contextLength() <= 64;
        // The workload: prompts of 1 .. the longest prompt tokens, outputs of four lengths, all within the context.
        int n = tiny ? (full ? 512 : 256) : (full ? 24 : 16);
        int[] outputs = tiny ? new int[] {4, 8, 16, 23} : new int[] {8, 16, 24, 32};
        int promptCap = tiny ? decoder.maxPromptLength() : Math.min(decoder.maxPromptLength(), 64);
        int[][] prompts = new int[n][];
        int[] maxTokens = new int[n];
        for (int i = 0; i < n; i++) {
          int length = 1 + (i * 7) % promptCap;
          prompts[i] = new int[length];
          for (int j = 0; j < length; j++) {
            prompts[i][j] = (i * 37 + j * 11 + 5) % decoder.vocabulary();
          }
          maxTokens[i] = Math.min(outputs[(i * 3 + i / 4) % outputs.length], decoder.contextLength() - length - 1);
        }
        System.out.printf(Locale.ROOT, "INFO lm model=%s slots=%d ctx=%d max_prompt=%d vocab=%d requests=%d outputs=%s loaded_and_compiled_s=%.2f"
            + " mode=%s%n", model.name(), decoder.slots(), decoder.contextLength(), decoder.maxPromptLength(), decoder.vocabulary(), n,
            Arrays.toString(outputs), (System.nanoTime() - loadStart) / 1e9, full ? "full" : "short");
        new ServeLmBench(system, new Workload(prompts, maxTokens), full).run(decoder);
      } finally {
        system.terminate();
        system.getWhenTerminated().toCompletableFuture().get(60, TimeUnit.SECONDS);
        decoder.close(); // shared by the servers, which do not close it
        model.close();
      }
    }
  }

  private void run(PackageSlotDecoder decoder) throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    int n = workload.size();
    GenerationSettings settings = GenerationSettings.create(system).withMaxWaiting(Math.max(64, n)).withDefaultTimeout(REQUEST_TIMEOUT);
    ActorRef<GenerationServer.Command> batched =
        system.systemActorOf(GenerationServer.create("lm-batched", new Shared(decoder), settings, registry), "lm-batched", Props.empty());
    ActorRef<GenerationServer.Command> oneAtATime = // the same decoder; only one of its slots in use
        system.systemActorOf(GenerationServer.create("lm-one", new OneSlot(decoder), settings, registry), "lm-one", Props.empty());
    // Warm-up, untimed: the JIT and the first runs of each program.
    // The tiny model's steps take well under a millisecond: many requests to warm the JIT; a larger model's
    // steps are long enough that a few suffice.
    boolean tiny = decoder.contextLength() <= 64;
    phase("warmup", batched, "burst", 0, Math.min(n, tiny ? 16 * decoder.slots() : decoder.slots()), workload, null);
    phase("warmup", oneAtATime, "burst", 0, Math.min(n, tiny ? 16 * decoder.slots() : 2), workload, null);
    Phase b = print(phase("batched", batched, "burst", 0, n, workload, null));
    Phase o = print(phase("one", oneAtATime, "burst", 0, n, workload, null));
    double rate = 0.5 * n / b.seconds; // requests/s: half the batched side's burst capacity
    Phase bo = print(phase("batched", batched, "open", rate, n, workload, null));
    Phase oo = print(phase("one", oneAtATime, "open", rate, n, workload, null));
    int mismatched = 0;
    int compared = 0; // requests finished on both sides: one cut short (timed out, failed) has fewer tokens
    for (int i = 0; i < n; i++) {
      if (b.record.last.get(i) instanceof Finished && o.record.last.get(i) instanceof Finished) {
        compared++;
        if (!Arrays.equals(b.record.tokens[i], o.record.tokens[i])) {
          mismatched++;
        }
      }
    }
    long lost = b.lost + o.lost + bo.lost + oo.lost;
    System.out.printf(Locale.ROOT, "INFO lm greedy tokens differing between the two sides: %d of %d requests (%d finished on both)%n", mismatched,
        n, compared);
    Sweep sweep = sweep(decoder, tiny, registry);
    lost += sweep.lost;
    System.out.printf(Locale.ROOT, "LM_RESULT lm_batched_speedup=%.2f lm_ttft_p99_ms=%.2f lm_open_ttft_p99_ms=%.2f lm_lost=%d lm_mismatched=%d"
        + " lm_capacity_rps=%.2f lm_p99_at_80pct_ms=%.2f lm_ttft_p99_at_80pct_ms=%.2f%n", b.tokensPerSecond() / o.tokensPerSecond(), b.ttftP99,
        bo.ttftP99, lost, mismatched, sweep.capacity.perSecond, sweep.at80 == null ? Double.NaN : sweep.at80.latencyP99,
        sweep.at80 == null ? Double.NaN : sweep.at80.ttftP99);
  }

  private record Sweep(Capacity capacity, Phase at80, long lost) {}

  /**
   * The rate sweep: requests that all have the same prompt length and token limit, on a server of their
   * own with the default generation settings; its closed-loop capacity, then open-loop arrivals at fixed
   * fractions of it.
   */
  private Sweep sweep(PackageSlotDecoder decoder, boolean tiny, SimpleMeterRegistry registry) throws Exception {
    int promptLength = Math.min(tiny ? 4 : 16, decoder.maxPromptLength());
    int outputLength = Math.min(16, decoder.contextLength() - promptLength - 1);
    double seconds = tiny ? (full ? 5 : 2) : (full ? 40 : 20); // the capacity window, and the sending time of each rate
    int[] percents = full ? new int[] {10, 50, 80, 100, 120} : new int[] {10, 80, 120};
    long sweepStart = System.nanoTime();
    GenerationSettings settings = GenerationSettings.create(system);
    ActorRef<GenerationServer.Command> server =
        system.systemActorOf(GenerationServer.create("lm-sweep", new Shared(decoder), settings, registry), "lm-sweep", Props.empty());
    int outstanding = 2 * decoder.slots(); // all slots busy and as many waiting: a slot freed at a boundary is refilled at once
    Capacity capacity = capacity(server, promptLength, outputLength, decoder.vocabulary(), outstanding, seconds);
    // A deadline well past a request's time in a slot at saturation (slots / capacity, Little's law).
    Duration deadline = Duration.ofMillis(Math.max(2000, (long) (10_000.0 * decoder.slots() / capacity.perSecond)));
    System.out.printf(Locale.ROOT, "LM_CAPACITY req_per_s=%.2f tokens_per_s=%.1f prompt=%d output=%d outstanding=%d seconds=%.0f sent=%d lost=%d"
        + " max_waiting=%d deadline_ms=%d%n", capacity.perSecond, capacity.tokensPerSecond, promptLength, outputLength, outstanding, seconds,
        capacity.sent, capacity.lost, settings.maxWaiting(), deadline.toMillis());
    long lost = capacity.lost;
    Phase at80 = null;
    for (int pct : percents) {
      double rate = capacity.perSecond * pct / 100.0;
      int n = Math.max(4, (int) Math.round(rate * seconds));
      Workload w = fixedLength(n, promptLength, outputLength, decoder.vocabulary());
      Phase p = phase("sweep", server, pct + "%", rate, n, w, deadline);
      lost += p.lost;
      if (pct == 80) {
        at80 = p;
      }
      System.out.printf(Locale.ROOT, "LM_SWEEP pct=%d offered_per_s=%.2f achieved_per_s=%.2f sent=%d ok=%d refused=%d timeout=%d failed=%d lost=%d"
          + " ttft_p50_ms=%.2f ttft_p99_ms=%.2f latency_p50_ms=%.2f latency_p99_ms=%.2f send_late_p99_ms=%.2f seconds=%.3f%n", pct, rate,
          p.achievedPerSecond, n, p.ok, p.refused, p.timedOut, p.failed, p.lost, p.ttftP50, p.ttftP99, p.latencyP50, p.latencyP99,
          p.sendLateP99, p.seconds);
    }
    System.out.printf(Locale.ROOT, "INFO lm sweep took %.1f s%n", (System.nanoTime() - sweepStart) / 1e9);
    return new Sweep(capacity, at80, lost);
  }

  /** {@code n} requests of {@code promptLength} prompt tokens (varying per request) and {@code outputLength} tokens each. */
  private static Workload fixedLength(int n, int promptLength, int outputLength, int vocabulary) {
    int[][] prompts = new int[n][promptLength];
    int[] maxTokens = new int[n];
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < promptLength; j++) {
        prompts[i][j] = (i * 37 + j * 11 + 5) % vocabulary;
      }
      maxTokens[i] = outputLength;
    }
    return new Workload(prompts, maxTokens);
  }

  /**
   * Closed loop: {@code outstanding} fixed-length requests always in flight (each final event sends the
   * next) for {@code seconds}. Capacity = tokens/s streamed from the first token to the last one of that
   * window, over the tokens of one request: the requests' ends come in lumps (with a slow model all slots
   * finish together), the tokens come one per busy slot per step. Then the requests in flight are
   * awaited, and each request's final events counted.
   */
  private Capacity capacity(ActorRef<GenerationServer.Command> server, int promptLength, int outputLength, int vocabulary, int outstanding,
      double seconds) throws InterruptedException {
    Workload w = fixedLength(64, promptLength, outputLength, vocabulary); // prompts reused round robin
    ConcurrentHashMap<Integer, Integer> finals = new ConcurrentHashMap<>();
    AtomicInteger sent = new AtomicInteger();
    AtomicInteger answered = new AtomicInteger();
    AtomicLong tokens = new AtomicLong();
    AtomicLong firstToken = new AtomicLong();
    AtomicLong lastToken = new AtomicLong();
    long start = System.nanoTime();
    long end = start + (long) (seconds * 1e9);
    ActorRef<Event> receiver = system.systemActorOf(Behaviors.receive((ctx, e) -> {
      long now = System.nanoTime();
      if (e instanceof Token) {
        if (now < end) {
          if (tokens.getAndIncrement() == 0) {
            firstToken.set(now);
          }
          lastToken.set(now);
        }
        return Behaviors.same();
      }
      if (finals.merge(Integer.parseInt(e.id().substring(e.id().indexOf('-') + 1)), 1, Integer::sum) == 1) {
        if (now < end) {
          int i = sent.getAndIncrement(); // sent before this one counts as answered: the main thread waits for answered == sent
          server.tell(capacityRequest(i, w, ctx.getSelf()));
        }
        answered.incrementAndGet();
      }
      return Behaviors.same();
    }), "lm-capacity-" + (++phaseNumber), Props.empty());
    for (int k = 0; k < outstanding; k++) {
      int i = sent.getAndIncrement();
      server.tell(capacityRequest(i, w, receiver));
    }
    Thread.sleep((long) (seconds * 1000));
    long waitUntil = System.nanoTime() + WAIT_NANOS;
    while ((System.nanoTime() < end || answered.get() < sent.get()) && System.nanoTime() < waitUntil) {
      Thread.sleep(10);
    }
    Thread.sleep(200); // a second final event for a request would arrive by now
    long lost = 0;
    for (int i = 0; i < sent.get(); i++) {
      if (finals.getOrDefault(i, 0) != 1) {
        lost++;
      }
    }
    double tokensPerSecond = tokens.get() < 2 ? Double.NaN : (tokens.get() - 1) / ((lastToken.get() - firstToken.get()) / 1e9);
    return new Capacity(tokensPerSecond / outputLength, tokensPerSecond, sent.get(), lost);
  }

  /** Closed-loop request {@code i}: the prompts of {@code w} round robin, greedy, the server's default deadline. */
  private static GenerationServer.Generate capacityRequest(int i, Workload w, ActorRef<Event> replyTo) {
    return new GenerationServer.Generate("c-" + i, w.prompts[i % w.size()], w.maxTokens[i % w.size()], Set.of(), TokenSampler.greedy(), null,
        replyTo);
  }

  private static Phase print(Phase p) {
    System.out.printf(Locale.ROOT, "LM side=%s kind=%s rate=%.1f sent=%d ok=%d refused=%d timeout=%d failed=%d lost=%d tokens=%d seconds=%.3f"
        + " tokens_per_s=%.1f ttft_p50_ms=%.2f ttft_p99_ms=%.2f latency_p99_ms=%.2f%n", p.side, p.kind, p.rate, p.n, p.ok, p.refused, p.timedOut,
        p.failed, p.lost, p.generated, p.seconds, p.tokensPerSecond(), p.ttftP50, p.ttftP99, p.latencyP99);
    return p;
  }

  /**
   * Sends the first {@code n} requests of {@code w} to {@code server}, at once ({@code rate} 0) or at
   * {@code rate} per second whatever the answers, each with {@code timeout} (null: the server's default),
   * and waits for their answers.
   */
  private Phase phase(String side, ActorRef<GenerationServer.Command> server, String kind, double rate, int n, Workload w, Duration timeout)
      throws InterruptedException {
    Record record = new Record(w.size(), w.maxTokens, n);
    ActorRef<Event> receiver = system.systemActorOf(Behaviors.receiveMessage(e -> {
      record.on(e);
      return Behaviors.same();
    }), "lm-receiver-" + (++phaseNumber), Props.empty());
    long start = System.nanoTime();
    List<Double> lateMillis = OpenLoop.send(n, rate, (i, due) -> {
      record.sent[i] = System.nanoTime();
      server.tell(new GenerationServer.Generate("r-" + i, w.prompts[i], w.maxTokens[i], Set.of(), TokenSampler.greedy(), timeout, receiver));
    });
    record.answered.await(WAIT_NANOS, TimeUnit.NANOSECONDS);
    Thread.sleep(200); // a second final event for a request would arrive by now
    long end = 0;
    long firstFinished = Long.MAX_VALUE;
    long lastFinished = Long.MIN_VALUE;
    long ok = 0;
    long refused = 0;
    long timedOut = 0;
    long failed = 0;
    long lost = 0;
    long generated = 0;
    List<Double> ttft = new ArrayList<>();
    List<Double> latency = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      generated += record.tokenCount.get(i);
      if (record.finals.get(i) != 1) {
        lost++;
        continue;
      }
      end = Math.max(end, record.done.get(i));
      Event last = record.last.get(i);
      if (last instanceof Finished) {
        ok++;
        firstFinished = Math.min(firstFinished, record.done.get(i));
        lastFinished = Math.max(lastFinished, record.done.get(i));
        ttft.add((record.firstToken.get(i) - record.sent[i]) / 1e6);
        latency.add((record.done.get(i) - record.sent[i]) / 1e6);
      } else if (last instanceof Failed f && f.error() instanceof OverloadedException) {
        refused++;
      } else if (last instanceof Failed f && f.error() instanceof RequestTimeoutException) {
        timedOut++;
      } else {
        failed++;
        if (failed == 1) {
          System.out.println("INFO lm " + side + " " + kind + " failed: " + last);
        }
      }
    }
    double seconds = ((end == 0 ? System.nanoTime() : end) - start) / 1e9;
    // Finished requests per second between the first and the last to finish: in a steady state they finish
    // 1/rate apart, whatever each one's latency (which first send to last answer would count in).
    double achieved = ok < 2 || lastFinished == firstFinished ? Double.NaN : (ok - 1) / ((lastFinished - firstFinished) / 1e9);
    fence(server);
    return new Phase(side, kind, rate, n, ok, refused, timedOut, failed, lost, generated, seconds, achieved, OpenLoop.percentile(ttft, 0.5),
        OpenLoop.percentile(ttft, 0.99), OpenLoop.percentile(latency, 0.5), OpenLoop.percentile(latency, 0.99),
        OpenLoop.percentile(lateMillis, 0.99), record);
  }

  /**
   * Returns once {@code server} has no iteration in flight. The servers share one decoder, so one must be
   * idle before the next phase uses another; a request that timed out mid-generation is answered while its
   * iteration still runs. A one-token request is admitted only after the iteration in flight, and its
   * answer comes once its own iteration is done, leaving the server with nothing to run.
   */
  private void fence(ActorRef<GenerationServer.Command> server) throws InterruptedException {
    CountDownLatch done = new CountDownLatch(1);
    ActorRef<Event> receiver = system.systemActorOf(Behaviors.receiveMessage(e -> {
      if (!(e instanceof Token)) {
        done.countDown();
      }
      return Behaviors.same();
    }), "lm-fence-" + (++phaseNumber), Props.empty());
    server.tell(new GenerationServer.Generate("fence", new int[] {1}, 1, Set.of(), TokenSampler.greedy(), null, receiver));
    if (!done.await(WAIT_NANOS, TimeUnit.NANOSECONDS)) {
      throw new IllegalStateException("the generation server gave no answer to a one-token request in " + WAIT_NANOS / 1e9 + " s");
    }
  }
}
