package dev.xlaactors.cli;

import com.fasterxml.jackson.core.JsonGenerator;
import dev.xlaactors.lm.LanguageModel;
import dev.xlaactors.runtime.model.ModelPackage;
import java.io.IOException;
import java.io.PrintStream;
import java.util.List;
import java.util.Set;

/**
 * {@code score PKG --tokens 5,17,2 [--json]} or {@code score PKG --text "..."}: the logits at every
 * position of a sequence (the parity check against a reference implementation). With {@code --json}:
 * {@code {"input_ids": [...], "logits": [[...], ...]}}; otherwise, per position, the token and the five
 * most likely next tokens.
 */
final class ScoreCommand {
  static final String USAGE = "usage: bin/xla-actors score PKG (--tokens 5,17,2 | --text \"...\") [--json]";

  private ScoreCommand() {}

  static int run(List<String> args, PrintStream out) throws UsageException, IOException {
    CommandLine line = CommandLine.parse("score", args, Set.of("--tokens", "--text"), Set.of("--json"));
    line.expectPositional(1, 1, "a model package directory");
    ModelPackage pkg = Packages.open("score", line.positional().get(0));
    if (line.value("--tokens").isPresent() == line.value("--text").isPresent()) {
      throw new UsageException("score: give the sequence as --tokens 5,17,2 or as --text \"...\" (one of the two)");
    }
    try (RuntimeSession session = RuntimeSession.start("score");
         LanguageModel lm = LanguageModel.load(pkg, session.device(), session.runtime(), LanguageModel.Use.SCORING)) {
      int[] ids;
      if (line.value("--tokens").isPresent()) {
        List<int[]> lists = CommandLine.tokenLists("score", "--tokens", line.value("--tokens").get());
        if (lists.size() != 1) {
          throw new UsageException("score: --tokens takes one sequence, got " + lists.size() + " (separated by ';')");
        }
        ids = lists.get(0);
      } else {
        ids = lm.encode(line.value("--text").get());
      }
      float[][] logits = lm.score(ids);
      if (line.flag("--json")) {
        try (JsonGenerator g = Json.generator(out)) {
          g.writeStartObject();
          g.writeArrayFieldStart("input_ids");
          for (int id : ids) {
            g.writeNumber(id);
          }
          g.writeEndArray();
          g.writeArrayFieldStart("logits");
          for (float[] row : logits) {
            Json.writeFloats(g, row);
          }
          g.writeEndArray();
          g.writeEndObject();
        }
        out.println();
      } else {
        for (int i = 0; i < ids.length; i++) {
          out.printf("%4d  token %-7d next: %s%n", i, ids[i], top(logits[i], 5));
        }
      }
    }
    return 0;
  }

  private static String top(float[] row, int k) {
    StringBuilder s = new StringBuilder();
    boolean[] taken = new boolean[row.length];
    for (int n = 0; n < Math.min(k, row.length); n++) {
      int best = -1;
      for (int i = 0; i < row.length; i++) {
        if (!taken[i] && (best < 0 || row[i] > row[best])) {
          best = i;
        }
      }
      taken[best] = true;
      s.append(n == 0 ? "" : ", ").append(best).append(String.format(" (%.3f)", row[best]));
    }
    return s.toString();
  }
}
