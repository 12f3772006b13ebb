package dev.xlaactors.examples;

import dev.xlaactors.actors.jobs.BatchScoring;
import dev.xlaactors.actors.jobs.FatalJobException;
import dev.xlaactors.actors.jobs.InferenceJob;
import dev.xlaactors.actors.jobs.JobResult;
import dev.xlaactors.actors.jobs.JobSettings;
import dev.xlaactors.actors.jobs.ResultJournal;
import dev.xlaactors.examples.gpt.GptArtifacts;
import dev.xlaactors.examples.gpt.GptModel;
import dev.xlaactors.examples.gpt.GptTokenizer;
import dev.xlaactors.examples.gpt.PerplexityJob;
import dev.xlaactors.runtime.XlaClient;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * Perplexity of every line of a text file under the 124 M GPT of {@code examples/run.sh generate}, as a
 * supervised batch job: one output line per input line ({@code <line index>\t<perplexity>}). Kill it and
 * run the same command again: it resumes with the lines not yet in the output file.
 *
 * <p>Usage: {@code examples/run.sh perplexity <text-file> [output.tsv]} (default output
 * {@code examples/target/perplexity.tsv}). Lines longer than 128 tokens are scored on their first 128.
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
    GptArtifacts artifacts = GptArtifacts.ensure(Path.of("").toAbsolutePath(), "gpt2-124m", System.err);
    GptTokenizer tokenizer = new GptTokenizer();
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "perplexity");
    int status = 0;
    try (XlaClient client = XlaClient.create(); GptModel model = GptModel.load(client, artifacts, 1)) {
      JobSettings settings = JobSettings.create(system);
      BatchScoring work = PerplexityJob.work(model, lines, tokenizer::encode, output, settings);
      ActorRef<InferenceJob.Command> job =
          system.systemActorOf(PerplexityJob.create("perplexity", model, work, settings), "perplexity", Props.empty());
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
}
