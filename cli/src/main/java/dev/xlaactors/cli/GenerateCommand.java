package dev.xlaactors.cli;

import com.fasterxml.jackson.core.JsonGenerator;
import dev.xlaactors.actors.serve.GenerationServer;
import dev.xlaactors.lm.LanguageModel;
import dev.xlaactors.lm.TextGenerator;
import dev.xlaactors.lm.sampling.SamplingParams;
import dev.xlaactors.runtime.model.ModelPackage;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.io.PrintStream;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.CompletionException;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.Props;

/**
 * {@code generate PKG "prompt" [sampling options]}: text generated after a prompt, printed as it comes. The
 * model runs behind a generation server, as when it is served; the sampling options start from the
 * package's generation defaults. With {@code --json}: {@code {"prompt_ids", "tokens", "text",
 * "finish_reason"}} once it is done.
 */
final class GenerateCommand {
  static final String USAGE = "usage: bin/xla-actors generate PKG (\"prompt\" | --tokens 5,17,2) [--max-tokens N] [--temperature T] "
      + "[--top-k K] [--top-p P] [--min-p P] [--seed S] [--stop TEXT]... [--repetition-penalty R] [--ignore-eos] [--json]";

  /** Tokens generated when neither the command line nor the package says. */
  static final int DEFAULT_MAX_TOKENS = 64;

  private GenerateCommand() {}

  static int run(List<String> args, PrintStream out, PrintStream err) throws UsageException, IOException {
    CommandLine line = CommandLine.parse("generate", args, Set.of("--tokens", "--max-tokens", "--temperature", "--top-k", "--top-p",
        "--min-p", "--seed", "--stop", "--repetition-penalty"), Set.of("--ignore-eos", "--json"));
    line.expectPositional(1, 2, "a model package directory and a prompt");
    boolean byTokens = line.value("--tokens").isPresent();
    if (byTokens == (line.positional().size() == 2)) {
      throw new UsageException("generate: give the prompt as text after the package, or as --tokens 5,17,2 (one of the two)");
    }
    int[] promptIds = null;
    if (byTokens) {
      List<int[]> lists = CommandLine.tokenLists("generate", "--tokens", line.value("--tokens").get());
      if (lists.size() != 1) {
        throw new UsageException("generate: --tokens takes one prompt, got " + lists.size() + " (separated by ';')");
      }
      promptIds = lists.get(0);
    }
    ModelPackage pkg = Packages.open("generate", line.positional().get(0));
    SamplingParams params = options(line, pkg);
    try (RuntimeSession session = RuntimeSession.start("generate")) {
      LanguageModel lm = session.own(LanguageModel.load(pkg, session.device(), session.runtime(), LanguageModel.Use.GENERATION));
      int[] prompt = promptIds != null ? promptIds : lm.encode(line.positional().get(1));
      ActorRef<GenerationServer.Command> server = session.system().systemActorOf(
          GenerationServer.create(pkg.name(), lm.decoder(lm.slotCounts().get(0)), new SimpleMeterRegistry()), "generate", Props.empty());
      boolean json = line.flag("--json");
      long started = System.nanoTime();
      TextGenerator.Result result;
      try {
        result = new TextGenerator(lm, server, session.system()).generate(prompt, params, null, piece -> {
          if (!json) {
            out.print(piece.text());
            out.flush();
          }
        }).toCompletableFuture().join();
      } catch (CompletionException e) {
        throw e.getCause() instanceof RuntimeException r ? r : e;
      }
      double seconds = (System.nanoTime() - started) / 1e9;
      if (json) {
        try (JsonGenerator g = Json.generator(out)) {
          g.writeStartObject();
          g.writeFieldName("prompt_ids");
          g.writeArray(result.promptTokens(), 0, result.promptTokens().length);
          g.writeFieldName("tokens");
          g.writeArray(result.tokens(), 0, result.tokens().length);
          g.writeStringField("text", result.text());
          g.writeStringField("finish_reason", result.finishReason().name().toLowerCase(Locale.ROOT));
          g.writeEndObject();
        }
      }
      out.println();
      err.printf(Locale.ROOT, "%d tokens after a %d-token prompt in %.2f s (%.1f tokens/s), finished: %s%n", result.tokens().length,
          prompt.length, seconds, result.tokens().length / seconds, result.finishReason().name().toLowerCase(Locale.ROOT));
    }
    return 0;
  }

  /** The package's defaults with the command line's sampling options over them. */
  private static SamplingParams options(CommandLine line, ModelPackage pkg) throws UsageException {
    SamplingParams p = LanguageModel.samplingDefaults(pkg);
    int maxTokens = pkg.generation().maxTokens() != null ? pkg.generation().maxTokens() : DEFAULT_MAX_TOKENS;
    try {
      p = p.withMaxTokens(line.integer("--max-tokens", maxTokens, 1, Integer.MAX_VALUE))
          .withTemperature(line.number("--temperature", p.temperature(), 0, Double.MAX_VALUE))
          .withTopK(line.integer("--top-k", p.topK(), 0, Integer.MAX_VALUE))
          .withTopP(line.number("--top-p", p.topP(), Double.MIN_VALUE, 1))
          .withMinP(line.number("--min-p", p.minP(), 0, 1))
          .withRepetitionPenalty(line.number("--repetition-penalty", p.repetitionPenalty(), Double.MIN_VALUE, Double.MAX_VALUE));
    } catch (dev.xlaactors.error.InvalidArgumentException e) {
      throw new UsageException("generate: " + e.getMessage());
    }
    if (line.value("--seed").isPresent()) {
      try {
        p = p.withSeed(Long.parseLong(line.value("--seed").get().trim()));
      } catch (NumberFormatException e) {
        throw new UsageException("generate: --seed takes a whole number, got '" + line.value("--seed").get() + "'");
      }
    }
    if (!line.all("--stop").isEmpty()) {
      if (line.all("--stop").stream().anyMatch(String::isEmpty)) {
        throw new UsageException("generate: --stop takes a non-empty text");
      }
      p = p.withStopStrings(line.all("--stop"));
    }
    if (line.flag("--ignore-eos")) {
      p = p.withStopTokenIds(Set.of());
    }
    return p;
  }
}
