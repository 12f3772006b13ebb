package dev.xlaactors.http;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The rule that names a model's tensors for the Open Inference Protocol after the export's paths. */
class OpenInferenceNamesTest {
  @Test
  void inputsArePlainNamesOrPositionalArguments() {
    assertEquals(List.of("x", "k"), OpenInferenceNames.inputs(List.of("x", "k")));
    assertEquals(List.of("input_1", "input_2"), OpenInferenceNames.inputs(List.of("[1]", "[2]")));
    assertEquals(List.of("input_1.0", "input_1.1", "mask", "tokens"), OpenInferenceNames.inputs(List.of("[1][0]", "[1][1]", "['mask']", "tokens")));
  }

  @Test
  void outputsFollowTheResultTree() {
    assertEquals(List.of("output_0"), OpenInferenceNames.outputs(List.of(""), 1)); // one array returned
    assertEquals(List.of("output_0", "output_1"), OpenInferenceNames.outputs(List.of("[0]", "[1]"), 2)); // a tuple
    assertEquals(List.of("logits", "cache.k"), OpenInferenceNames.outputs(List.of("['logits']", "['cache']['k']"), 2)); // dicts
    assertEquals(List.of("output_0.y", "a.1", "it's"), OpenInferenceNames.outputs(List.of("[0]['y']", "['a'][1]", "['it\\'s']"), 3));
    assertEquals(List.of("output_0", "output_1"), OpenInferenceNames.outputs(List.of(), 2)); // paths not known
  }

  @Test
  void unparsedPathsAndClashesKeepThePath() {
    assertEquals(List.of("[1]<odd>"), OpenInferenceNames.inputs(List.of("[1]<odd>")));
    assertEquals(List.of("['\\n']"), OpenInferenceNames.outputs(List.of("['\\n']"), 1)); // an escape other than quotes
    // ['output_0'] and [0] both read output_0: each keeps its path.
    assertEquals(List.of("['output_0']", "[0]"), OpenInferenceNames.outputs(List.of("['output_0']", "[0]"), 2));
    // ... and where even the paths clash, the position names them.
    assertEquals(List.of("input_0", "input_1"), OpenInferenceNames.inputs(List.of("a", "a")));
  }
}
