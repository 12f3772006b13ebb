package dev.xlaactors.examples;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.jobs.BatchScoring;
import dev.xlaactors.actors.jobs.InferenceJob;
import dev.xlaactors.actors.jobs.JobResult;
import dev.xlaactors.actors.jobs.JobSettings;
import dev.xlaactors.actors.jobs.Program;
import dev.xlaactors.actors.jobs.Progress;
import dev.xlaactors.actors.jobs.ResultJournal;
import dev.xlaactors.graph.Composites;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.actors.jobs.FatalJobException;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pekko.Done;
import org.apache.pekko.actor.CoordinatedShutdown;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * A supervised batch-inference job: a small classifier (two dense layers and a softmax, random weights)
 * scores a few hundred items, one output line per item, with a progress bar on the terminal.
 *
 * <ul>
 *   <li>Item 42's step fails twice (its audit callback throws) and succeeds on the third try: the job
 *       retries it with backoff and goes on.
 *   <li>Kill it (Ctrl-C, or {@code kill -9}) and run it again: it resumes at the first unfinished item,
 *       and the output file ends up with every item exactly once.
 * </ul>
 *
 * <p>Usage: {@code examples/run.sh batch-inference [output.tsv] [items] [delay-ms]}; defaults {@code
 * examples/target/batch-inference.tsv}, 300 items, 100 ms per item (about 30 s: time to kill it half way).
 */
public final class BatchInference {
  private static final int FEATURES = 8;
  private static final int HIDDEN = 16;
  private static final int CLASSES = 4;
  private static final long FLAKY_ITEM = 42;
  private static final String USAGE =
      "usage: examples/run.sh batch-inference [output.tsv] [items >= 1] [delay-ms >= 0]"
          + " (defaults: examples/target/batch-inference.tsv 300 100)";

  private BatchInference() {}

  public static void main(String[] args) throws Exception {
    Path output;
    int items;
    long delayMs;
    try {
      if (args.length > 3) {
        throw new IllegalArgumentException("too many arguments");
      }
      output = Path.of(args.length > 0 ? args[0] : "examples/target/batch-inference.tsv");
      items = args.length > 1 ? Integer.parseInt(args[1]) : 300;
      delayMs = args.length > 2 ? Long.parseLong(args[2]) : 100;
      if (items < 1 || delayMs < 0) {
        throw new IllegalArgumentException("items must be >= 1 and delay-ms >= 0");
      }
    } catch (IllegalArgumentException e) { // NumberFormatException included
      System.err.println("bad arguments " + java.util.Arrays.toString(args) + ": " + e.getMessage());
      System.err.println(USAGE);
      System.exit(2);
      return;
    }

    Map<Long, String> existing;
    try {
      existing = ResultJournal.read(output);
    } catch (FatalJobException e) {
      System.err.println(e.getMessage());
      System.exit(1);
      return;
    }
    long already = existing.keySet().stream().filter(i -> i < items).count();
    long beyond = existing.size() - already;
    System.out.printf("output: %s%n", output.toAbsolutePath());
    if (already == items) {
      System.out.printf("all %d items are already in %s: nothing to do. To start over, delete it"
          + " (rm %s) or give another output file.%n", items, output, output);
      return;
    }
    System.out.printf(already > 0 ? "resuming: %d of %d items already done" : "starting: %2$d items", already, items);
    System.out.println(beyond > 0 ? " (the file also holds " + beyond + " items beyond " + items + ", kept as they are)" : "");
    System.out.println("press Ctrl-C to stop it; run the same command again to resume");

    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "batch-inference");
    int exit = 1;
    try (XlaClient client = XlaClient.create();
        CallbackRuntime callbacks = CallbackRuntime.create(system, client)) {
      JobSettings settings = JobSettings.create(system);
      BatchScoring work =
          BatchScoring.create(items, i -> {
            Thread.sleep(delayMs); // stands in for reading the item from storage
            return List.of(features(i), HostTensor.ofInts(new int[] {(int) i}));
          }, output, settings);
      ActorRef<InferenceJob.Command> job =
          system.systemActorOf(
              InferenceJob.create("batch-inference", Program.of(classifier()), client, callbacks, work, settings),
              "batch-inference", Props.empty());
      AtomicReference<Progress> last = new AtomicReference<>();
      // Set when the job has ended or Ctrl-C was pressed. The Ctrl-C task also runs on the normal
      // terminate() at the end: then the job has ended and it does nothing.
      java.util.concurrent.atomic.AtomicBoolean ended = new java.util.concurrent.atomic.AtomicBoolean();
      ActorRef<Progress> bar =
          system.systemActorOf(
              Behaviors.receive(Progress.class).onMessage(Progress.class, p -> {
                last.set(p);
                if (ended.get()) {
                  return Behaviors.same(); // interrupted: the summary line is the last word
                }
                System.out.print("\r" + progressBar(p) + "   ");
                System.out.flush();
                return Behaviors.same();
              }).build(),
              "progress-bar", Props.empty());
      job.tell(new InferenceJob.Subscribe(bar));
      // Ctrl-C: cancel the job first (it closes its output file), then let the actor system stop.
      CoordinatedShutdown.get(system).addTask(CoordinatedShutdown.PhaseBeforeServiceUnbind(), "cancel-batch-inference", () ->
          ended.getAndSet(true) ? java.util.concurrent.CompletableFuture.completedFuture(Done.getInstance()) :
          AskPattern.<InferenceJob.Command, JobResult>ask(job, r -> new InferenceJob.Cancel("Ctrl-C", r), Duration.ofSeconds(4), system.scheduler())
              .handle((r, e) -> {
                Progress p = last.get();
                long done = r != null ? r.done() : p != null ? p.done() : already;
                System.out.printf("%ninterrupted (Ctrl-C) at %d/%d; run the same command again to resume%n", done, items);
                return Done.getInstance();
              }));
      JobResult result =
          AskPattern.<InferenceJob.Command, JobResult>ask(job, InferenceJob.Start::new, Duration.ofDays(1), system.scheduler())
              .toCompletableFuture()
              .get();
      Thread.sleep(50); // let the bar draw its last state before the summary
      ended.set(true);
      System.out.println();
      System.out.println("result: " + result);
      System.out.printf("%s holds %d of %d items%n", output,
          ResultJournal.read(output).keySet().stream().filter(i -> i < items).count(), items);
      exit = result instanceof JobResult.Completed ? 0 : 1; // a failed, cancelled or timed-out job is a failure
    } finally {
      system.terminate();
    }
    if (exit != 0) {
      System.exit(exit);
    }
  }

  /**
   * The step: class probabilities of one item, {@code softmax(tanh(x W1 + b1) W2 + b2)}, after an audit
   * callback that sees the item's id (and throws twice for item 42, the injected failure).
   */
  private static Graph classifier() {
    Random weights = new Random(2024);
    TensorType id = TensorType.of(DType.S32);
    AtomicInteger flakyAttempts = new AtomicInteger();
    HostCallback audit = new HostCallback("audit", List.of(id), null, (in, s) -> {
      int item = in.get(0).toIntArray()[0];
      if (item == FLAKY_ITEM && flakyAttempts.incrementAndGet() <= 2) {
        throw new IllegalStateException("audit service unavailable for item " + item + " (injected, attempt " + flakyAttempts.get() + ")");
      }
      return in;
    });
    GraphBuilder b = new GraphBuilder("classifier");
    Value x = b.parameter(TensorType.of(DType.F32, FEATURES));
    Value itemId = b.parameter(id);
    Value audited = b.hostCall(audit, itemId).get(0);
    Value hidden = b.tanh(b.add(b.matmul(b.reshape(x, 1, FEATURES), b.constant(gaussian(weights, FEATURES * HIDDEN), FEATURES, HIDDEN)),
        b.constant(gaussian(weights, HIDDEN), HIDDEN)));
    Value logits = b.add(b.matmul(hidden, b.constant(gaussian(weights, HIDDEN * CLASSES), HIDDEN, CLASSES)),
        b.constant(gaussian(weights, CLASSES), CLASSES));
    Value probs = b.reshape(Composites.softmax(b, logits, 1), CLASSES);
    return b.build(audited, probs);
  }

  /** Item {@code i}'s features: deterministic, so a resumed run computes what the killed one would have. */
  private static HostTensor features(long i) {
    Random r = new Random(i);
    return HostTensor.ofFloats(gaussian(r, FEATURES));
  }

  private static float[] gaussian(Random r, int n) {
    float[] v = new float[n];
    for (int i = 0; i < n; i++) {
      v[i] = (float) (r.nextGaussian() * 0.5);
    }
    return v;
  }

  private static String progressBar(Progress p) {
    int width = 30;
    int filled = p.total() == 0 ? width : (int) (p.done() * width / p.total());
    return "[" + "#".repeat(filled) + ".".repeat(width - filled) + "] " + p.line();
  }
}
