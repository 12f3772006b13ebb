package dev.xlaactors.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.jobs.InferenceJob;
import dev.xlaactors.actors.jobs.JobResult;
import dev.xlaactors.actors.jobs.JobSettings;
import dev.xlaactors.actors.jobs.ResultJournal;
import dev.xlaactors.examples.gpt.GptPackage;
import dev.xlaactors.lm.LanguageModel;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.ModelPackage;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Function;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The perplexity job of {@code examples/run.sh perplexity} over the tiny GPT's package (made by
 * {@code tools/jax_gpt.py package --config tiny}): JAX's score, one line per item, resume after a stop.
 */
class PerplexityTest {
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static XlaClient client;
  private static CallbackRuntime runtime;
  private static GptPackage gpt;
  private static LanguageModel model;

  @BeforeAll
  static void load() throws Exception {
    client = XlaClient.create();
    runtime = CallbackRuntime.create(testKit.system(), client);
    gpt = GptPackage.open(Path.of(PerplexityTest.class.getResource("/gpt-tiny-package/xla-model.json").toURI()).getParent());
    model = LanguageModel.load(ModelPackage.open(gpt.directory()), client.devices().get(0), runtime);
  }

  @AfterAll
  static void close() {
    model.close();
    runtime.close();
    client.close();
    testKit.shutdownTestKit();
  }

  private JobResult run(List<String> lines, Path out, List<String> tokenized) {
    // Lines of the test "text" are token ids separated by spaces, so the reference prompt is JAX's own ids.
    Function<String, int[]> ids = line -> {
      tokenized.add(line);
      return java.util.Arrays.stream(line.trim().split(" +")).mapToInt(Integer::parseInt).toArray();
    };
    JobSettings settings = JobSettings.create(testKit.system());
    ActorRef<InferenceJob.Command> job =
        testKit.spawn(Perplexity.job("ppl", model, Perplexity.work(model, lines, ids, out, settings), settings));
    TestProbe<JobResult> probe = testKit.createTestProbe();
    job.tell(new InferenceJob.Start(probe.getRef()));
    return probe.receiveMessage(java.time.Duration.ofSeconds(60));
  }

  @Test
  void scoresEachLineAsJaxDoesAndResumesWithTheRest(@TempDir Path dir) throws Exception {
    String reference = String.join(" ", java.util.Arrays.stream(gpt.referencePrompt()).mapToObj(Integer::toString).toList());
    List<String> lines = List.of(reference, "7", "1 2 3 4 5 6 7 8 9 10 11 12", "300 301");
    Path out = dir.resolve("ppl.tsv");
    List<String> first = new CopyOnWriteArrayList<>();
    // The first run sees only two lines, as a run killed after two items leaves its file.
    assertInstanceOf(JobResult.Completed.class, run(lines.subList(0, 2), out, first));
    assertEquals(lines.subList(0, 2), first);
    List<String> second = new CopyOnWriteArrayList<>();
    assertInstanceOf(JobResult.Completed.class, run(lines, out, second));
    assertEquals(lines.subList(2, 4), second, "the second run scores only the lines not yet in the file");
    Map<Long, String> result = ResultJournal.read(out);
    assertEquals(4, result.size());
    double expected = Math.exp(gpt.referenceScoreNll());
    assertEquals(expected, Double.parseDouble(result.get(0L)), expected * 1e-4, "JAX's perplexity of the reference prompt");
    assertEquals("n/a", result.get(1L), "one token has nothing to predict");
    assertTrue(Double.parseDouble(result.get(2L)) > 1, result.toString()); // only the first 8 tokens are scored
    List<String> text = new ArrayList<>(Files.readAllLines(out, StandardCharsets.UTF_8));
    assertEquals(4, text.stream().filter(l -> !l.isBlank()).count(), "every item exactly once: " + text);
  }

  @Test
  void theMeanNllOfLanguageModelScoreIsJaxs() {
    int[] prompt = gpt.referencePrompt();
    float[][] rows = model.score(prompt);
    float[] logits = new float[rows.length * model.vocabulary()];
    for (int i = 0; i < rows.length; i++) {
      System.arraycopy(rows[i], 0, logits, i * model.vocabulary(), model.vocabulary());
    }
    assertEquals(gpt.referenceScoreNll(), Perplexity.meanNll(logits, prompt, model.vocabulary()), 1e-4);
  }
}
