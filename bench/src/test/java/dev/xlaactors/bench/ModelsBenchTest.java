package dev.xlaactors.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The prompt length ModelsBench prefills before its decode steps (bench/run.sh models and llamacpp). */
class ModelsBenchTest {
  @Test
  void asksForTheGivenLengthWhenThePackageTakesIt() {
    // A package that prefills by chunks takes prompts up to its context: 128 asked, 128 run.
    assertEquals(128, ModelsBench.promptLength(128, 1024, 1024, 32));
  }

  @Test
  void isCappedByTheLongestPromptAndByRoomForTheDecodeSteps() {
    // A one-program package of 128-token prompts: its length, whatever is asked (the models mode asks for all).
    assertEquals(128, ModelsBench.promptLength(Integer.MAX_VALUE, 128, 1024, 32));
    // A chunked package asked for everything: its context less the 32 steps that follow, not the whole context.
    assertEquals(992, ModelsBench.promptLength(Integer.MAX_VALUE, 1024, 1024, 32));
  }

  @Test
  void refusesAContextWithNoRoomForAPrompt() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> ModelsBench.promptLength(128, 64, 32, 32));
    assertTrue(e.getMessage().contains("32 positions") && e.getMessage().contains("32 decode steps"), e.getMessage());
  }
}
