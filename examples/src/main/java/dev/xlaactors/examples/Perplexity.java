package dev.xlaactors.examples;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.jobs.BatchScoring;
import dev.xlaactors.actors.jobs.FatalJobException;
import dev.xlaactors.actors.jobs.InferenceJob;
import dev.xlaactors.actors.jobs.JobResult;
import dev.xlaactors.actors.jobs.JobSettings;
import dev.xlaactors.actors.jobs.JobWork;
import dev.xlaactors.actors.jobs.ResultJournal;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.examples.gpt.GptPackage;
import dev.xlaactors.lm.LanguageModel;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.Role;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Behavior;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * Perplexity of every line of a text file under the 124 M GPT of {@code examples/run.sh generate}, as a
 * supervised, resumable batch job over the model package: item {@code i} is line {@code i}, tokenized by
 * the package's tokenizer, run through its {@code score} program (the logits at every position; the
 * weights bound on the device once, for every item), and written as one output line
 * ({@code <line index>\t<perplexity>}). Kill it and run the same command again: it resumes with the lines
 * not yet in the output file ({@link BatchScoring}'s journal).
 *
 * <p>Usage: {@code examples/run.sh perplexity <text-file> [output.tsv]} (default output
 * {@code examples/target/perplexity.tsv}). Lines longer than the score program (128 tokens) are scored on
 * their first 128.
 */
public final class Perplexity {
  private static final String USAGE = "usage: examples/run.sh perplexity <text-file> [output.tsv]";

  private Perplexity() {}

  public static void main(String[] args) throws Exception {
    if (args.length < 1 || args.length > 2 || !Files.isRegularFile(Path.of(args[0]))) {
      System.err.println(args.length < 1 ? "no text file given" : args.length > 2 ? "too many arguments"
          : "not a readable file: " + args[0]);
      System.err.println(USAGE);
      System.exit(2);
      return;
    }
    List<String> lines = Files.readAllLines(Path.of(args[0]), StandardCharsets.UTF_8);
    Path output = Path.of(args.length > 1 ? args[1] : "examples/target/perplexity.tsv");
    long already;
    try {
      already = ResultJournal.read(output).keySet().stream().filter(i -> i < lines.size()).count();
    } catch (FatalJobException e) {
      System.err.println(e.getMessage());
      System.exit(1);
      return;
    }
    System.out.printf("%d lines, %d already in %s%n", lines.size(), already, output.toAbsolutePath());
    GptPackage gpt = GptPackage.ensure(Path.of("").toAbsolutePath(), "gpt2-124m", System.err);
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "perplexity");
    int status = 0;
    try (XlaClient client = XlaClient.create();
        CallbackRuntime runtime = CallbackRuntime.create(system, client);
        LanguageModel model = LanguageModel.load(ModelPackage.open(gpt.directory()), client.devices().get(0), runtime)) {
      JobSettings settings = JobSettings.create(system);
      JobWork work = work(model, lines, model::encode, output, settings);
      ActorRef<InferenceJob.Command> job = system.systemActorOf(job("perplexity", model, work, settings), "perplexity", Props.empty());
      JobResult result = AskPattern.<InferenceJob.Command, JobResult>ask(job, InferenceJob.Start::new, Duration.ofDays(1),
          system.scheduler()).toCompletableFuture().get();
      System.out.println("result: " + result);
      status = result instanceof JobResult.Completed ? 0 : 1;
    } finally {
      system.terminate();
      system.getWhenTerminated().toCompletableFuture().get(10, TimeUnit.SECONDS);
    }
    System.exit(status);
  }

  /** The job running {@code work} on the score program of {@code model}'s package (lent: close the model after the job). */
  static Behavior<InferenceJob.Command> job(String name, LanguageModel model, JobWork work, JobSettings settings) {
    return InferenceJob.create(name, model.loaded(), Role.SCORE, model.loaded().models(Role.SCORE).firstKey(), model.runtime(), work,
        settings);
  }

  /**
   * The work: {@code lines} tokenized by {@code tokenize} (the first {@link LanguageModel#maxScoreLength()}
   * tokens of each), each line's perplexity ({@code exp} of the mean negative log-likelihood of its tokens
   * after the first, from the score program's logits) written to {@code output}; "n/a" for a line of fewer
   * than two tokens.
   */
  static JobWork work(LanguageModel model, List<String> lines, Function<String, int[]> tokenize, Path output, JobSettings settings) {
    return new LinePerplexities(model, List.copyOf(lines), tokenize, output, settings);
  }

  /** Mean negative log-likelihood of {@code tokens[1..]}, each given those before it; {@code logits} row-major [T][vocab]. */
  static double meanNll(float[] logits, int[] tokens, int vocab) {
    double sum = 0;
    for (int i = 0; i + 1 < tokens.length; i++) {
      int row = i * vocab;
      double max = Double.NEGATIVE_INFINITY;
      for (int v = 0; v < vocab; v++) {
        max = Math.max(max, logits[row + v]);
      }
      double z = 0;
      for (int v = 0; v < vocab; v++) {
        z += Math.exp(logits[row + v] - max);
      }
      sum += max + Math.log(z) - logits[row + tokens[i + 1]];
    }
    return tokens.length < 2 ? Double.NaN : sum / (tokens.length - 1);
  }

  /**
   * Line perplexities over a {@link BatchScoring} (which keeps the resumable output file): the score
   * program's logits of an item become its perplexity here, where the item's tokens are known.
   */
  private static final class LinePerplexities implements JobWork {
    private final BatchScoring journal;
    private final Map<Long, int[]> tokensInFlight = new HashMap<>(); // input(item) to accept(item)
    private final List<String> lines;
    private final Function<String, int[]> tokenize;
    private final int length;
    private final int vocab;

    LinePerplexities(LanguageModel model, List<String> lines, Function<String, int[]> tokenize, Path output, JobSettings settings) {
      this.lines = lines;
      this.tokenize = tokenize;
      this.length = model.maxScoreLength(); // refuses a package without the score program now, not in the first item
      this.vocab = model.vocabulary();
      this.journal = BatchScoring.create(lines.size(), item -> {
        throw new IllegalStateException("inputs come from LinePerplexities"); // never asked: input() below answers
      }, output, settings).withFormat(out -> {
        double nll = out.get(0).toDoubleArray()[0];
        return Double.isNaN(nll) ? "n/a" : String.format(Locale.ROOT, "%.4f", Math.exp(nll));
      });
    }

    @Override
    public Plan open() throws Exception {
      return journal.open();
    }

    @Override
    public OptionalLong next(long previous) {
      return journal.next(previous);
    }

    @Override
    public List<HostTensor> input(long item) {
      String line = lines.get((int) item);
      int[] all = line.isEmpty() ? new int[0] : tokenize.apply(line);
      int[] tokens = java.util.Arrays.copyOf(all, Math.min(all.length, length));
      for (int i = 0; i < tokens.length; i++) {
        if (tokens[i] < 0 || tokens[i] >= vocab) {
          throw new InvalidArgumentException("line " + item + ": token " + tokens[i] + " is outside the model's vocabulary 0.." + (vocab - 1));
        }
      }
      tokensInFlight.put(item, tokens);
      int[] padded = java.util.Arrays.copyOf(tokens, length); // the score program's fixed length; padding is never read
      return List.of(HostTensor.ofInts(padded, 1, length));
    }

    @Override
    public boolean accept(long item, List<HostTensor> outputs) throws Exception {
      int[] tokens = tokensInFlight.remove(item);
      double nll = meanNll(outputs.get(0).toFloatArray(), tokens, vocab);
      return journal.accept(item, List.of(HostTensor.ofDoubles(new double[] {nll}, 1)));
    }

    @Override
    public void close() throws Exception {
      journal.close();
    }
  }
}
