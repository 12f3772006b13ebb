package dev.xlaactors.lm.text;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** Stop strings matched across the pieces a stream arrives in. */
class StopStringMatcherTest {

  private static StopStringMatcher.Output out(String text) {
    return new StopStringMatcher.Output(text, Optional.empty());
  }

  private static StopStringMatcher.Output stop(String text, String stop) {
    return new StopStringMatcher.Output(text, Optional.of(stop));
  }

  @Test
  void matchesAStopStringSplitOverPieces() {
    StopStringMatcher matcher = new StopStringMatcher(List.of("###"));
    assertEquals(out("Answer: 4"), matcher.append("Answer: 4"));
    assertEquals(out(" "), matcher.append(" #"));
    assertEquals(stop("", "###"), matcher.append("## more"));
    assertTrue(matcher.stopped());
    assertEquals("", matcher.finish());
    assertThrows(IllegalStateException.class, () -> matcher.append("x"));
  }

  @Test
  void releasesHeldTextWhenItTurnsOutNotToBeAStop() {
    StopStringMatcher matcher = new StopStringMatcher(List.of("\n\nUser:"));
    assertEquals(out("line"), matcher.append("line\n"));
    assertEquals(out(""), matcher.append("\nUs"));
    assertEquals(out("\n\nUsage"), matcher.append("age"));
    assertEquals(out("!"), matcher.append("!"));
    assertFalse(matcher.stopped());
  }

  @Test
  void returnsTheTextBeforeTheStopInsideOnePiece() {
    StopStringMatcher matcher = new StopStringMatcher(List.of("END"));
    assertEquals(stop("the ", "END"), matcher.append("the END of it"));
  }

  @Test
  void theEarliestStopWinsThenTheFirstListed() {
    assertEquals(stop("a ", "bb"), new StopStringMatcher(List.of("cc", "bb")).append("a bb cc"));
    assertEquals(stop("a ", "b"), new StopStringMatcher(List.of("b", "bb")).append("a bb"));
    assertEquals(stop("a ", "bb"), new StopStringMatcher(List.of("bb", "b")).append("a bb"));
  }

  @Test
  void holdsTheLongestTailThatCouldStartAStop() {
    StopStringMatcher matcher = new StopStringMatcher(List.of("abcd", "cx"));
    assertEquals(out("zz"), matcher.append("zzabc"));
    assertEquals(stop("ab", "cx"), matcher.append("x"));
  }

  @Test
  void finishReturnsTheHeldTailWhenTheStreamEnds() {
    StopStringMatcher matcher = new StopStringMatcher(List.of("</s>"));
    assertEquals(out("done"), matcher.append("done</"));
    assertEquals("</", matcher.finish());
  }

  @Test
  void withoutStopStringsEverythingPassesAtOnce() {
    StopStringMatcher matcher = new StopStringMatcher(List.of());
    assertEquals(out("all of it"), matcher.append("all of it"));
    assertEquals("", matcher.finish());
  }

  @Test
  void matchesStopStringsOutsideTheBasicPlane() {
    StopStringMatcher matcher = new StopStringMatcher(List.of("🛑"));
    assertEquals(out("go go "), matcher.append("go go "));
    assertEquals(stop("", "🛑"), matcher.append("🛑 after"));
  }

  @Test
  void refusesEmptyOrNullStopStrings() {
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> new StopStringMatcher(List.of("ok", "")));
    assertTrue(e.getMessage().contains("stop string 1 is empty"), e.getMessage());
    assertThrows(InvalidArgumentException.class, () -> new StopStringMatcher(null));
  }

  @Test
  void cutsADetokenizedStreamAtAStopSplitAcrossTokens() {
    Tokenizer gpt2 = TiktokenTokenizer.of("r50k_base");
    int[] ids = gpt2.encode("Q: 你好 👋🏽?\nA: hi<END> and more");
    IncrementalDetokenizer detokenizer = IncrementalDetokenizer.create(gpt2);
    StopStringMatcher matcher = new StopStringMatcher(List.of("<END>"));
    StringBuilder emitted = new StringBuilder();
    int consumed = 0;
    for (int id : ids) {
      consumed++;
      StopStringMatcher.Output out = matcher.append(detokenizer.next(id));
      emitted.append(out.text());
      assertFalse(out.text().contains("<"), "the start of the stop string was held back, not emitted");
      if (out.stopped()) {
        break;
      }
    }
    assertTrue(matcher.stopped());
    assertTrue(consumed < ids.length, "stopped before the end of the tokens");
    assertEquals("Q: 你好 👋🏽?\nA: hi", emitted.toString());
  }
}
