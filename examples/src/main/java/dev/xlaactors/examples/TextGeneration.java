package dev.xlaactors.examples;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.jobs.Generation;
import dev.xlaactors.actors.jobs.InferenceJob;
import dev.xlaactors.actors.jobs.JobResult;
import dev.xlaactors.actors.jobs.JobSettings;
import dev.xlaactors.actors.jobs.Program;
import dev.xlaactors.graph.Composites;
import dev.xlaactors.graph.Graph;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.pekko.Done;
import org.apache.pekko.actor.CoordinatedShutdown;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * Autoregressive generation with a Java sampling callback: a tiny random-weights character "language
 * model" (embedding lookup, a dense layer, softmax over the vocabulary) is one compiled step; in the
 * middle of each step XLA calls Java, which samples the next character with a seeded {@link Random},
 * prints it, and decides whether to stop ('.' or the length limit). The job runs one step per character.
 *
 * <p>Ctrl-C cancels it: a task of Pekko's coordinated shutdown (run by the JVM's shutdown hook) sends the job {@code Cancel}, which unblocks the step waiting
 * on the callback, and waits briefly for the job to report {@code Cancelled}.
 *
 * <p>Usage: {@code examples/run.sh generation [max-chars] [seed] [delay-ms]}; defaults 400, 7, 40 ms per
 * character (slow enough to press Ctrl-C).
 */
public final class TextGeneration {
  private static final String VOCABULARY = "abcdefghijklmnopqrstuvwxyz ,.";
  private static final int DIM = 16;

  private TextGeneration() {}

  public static void main(String[] args) throws Exception {
    ExampleArgs arguments = new ExampleArgs("examples/run.sh generation [max-chars >= 1] [seed] [delay-ms >= 0]", args, 3);
    int maxChars = arguments.intAt(0, "max-chars", 400, 1);
    long seed = arguments.longAt(1, "seed", 7, Long.MIN_VALUE);
    long delayMs = arguments.longAt(2, "delay-ms", 40, 0);

    ActorSystem<Void> system =
        ActorSystem.create(Behaviors.empty(), "generation");
    XlaClient client = XlaClient.create();
    CallbackRuntime callbacks = CallbackRuntime.create(system, client);
    try {
      Random random = new Random(seed);
      HostCallback sample = new HostCallback("sample", List.of(TensorType.of(DType.S32), TensorType.of(DType.S32)), null, (in, s) -> {
        Thread.sleep(delayMs); // a slow sampler, so Ctrl-C lands in the middle of a step
        int token = sampleFrom(in.get(0).toFloatArray(), random);
        char c = VOCABULARY.charAt(token);
        System.out.print(c);
        System.out.flush();
        return List.of(HostTensor.ofInts(new int[] {token}), HostTensor.ofInts(new int[] {c == '.' ? 1 : 0}));
      });
      Generation generation =
          Generation.create(List.of(HostTensor.ofInts(new int[] {VOCABULARY.indexOf(' ')})), maxChars, (step, outputs) ->
              outputs.get(1).toIntArray()[0] == 1 ? Optional.empty() : Optional.of(List.of(outputs.get(0))));
      JobSettings settings = JobSettings.create(system);
      ActorRef<InferenceJob.Command> job =
          system.systemActorOf(
              InferenceJob.create("generation", Program.of(languageModel(seed, sample)), client, callbacks, generation, settings),
              "generation", Props.empty());

      CompletableFuture<JobResult> result =
          AskPattern.<InferenceJob.Command, JobResult>ask(job, InferenceJob.Start::new, Duration.ofDays(1), system.scheduler())
              .toCompletableFuture();
      AtomicBoolean cancelling = new AtomicBoolean();
      // Ctrl-C: a task of Pekko's coordinated shutdown, which runs it before it stops any actor, so the job
      // ends as Cancelled("Ctrl-C") rather than being stopped under its step.
      CoordinatedShutdown.get(system).addTask(CoordinatedShutdown.PhaseBeforeServiceUnbind(), "cancel-generation", () -> {
        if (result.isDone()) {
          return CompletableFuture.completedFuture(Done.getInstance());
        }
        cancelling.set(true);
        return AskPattern.<InferenceJob.Command, JobResult>ask(
                job, replyTo -> new InferenceJob.Cancel("Ctrl-C", replyTo), Duration.ofSeconds(2), system.scheduler())
            .handle((cancelled, e) -> {
              System.out.println();
              System.out.println(e == null ? "result: " + cancelled : "the job did not confirm the cancellation in 2 s: " + e);
              return Done.getInstance();
            });
      });

      System.out.print("> ");
      JobResult finished = result.get();
      if (!cancelling.get()) { // else the shutdown hook reports it
        System.out.println();
        System.out.println("result: " + finished);
      }
    } finally { // also when the job cannot start, so the JVM never stays up on a live actor system
      callbacks.close();
      system.terminate();
      system.getWhenTerminated().toCompletableFuture().get(10, TimeUnit.SECONDS);
      client.close();
    }
  }

  /** One step: token id (s32[]) -> embedding -> tanh dense -> softmax -> Java sampler -> (next id, stop flag). */
  private static Graph languageModel(long seed, HostCallback sample) {
    int vocab = VOCABULARY.length();
    Random weights = new Random(seed);
    GraphBuilder b = new GraphBuilder("char_lm_step");
    Value token = b.parameter(TensorType.of(DType.S32));
    Value oneHot = b.convert(b.equal(b.iota(TensorType.of(DType.S32, vocab), 0), token), DType.F32);
    Value embedded = b.matmul(b.reshape(oneHot, 1, vocab), b.constant(gaussian(weights, vocab * DIM, 1.0), vocab, DIM));
    Value hidden = b.tanh(b.matmul(embedded, b.constant(gaussian(weights, DIM * DIM, 0.5), DIM, DIM)));
    Value logits = b.matmul(hidden, b.constant(gaussian(weights, DIM * vocab, 1.5), DIM, vocab));
    Value probs = b.reshape(Composites.softmax(b, logits, 1), vocab);
    List<Value> next = b.hostCall(sample, probs);
    return b.build(next.get(0), next.get(1));
  }

  private static int sampleFrom(float[] probs, Random random) {
    double u = random.nextDouble();
    double sum = 0;
    for (int i = 0; i < probs.length; i++) {
      sum += probs[i];
      if (u < sum) {
        return i;
      }
    }
    return probs.length - 1;
  }

  private static float[] gaussian(Random r, int n, double scale) {
    float[] v = new float[n];
    for (int i = 0; i < n; i++) {
      v[i] = (float) (r.nextGaussian() * scale);
    }
    return v;
  }
}
