package dev.xlaactors.examples.gpt;

import dev.xlaactors.actors.jobs.BatchScoring;
import dev.xlaactors.actors.jobs.InferenceJob;
import dev.xlaactors.actors.jobs.JobSettings;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.runtime.HostTensor;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.function.Function;
import org.apache.pekko.actor.typed.Behavior;

/**
 * Perplexity of each line of a text as a supervised, resumable {@link InferenceJob}: item {@code i} is
 * line {@code i}, tokenized and cut to the model's prefill length, scored by the model's scoring program
 * (weights bound on the device once, for every item) into one line of the output file. Run it again
 * after a kill and it scores only the lines not yet in the file ({@link BatchScoring}).
 */
public final class PerplexityJob {
  private PerplexityJob() {}

  /**
   * The work: {@code lines} tokenized by {@code tokenize}, each line's perplexity ({@code exp} of the mean
   * negative log-likelihood of its tokens after the first) written to {@code output}; "n/a" for a line of
   * fewer than two tokens.
   */
  public static BatchScoring work(GptModel model, List<String> lines, Function<String, int[]> tokenize, Path output,
      JobSettings settings) {
    int t = model.artifacts().prefillLength();
    int vocab = model.vocab();
    List<String> copy = List.copyOf(lines);
    model.scoreModel(); // refuses a model without the scoring program now, not in the first item
    return BatchScoring.create(copy.size(), item -> {
      String line = copy.get((int) item);
      int[] tokens = line.isEmpty() ? new int[0] : tokenize.apply(line);
      int n = Math.min(tokens.length, t);
      int[] padded = new int[t];
      for (int i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= vocab) {
          throw new InvalidArgumentException("line " + item + ": token " + tokens[i] + " is outside the model's vocabulary 0.." + (vocab - 1));
        }
        padded[i] = tokens[i];
      }
      // length 1 scores nothing: the program divides 0 by 0 and the line reads n/a.
      return List.of(HostTensor.ofInts(padded, 1, t), HostTensor.scalar(Math.max(n, 1)));
    }, output, settings).withFormat(PerplexityJob::format);
  }

  /** The job running {@code work} on {@code model}'s scoring program; the model stays the caller's. */
  public static Behavior<InferenceJob.Command> create(String name, GptModel model, BatchScoring work, JobSettings settings) {
    return InferenceJob.create(name, model.scoreModel(), null, work, settings);
  }

  private static String format(List<HostTensor> outputs) {
    float nll = outputs.get(0).toFloatArray()[0];
    return Float.isNaN(nll) ? "n/a" : String.format(Locale.ROOT, "%.4f", Math.exp(nll));
  }
}
