package dev.xlaactors.examples.gpt;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.jobs.BatchScoring;
import dev.xlaactors.actors.jobs.InferenceJob;
import dev.xlaactors.actors.jobs.JobResult;
import dev.xlaactors.actors.jobs.JobSettings;
import dev.xlaactors.actors.jobs.ResultJournal;
import dev.xlaactors.runtime.XlaClient;
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

/** The perplexity batch job on the tiny GPT: JAX's score, one line per item, resume after a stop. */
class PerplexityJobTest {
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static XlaClient client;
  private static GptArtifacts artifacts;
  private static GptModel model;

  @BeforeAll
  static void load() throws Exception {
    client = XlaClient.create();
    artifacts = GptArtifacts.open(Path.of(PerplexityJobTest.class.getResource("/gpt-tiny/model.properties").toURI()).getParent());
    model = GptModel.load(client, artifacts, 1);
  }

  @AfterAll
  static void close() {
    model.close();
    client.close();
    testKit.shutdownTestKit();
  }

  // Lines of the test "text" are token ids separated by spaces (the tiny model's vocabulary is 512 ids).
  private static final Function<String, int[]> IDS =
      line -> java.util.Arrays.stream(line.trim().split(" +")).mapToInt(Integer::parseInt).toArray();

  private JobResult run(List<String> lines, Path out, List<Long> scored) {
    JobSettings settings = JobSettings.create(testKit.system());
    BatchScoring work = PerplexityJob.work(model, lines, IDS, out, settings).withSink((item, outputs) -> scored.add(item));
    ActorRef<InferenceJob.Command> job = testKit.spawn(PerplexityJob.create("ppl", model, work, settings));
    TestProbe<JobResult> probe = testKit.createTestProbe();
    job.tell(new InferenceJob.Start(probe.getRef()));
    return probe.receiveMessage(java.time.Duration.ofSeconds(60));
  }

  @Test
  void scoresEachLineAsJaxDoesAndResumesWithTheRest(@TempDir Path dir) throws Exception {
    String reference = String.join(" ", java.util.Arrays.stream(artifacts.ints("prompt")).mapToObj(Integer::toString).toList());
    List<String> lines = List.of(reference, "7", "1 2 3 4 5 6 7 8 9 10 11 12", "300 301");
    Path out = dir.resolve("ppl.tsv");
    List<Long> first = new CopyOnWriteArrayList<>();
    // The first run sees only two lines, as a run killed after two items leaves its file.
    assertInstanceOf(JobResult.Completed.class, run(lines.subList(0, 2), out, first));
    assertEquals(List.of(0L, 1L), first);
    List<Long> second = new CopyOnWriteArrayList<>();
    assertInstanceOf(JobResult.Completed.class, run(lines, out, second));
    assertEquals(List.of(2L, 3L), second, "the second run scores only the lines not yet in the file");
    Map<Long, String> result = ResultJournal.read(out);
    assertEquals(4, result.size());
    double expected = Math.exp(Double.parseDouble(artifacts.properties().getProperty("score_nll")));
    assertEquals(expected, Double.parseDouble(result.get(0L)), expected * 1e-4, "JAX's perplexity of the reference prompt");
    assertEquals("n/a", result.get(1L), "one token has nothing to predict");
    assertTrue(Double.parseDouble(result.get(2L)) > 1, result.toString()); // only the first 8 tokens are scored
    List<String> text = new ArrayList<>(Files.readAllLines(out, StandardCharsets.UTF_8));
    assertEquals(4, text.stream().filter(l -> !l.isBlank()).count(), "every item exactly once: " + text);
  }
}
