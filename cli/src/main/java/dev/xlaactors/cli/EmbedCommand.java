package dev.xlaactors.cli;

import com.fasterxml.jackson.core.JsonGenerator;
import dev.xlaactors.lm.EmbeddingModel;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.ModelPackage.Pooling;
import java.io.IOException;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * {@code embed PKG --tokens "5,17,2;9,4" [--json] [--normalize] [--pooling mean|cls]} or {@code --text "a"
 * --text "b"}: one embedding per sequence (padding masked). With {@code --json}: {@code {"embeddings":
 * [[...], ...]}}; otherwise one line per sequence with its first values and its norm.
 */
final class EmbedCommand {
  static final String USAGE = "usage: bin/xla-actors embed PKG (--tokens \"5,17,2;9,4\" | --text \"...\" [--text ...]) [--json] "
      + "[--normalize] [--pooling mean|cls]";

  private EmbedCommand() {}

  static int run(List<String> args, PrintStream out) throws UsageException, IOException {
    CommandLine line = CommandLine.parse("embed", args, Set.of("--tokens", "--text", "--pooling"), Set.of("--json", "--normalize"));
    line.expectPositional(1, 1, "a model package directory");
    boolean byTokens = line.value("--tokens").isPresent();
    if (byTokens == !line.all("--text").isEmpty()) {
      throw new UsageException("embed: give the sequences as --tokens \"5,17,2;9,4\" or as one --text per sequence (one of the two)");
    }
    List<int[]> sequences = byTokens ? CommandLine.tokenLists("embed", "--tokens", line.value("--tokens").get()) : new ArrayList<>();
    String poolingName = line.value("--pooling").orElse(null);
    Pooling pooling = null;
    if (poolingName != null) {
      if (!List.of("mean", "cls").contains(poolingName)) {
        throw new UsageException("embed: --pooling takes mean or cls, got '" + poolingName + "'");
      }
      pooling = Pooling.valueOf(poolingName.toUpperCase(Locale.ROOT));
    }
    ModelPackage pkg = Packages.open("embed", line.positional().get(0));
    try (RuntimeSession session = RuntimeSession.start("embed");
         EmbeddingModel model = EmbeddingModel.load(pkg, session.device(), session.runtime())) {
      for (String text : line.all("--text")) {
        sequences.add(model.encode(text));
      }
      float[][] embeddings = model.embed(sequences, pooling != null ? pooling : model.defaults().pooling(),
          line.flag("--normalize") || model.defaults().normalize());
      if (line.flag("--json")) {
        try (JsonGenerator g = Json.generator(out)) {
          g.writeStartObject();
          g.writeArrayFieldStart("embeddings");
          for (float[] e : embeddings) {
            Json.writeFloats(g, e);
          }
          g.writeEndArray();
          g.writeEndObject();
        }
        out.println();
      } else {
        for (int s = 0; s < embeddings.length; s++) {
          double norm = 0;
          for (float x : embeddings[s]) {
            norm += (double) x * x;
          }
          StringBuilder head = new StringBuilder();
          for (int j = 0; j < Math.min(4, embeddings[s].length); j++) {
            head.append(String.format(Locale.ROOT, "%s%.4f", j == 0 ? "" : ", ", embeddings[s][j]));
          }
          out.printf(Locale.ROOT, "%d: [%s, ...] (%d values, norm %.4f)%n", s, head, embeddings[s].length, Math.sqrt(norm));
        }
      }
    }
    return 0;
  }
}
