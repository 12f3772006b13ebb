package dev.xlaactors.bench;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.serve.BatchedModel;
import dev.xlaactors.actors.serve.ModelServer;
import dev.xlaactors.actors.serve.ServeSettings;
import dev.xlaactors.error.OverloadedException;
import dev.xlaactors.error.RequestTimeoutException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.LoadedPackage;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.Role;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReferenceArray;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.pattern.StatusReply;

/**
 * The Java side of {@code bench/run.sh serve}: the scoring model of tools/jax_scoring_model.py (y =
 * relu(x . W), W f32[D, D], relu a Java host callback registered inline) behind a {@link ModelServer}.
 *
 * <ol>
 *   <li>Capacity, closed loop: {@code OUTSTANDING} requests always in flight for a few seconds, batched
 *       (the default settings: max-batch-size 32, max-delay 2ms, one batch at a time) and one run per
 *       request (max-batch-size 1, as many runs at once as cores): requests/s answered.
 *   <li>Open loop at fixed rates (10% to 120% of the batched capacity, and a 200% burst to measure
 *       refusals): requests sent on schedule whatever the answers, each with a deadline; per rate the
 *       answers by kind, latency p50/p99 of the results counted from each request's scheduled send time
 *       (so a sender that falls behind adds its lateness instead of hiding it), mean requests per batch,
 *       the p99 time to a refusal, lost requests (sent, but answered other than exactly once), and
 *       where the time went: p99 from the actual send, p99 of the queue wait and of the batch's run as
 *       the server reports them, GC pause time during the phase.
 * </ol>
 * The tail goal, with one batch in flight: a request can wait for the batch ahead of it and then run in its own,
 * so {@code p99 at 80% <= max-delay + 2 x the p99 run time of a batch of the largest size} in that phase.
 * Prints {@code CAPACITY}, {@code LOAD}, {@code GOAL} and {@code RESULT serve ...} lines; bench/run.sh makes the table.
 * Arguments: the scoring package's directory, then {@code full} or {@code short}.
 */
public final class ServeBench {
  private static final int OUTSTANDING = 256;
  private static final Duration REQUEST_TIMEOUT = Duration.ofSeconds(2);

  private final BatchedModel model;
  private final CallbackRuntime callbacks;
  private final ActorSystem<Void> system;
  private final int d;
  private final List<HostTensor> inputs = new ArrayList<>();
  private int serverNumber;

  private ServeBench(BatchedModel model, CallbackRuntime callbacks, ActorSystem<Void> system, int d) {
    this.model = model;
    this.callbacks = callbacks;
    this.system = system;
    this.d = d;
    Random random = new Random(1);
    for (int i = 0; i < 64; i++) {
      float[] x = new float[d];
      for (int j = 0; j < d; j++) {
        x[j] = random.nextFloat() * 2 - 1;
      }
      inputs.add(HostTensor.ofFloats(x, d));
    }
  }

  public static void main(String[] args) throws Exception {
    Path dir = Path.of(args[0]);
    boolean full = args.length < 2 || !args[1].equals("short");
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "serve-bench");
    try (XlaClient client = XlaClient.create();
        CallbackRuntime callbacks = CallbackRuntime.create(system, client)) {
      long loadStart = System.nanoTime();
      LoadedPackage loaded = ModelPackage.open(dir).load(client.devices().get(0));
      BatchedModel model = BatchedModel.of(loaded, Role.MAIN); // lends the package's Models
      int d = (int) model.requestInputTypes().get(0).shape().dim(0);
      for (int b : model.batchSizes()) {
        int size = b;
        // The output's values are copied into the tensor at once (ofFloats), so each thread reuses one array per
        // size: a fresh one was 256 KiB of garbage per batch of 32, 61% of the bytes the serve phases allocated
        // (JFR's allocation samples).
        ThreadLocal<float[]> scratch = ThreadLocal.withInitial(() -> new float[size * d]);
        callbacks.registerInline(new HostCallback("relu_b" + b, List.of(TensorType.of(DType.F32, b, d)), null, (in, s) -> {
          FloatBuffer h = in.get(0).data().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
          float[] y = scratch.get();
          for (int i = 0; i < y.length; i++) {
            y[i] = Math.max(0f, h.get(i));
          }
          // Its pooled memory goes back now: left to the GC, the pool collects garbage to get it back.
          in.get(0).close();
          return List.of(HostTensor.ofFloats(y, size, d));
        })).toCompletableFuture().join();
      }
      System.out.printf(Locale.ROOT, "INFO model=%s d=%d sizes=%s weights_mib=%.1f loaded_and_compiled_s=%.2f cores=%d mode=%s%n",
          model.name(), d, model.batchSizes(), 4.0 * d * d / (1 << 20), (System.nanoTime() - loadStart) / 1e9,
          Runtime.getRuntime().availableProcessors(), full ? "full" : "short");
      try {
        new ServeBench(model, callbacks, system, d).run(full);
      } finally {
        loaded.close();
      }
    } finally {
      system.terminate();
    }
  }

  private void run(boolean full) throws Exception {
    ServeSettings.Model batched = ServeSettings.create(system).forModel("scoring");
    int cores = Runtime.getRuntime().availableProcessors();
    ServeSettings.Model unbatched = batched.withMaxBatchSize(1).withMaxDelay(Duration.ZERO).withMaxBatchesInFlight(cores);
    System.out.printf(Locale.ROOT, "INFO batched max_batch=%d max_delay_ms=%.1f queue=%d in_flight=%d; unbatched max_batch=1 in_flight=%d%n",
        batched.maxBatchSize(), batched.maxDelay().toNanos() / 1e6, batched.queueCapacity(), batched.maxBatchesInFlight(), cores);
    double seconds = full ? 5 : 2;
    // Warm-up: the JIT and every compiled size, untimed.
    capacity("warmup", batched, full ? 3 : 1);
    capacity("warmup", unbatched, 1);
    Capacity withBatches = capacity("batched", batched, seconds);
    Capacity oneByOne = capacity("unbatched", unbatched, seconds);
    double speedup = withBatches.perSecond / oneByOne.perSecond;

    int[] percents = full ? new int[] {10, 25, 50, 80, 100, 120, 200} : new int[] {50, 80, 120, 200};
    double p99At80 = Double.NaN;
    double batchP99At80 = Double.NaN;
    long lost = 0;
    List<Double> refusals = new ArrayList<>();
    for (int pct : percents) {
      Load l = openLoop("batched", batched, withBatches.perSecond * pct / 100.0, pct, pct == 200 ? Math.min(seconds, 2) : seconds);
      lost += l.lost;
      refusals.addAll(l.refusalMillis);
      if (pct == 80) {
        p99At80 = l.p99Millis;
        batchP99At80 = l.largestBatchRunP99Millis;
      }
    }
    if (full) { // the same absolute rates for one run per request: where it saturates
      for (int pct : new int[] {10, 25, 50}) {
        Load l = openLoop("unbatched", unbatched, withBatches.perSecond * pct / 100.0, pct, seconds);
        lost += l.lost;
      }
    }
    double refusedP99 = OpenLoop.percentile(refusals, 0.99);
    double maxDelayMillis = batched.maxDelay().toNanos() / 1e6;
    double goal = maxDelayMillis + 2 * batchP99At80;
    System.out.printf(Locale.ROOT, "GOAL p99_at_80pct_ms=%.2f max_delay_ms=%.1f batch_p99_ms=%.2f bound_ms=%.2f met=%s batch=%d%n",
        p99At80, maxDelayMillis, batchP99At80, goal, p99At80 <= goal ? "yes" : "no", model.largestBatch());
    System.out.printf(Locale.ROOT, "RESULT serve batched_speedup=%.2f p99_at_80pct_ms=%.2f lost=%d overload_refused_ms=%s max_delay_ms=%.1f"
            + " batch_p99_ms=%.2f%n", speedup, p99At80, lost, refusals.isEmpty() ? "none" : String.format(Locale.ROOT, "%.3f", refusedP99),
        maxDelayMillis, batchP99At80);
  }

  private record Capacity(double perSecond, double meanBatch, double batchComputeMillis) {}

  /** One open-loop phase; {@code largestBatchRunP99Millis}: p99 run time of its batches of the largest size (NaN if none ran). */
  private record Load(long lost, double p99Millis, List<Double> refusalMillis, double largestBatchRunP99Millis) {}

  /** Closed loop: {@link #OUTSTANDING} requests always in flight; requests/s answered with a result. */
  private Capacity capacity(String side, ServeSettings.Model settings, double seconds) throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    ActorRef<ModelServer.Command> server = spawn(settings, registry);
    AtomicLong ok = new AtomicLong();
    AtomicLong failed = new AtomicLong();
    AtomicLong batchRows = new AtomicLong();
    AtomicLong computeNanos = new AtomicLong();
    AtomicLong fullBatches = new AtomicLong();
    long end = System.nanoTime() + (long) (seconds * 1e9);
    ActorRef<StatusReply<ModelServer.Prediction>>[] self = newRefArray();
    Behavior<StatusReply<ModelServer.Prediction>> loop = Behaviors.receive((ctx, reply) -> {
      if (reply.isSuccess()) {
        ok.incrementAndGet();
        ModelServer.Prediction p = reply.getValue();
        batchRows.addAndGet(p.requestsInBatch());
        if (p.batchSize() == model.largestBatch() || settings.maxBatchSize() == 1) {
          computeNanos.addAndGet(p.computed().toNanos());
          fullBatches.incrementAndGet();
        }
      } else {
        failed.incrementAndGet();
      }
      if (System.nanoTime() < end) {
        server.tell(new ModelServer.Infer(null, List.of(inputs.get((int) (ok.get() % inputs.size()))), REQUEST_TIMEOUT, self[0]));
      }
      return Behaviors.same();
    });
    self[0] = system.systemActorOf(loop, "serve-bench-loop-" + (++serverNumber), Props.empty());
    long start = System.nanoTime();
    for (int i = 0; i < OUTSTANDING; i++) {
      server.tell(new ModelServer.Infer(null, List.of(inputs.get(i % inputs.size())), REQUEST_TIMEOUT, self[0]));
    }
    Thread.sleep((long) (seconds * 1000));
    long answeredOk = ok.get();
    double elapsed = (System.nanoTime() - start) / 1e9;
    Thread.sleep(REQUEST_TIMEOUT.toMillis() + 500); // let the last ones drain before the next phase
    double perSecond = answeredOk / elapsed;
    double meanBatch = ok.get() == 0 ? 0 : (double) batchRows.get() / ok.get();
    double computeMillis = fullBatches.get() == 0 ? Double.NaN : computeNanos.get() / 1e6 / fullBatches.get();
    if (!side.equals("warmup")) {
      System.out.printf(Locale.ROOT, "CAPACITY side=%s req_per_s=%.1f mean_batch=%.2f batch_compute_ms=%.3f failed=%d%n", side, perSecond,
          meanBatch, computeMillis, failed.get());
    }
    return new Capacity(perSecond, meanBatch, computeMillis);
  }

  /**
   * Open loop: requests sent at {@code rate} per second for {@code seconds}, on schedule whatever the
   * answers (a sender that falls behind catches up in bursts), each with a deadline of {@link
   * #REQUEST_TIMEOUT}; then every answer is awaited and each request's answers counted.
   */
  private Load openLoop(String side, ServeSettings.Model settings, double rate, int pct, double seconds) throws Exception {
    int n = Math.max(1, (int) (rate * seconds));
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    ActorRef<ModelServer.Command> server = spawn(settings, registry);
    AtomicLongArray sent = new AtomicLongArray(n);
    AtomicLongArray answeredAt = new AtomicLongArray(n);
    AtomicIntegerArray answers = new AtomicIntegerArray(n);
    AtomicReferenceArray<String> kind = new AtomicReferenceArray<>(n);
    AtomicIntegerArray batchOf = new AtomicIntegerArray(n);
    AtomicIntegerArray compiledBatchOf = new AtomicIntegerArray(n);
    AtomicLongArray queuedNanos = new AtomicLongArray(n);
    AtomicLongArray computedNanos = new AtomicLongArray(n);
    AtomicLong answeredTotal = new AtomicLong();
    Behavior<StatusReply<ModelServer.Prediction>> collector = Behaviors.receiveMessage(reply -> {
      long now = System.nanoTime();
      String id = reply.isSuccess() ? reply.getValue().requestId()
          : reply.getError() instanceof dev.xlaactors.error.ServingException s ? s.requestId() : null;
      if (id == null) {
        return Behaviors.same();
      }
      int i = Integer.parseInt(id);
      if (answers.getAndIncrement(i) == 0) {
        answeredAt.set(i, now);
        kind.set(i, reply.isSuccess() ? "ok" : reply.getError() instanceof OverloadedException ? "refused"
            : reply.getError() instanceof RequestTimeoutException ? "timeout" : "failed");
        if (reply.isSuccess()) {
          batchOf.set(i, reply.getValue().requestsInBatch());
          compiledBatchOf.set(i, reply.getValue().batchSize());
          queuedNanos.set(i, reply.getValue().queued().toNanos());
          computedNanos.set(i, reply.getValue().computed().toNanos());
        }
      }
      answeredTotal.incrementAndGet();
      return Behaviors.same();
    });
    ActorRef<StatusReply<ModelServer.Prediction>> replyTo =
        system.systemActorOf(collector, "serve-bench-collector-" + (++serverNumber), Props.empty());
    long[] dueAt = new long[n];
    long gcBefore = gcMillis();
    // How far behind its schedule each request went out; latency counts from the scheduled send.
    List<Double> lateMillis = OpenLoop.send(n, rate, (i, due) -> {
      dueAt[i] = due;
      sent.set(i, System.nanoTime());
      server.tell(new ModelServer.Infer(Integer.toString(i), List.of(inputs.get(i % inputs.size())), REQUEST_TIMEOUT, replyTo));
    });
    long drainUntil = System.nanoTime() + REQUEST_TIMEOUT.toNanos() + TimeUnit.SECONDS.toNanos(10);
    while (answeredTotal.get() < n && System.nanoTime() < drainUntil) {
      Thread.sleep(10);
    }
    Thread.sleep(200); // room for a second answer to arrive, if the server ever sent one
    long gcPauseMillis = gcMillis() - gcBefore;
    List<Double> okMillis = new ArrayList<>(); // from the scheduled send: what a client sending on schedule sees
    List<Double> fromSendMillis = new ArrayList<>(); // from the actual send: the server's part
    List<Double> queuedMillis = new ArrayList<>();
    List<Double> computedMillis = new ArrayList<>();
    List<Double> largestBatchRunMillis = new ArrayList<>(); // per request: weighs each batch by its requests
    List<Double> refusedMillis = new ArrayList<>();
    long ok = 0;
    long refused = 0;
    long timedOut = 0;
    long failed = 0;
    long lost = 0;
    long rows = 0;
    for (int i = 0; i < n; i++) {
      if (answers.get(i) != 1) {
        lost++;
        continue;
      }
      double ms = (answeredAt.get(i) - sent.get(i)) / 1e6;
      switch (kind.get(i)) {
        case "ok" -> {
          ok++;
          okMillis.add((answeredAt.get(i) - dueAt[i]) / 1e6);
          fromSendMillis.add(ms);
          queuedMillis.add(queuedNanos.get(i) / 1e6);
          computedMillis.add(computedNanos.get(i) / 1e6);
          if (compiledBatchOf.get(i) == model.largestBatch()) {
            largestBatchRunMillis.add(computedNanos.get(i) / 1e6);
          }
          rows += batchOf.get(i);
        }
        case "refused" -> {
          refused++;
          refusedMillis.add(ms);
        }
        case "timeout" -> timedOut++;
        default -> failed++;
      }
    }
    double p50 = OpenLoop.percentile(okMillis, 0.50);
    double p99 = OpenLoop.percentile(okMillis, 0.99);
    System.out.printf(Locale.ROOT,
        "LOAD side=%s pct=%d rate=%.0f sent=%d ok=%d refused=%d timeout=%d failed=%d lost=%d p50_ms=%.2f p99_ms=%.2f mean_batch=%.2f"
            + " refuse_p99_ms=%s achieved_per_s=%.0f send_late_p99_ms=%.2f p99_from_send_ms=%.2f queued_p99_ms=%.2f compute_p99_ms=%.2f"
            + " gc_ms=%d largest_batch_run_p99_ms=%s%n",
        side, pct, rate, n, ok, refused, timedOut, failed, lost, p50, p99, ok == 0 ? 0.0 : (double) rows / ok,
        refusedMillis.isEmpty() ? "-" : String.format(Locale.ROOT, "%.3f", OpenLoop.percentile(refusedMillis, 0.99)), ok / seconds,
        OpenLoop.percentile(lateMillis, 0.99), OpenLoop.percentile(fromSendMillis, 0.99), OpenLoop.percentile(queuedMillis, 0.99),
        OpenLoop.percentile(computedMillis, 0.99), gcPauseMillis,
        largestBatchRunMillis.isEmpty() ? "-" : String.format(Locale.ROOT, "%.2f", OpenLoop.percentile(largestBatchRunMillis, 0.99)));
    return new Load(lost, p99, refusedMillis,
        largestBatchRunMillis.isEmpty() ? Double.NaN : OpenLoop.percentile(largestBatchRunMillis, 0.99));
  }

  /** Milliseconds the JVM's collectors have spent so far (their pauses, for G1's young and full collections). */
  private static long gcMillis() {
    long total = 0;
    for (var collector : java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()) {
      total += Math.max(0, collector.getCollectionTime());
    }
    return total;
  }

  /** A server of its own per phase (idle once its phase is over; they stop with the system). */
  private ActorRef<ModelServer.Command> spawn(ServeSettings.Model settings, SimpleMeterRegistry registry) {
    return system.systemActorOf(ModelServer.create(model, callbacks, settings, registry), "scoring-" + (++serverNumber), Props.empty());
  }

  @SuppressWarnings("unchecked")
  private static ActorRef<StatusReply<ModelServer.Prediction>>[] newRefArray() {
    return (ActorRef<StatusReply<ModelServer.Prediction>>[]) new ActorRef[1];
  }
}
