package dev.xlaactors.lm.sampling;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/** Sampling parameters: validated once, with messages that name the field, the value and the fix. */
class SamplingParamsTest {

  private static String refusal(Supplier<SamplingParams> build) {
    return assertThrows(InvalidArgumentException.class, build::get).getMessage();
  }

  @Test
  void defaultsAndGreedy() {
    SamplingParams defaults = SamplingParams.defaults();
    assertEquals(new SamplingParams(1.0, 0, 1.0, 0.0, null, Set.of(), List.of(), 16, 1.0, 0, List.of()), defaults);
    assertNull(defaults.seed());
    SamplingParams greedy = SamplingParams.greedy();
    assertEquals(0.0, greedy.temperature());
    assertTrue(greedy.isGreedy());
    assertEquals(defaults.withTemperature(0), greedy);
  }

  @Test
  void withersChangeOneField() {
    SamplingParams p = SamplingParams.defaults().withTopK(40).withTopP(0.9).withMinP(0.05).withSeed(7L)
        .withStopTokenIds(Set.of(50256)).withStopStrings(List.of("\n\n")).withMaxTokens(128)
        .withRepetitionPenalty(1.3).withLogprobs(5).withTemperature(0.7);
    assertEquals(new SamplingParams(0.7, 40, 0.9, 0.05, 7L, Set.of(50256), List.of("\n\n"), 128, 1.3, 5, List.of()), p);
  }

  @Test
  void copiesCollectionsAndReadsNullAsNone() {
    Set<Integer> stops = new HashSet<>(Set.of(1, 2));
    SamplingParams p = SamplingParams.defaults().withStopTokenIds(stops);
    stops.add(3);
    assertEquals(Set.of(1, 2), p.stopTokenIds());
    assertThrows(UnsupportedOperationException.class, () -> p.stopTokenIds().add(4));
    assertEquals(Set.of(), SamplingParams.defaults().withStopTokenIds(null).stopTokenIds());
    assertEquals(List.of(), SamplingParams.defaults().withStopStrings(null).stopStrings());
  }

  @Test
  void refusesEachFieldOutOfRangeNamingItAndTheFix() {
    SamplingParams d = SamplingParams.defaults();
    assertEquals("sampling parameter temperature is -0.5, expected 0 or a finite number >= 0.01: use 0 for greedy decoding,"
        + " 1 for the model's own distribution", refusal(() -> d.withTemperature(-0.5)));
    assertTrue(refusal(() -> d.withTemperature(0.001)).contains("temperature is 0.001"));
    assertEquals(0.01, d.withTemperature(0.01).temperature());
    assertTrue(refusal(() -> d.withTemperature(Double.NaN)).contains("temperature is NaN"));
    assertTrue(refusal(() -> d.withTemperature(Double.POSITIVE_INFINITY)).contains("temperature is Infinity"));
    assertEquals("sampling parameter topK is -1, expected an integer >= 0: use 0 to keep every token",
        refusal(() -> d.withTopK(-1)));
    assertTrue(refusal(() -> d.withTopP(0)).contains("topP is 0.0, expected a number in (0, 1]"));
    assertTrue(refusal(() -> d.withTopP(1.5)).contains("topP is 1.5"));
    assertTrue(refusal(() -> d.withMinP(-0.1)).contains("minP is -0.1, expected a number in [0, 1]"));
    assertTrue(refusal(() -> d.withStopTokenIds(Set.of(-3))).contains("stopTokenIds is [-3], expected token ids >= 0"));
    assertTrue(refusal(() -> d.withStopStrings(List.of("ok", ""))).contains("stopStrings is [ok, ], expected non-empty strings"));
    assertTrue(refusal(() -> d.withStopStrings(Arrays.asList("ok", null))).contains("leave out the null"));
    assertTrue(refusal(() -> d.withMaxTokens(0)).contains("maxTokens is 0, expected an integer >= 1"));
    assertTrue(refusal(() -> d.withRepetitionPenalty(0)).contains("repetitionPenalty is 0.0, expected a finite number > 0"));
    assertTrue(refusal(() -> d.withLogprobs(21)).contains("logprobs is 21, expected an integer in [0, 20]"));
    assertTrue(refusal(() -> d.withLogprobs(-1)).contains("logprobs is -1"));
  }
}
