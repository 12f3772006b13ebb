package dev.xlaactors.actors.serve;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.serve.GenerationServer.Generate;
import dev.xlaactors.actors.serve.GenerationServer.Reason;
import dev.xlaactors.actors.serve.SlotScheduler.Plan;
import dev.xlaactors.actors.serve.SlotScheduler.Sequence;
import dev.xlaactors.actors.serve.SlotScheduler.Step;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The iteration-level scheduling of {@link GenerationServer} without an actor system or a decoder: slots,
 * plans, token outcomes and deadlines as plain values.
 */
class SlotSchedulerTest {

  private static Generate request(String id, int promptLength, int maxTokens, Set<Integer> stop) {
    return new Generate(id, new int[promptLength], maxTokens, stop, TokenSampler.greedy(), null, null);
  }

  private static Sequence enqueue(SlotScheduler s, String id) {
    return s.enqueue(request(id, 2, 10, Set.of()), 0, Long.MAX_VALUE);
  }

  @Test
  void waitingRequestsTakeTheLowestFreeSlotsInArrivalOrder() {
    SlotScheduler s = new SlotScheduler(3, 10, 64);
    Sequence a = enqueue(s, "a");
    Sequence b = enqueue(s, "b");
    Plan first = s.plan(0);
    assertEquals(List.of(a, b), first.admitted());
    assertEquals(0, a.slot);
    assertEquals(1, b.slot);
    assertFalse(first.decodes(), "nothing was in a slot yet: only prefills");
    s.accept(a, true, 5);
    s.accept(b, true, 6);
    s.remove(a); // slot 0 is free again
    Sequence c = enqueue(s, "c");
    Sequence d = enqueue(s, "d");
    Plan second = s.plan(1);
    assertEquals(List.of(c, d), second.admitted());
    assertEquals(0, c.slot, "the freed slot first");
    assertEquals(2, d.slot);
    assertArrayEquals(new boolean[] {false, true, false}, second.active(), "only b decodes: c and d are prefilled");
    assertArrayEquals(new int[] {0, 6, 0}, second.tokens());
    assertArrayEquals(new int[] {0, 2, 0}, second.positions(), "b's next position is after its 2-token prompt");
    assertSame(b, second.occupants()[1]);
    assertEquals(3, s.active());
    assertEquals(0, s.waiting());
  }

  @Test
  void aLongPromptGoesInByPartsWhileOthersDecodeAndWholeWhenNothingDoes() {
    SlotScheduler s = new SlotScheduler(2, 10, 64, 4);
    Sequence a = enqueue(s, "a");
    Plan first = s.plan(0);
    assertArrayEquals(new int[] {2}, first.count(), "nothing decodes: a's prompt goes in whole");
    assertTrue(first.endsPrompt(0));
    s.accept(a, true, 5);
    Sequence b = s.enqueue(request("b", 10, 10, Set.of()), 1, Long.MAX_VALUE);
    int[][] parts = {{0, 4}, {4, 4}, {8, 2}};
    for (int i = 0; i < parts.length; i++) {
      Plan p = s.plan(2 + i);
      assertArrayEquals(new boolean[] {true, false}, p.active(), "a decodes in every iteration of b's prompt (" + i + ")");
      assertEquals(List.of(b), p.admitted());
      assertArrayEquals(parts[i], new int[] {p.from()[0], p.count()[0]}, "part " + i + " of b's 10-token prompt");
      assertEquals(i == parts.length - 1, p.endsPrompt(0));
      s.accept(a, false, 6 + i);
    }
    s.accept(b, true, 9);
    Plan both = s.plan(9);
    assertArrayEquals(new boolean[] {true, true}, both.active(), "b decodes once its prompt is written");
    assertArrayEquals(new int[] {5, 10}, both.positions(), "a after 2 prompt tokens and 3 steps, b after its 10");
    assertEquals(List.of(), both.admitted());
  }

  @Test
  void nothingToDoIsNoPlan() {
    SlotScheduler s = new SlotScheduler(2, 0, 64);
    assertNull(s.plan(0));
    Sequence a = enqueue(s, "a");
    s.plan(0);
    s.remove(a);
    assertNull(s.plan(1));
    assertTrue(s.isEmpty());
  }

  @Test
  void maxWaitingCountsBeyondTheFreeSlots() {
    SlotScheduler s = new SlotScheduler(2, 1, 64);
    enqueue(s, "a");
    enqueue(s, "b");
    assertFalse(s.full(), "two wait for two free slots: they get them at the next boundary");
    enqueue(s, "c");
    assertTrue(s.full(), "one more would be the second beyond the free slots (max-waiting 1)");
    s.plan(0); // a and b take the slots, c waits
    assertEquals(0, s.free());
    assertTrue(s.full());
  }

  @Test
  void aTokenIsEmittedUntilTheTokenLimit() {
    SlotScheduler s = new SlotScheduler(1, 0, 64);
    Sequence a = s.enqueue(request("a", 3, 2, Set.of()), 0, Long.MAX_VALUE);
    s.plan(0);
    assertEquals(new Step(true, 0, null), s.accept(a, true, 7));
    assertEquals(3, a.position);
    assertEquals(7, a.lastToken);
    assertEquals(new Step(true, 1, Reason.MAX_TOKENS), s.accept(a, false, 8));
    assertEquals(4, a.position);
    assertEquals(2, a.produced);
  }

  @Test
  void aStopTokenFinishesWithoutBeingEmitted() {
    SlotScheduler s = new SlotScheduler(1, 0, 64);
    Sequence a = s.enqueue(request("a", 1, 10, Set.of(42)), 0, Long.MAX_VALUE);
    s.plan(0);
    s.accept(a, true, 1);
    Step step = s.accept(a, false, 42);
    assertFalse(step.emit());
    assertEquals(Reason.STOP_TOKEN, step.finish());
    assertEquals(1, a.produced, "the stop token is not counted");
  }

  @Test
  void aSequenceThatFillsTheContextFinishes() {
    SlotScheduler s = new SlotScheduler(1, 0, 4);
    Sequence a = s.enqueue(request("a", 3, 10, Set.of()), 0, Long.MAX_VALUE);
    s.plan(0);
    assertEquals(new Step(true, 0, null), s.accept(a, true, 1), "position 3 of 4: room for one more");
    assertEquals(new Step(true, 1, Reason.CONTEXT_FULL), s.accept(a, false, 2));
  }

  @Test
  void deadlinesExpireWaitingAndRunningRequestsAlike() {
    SlotScheduler s = new SlotScheduler(1, 5, 64);
    Sequence running = s.enqueue(request("running", 1, 10, Set.of()), 0, 100);
    s.plan(0);
    Sequence waiting = s.enqueue(request("waiting", 1, 10, Set.of()), 1, 50);
    Sequence none = s.enqueue(request("none", 1, 10, Set.of()), 2, Long.MAX_VALUE);
    assertEquals(List.of(), s.expired(49));
    assertEquals(List.of(waiting), s.expired(50));
    assertEquals(List.of(running, waiting), s.expired(100), "in arrival order; the caller removes them");
    s.remove(waiting);
    s.remove(running);
    assertEquals(List.of(none), s.held());
    assertEquals(List.of(none), s.plan(101).admitted(), "the slot freed by the expired request is taken");
    assertEquals(List.of(), s.expired(Long.MAX_VALUE - 1));
  }

  @Test
  void aRequestEndedWhilePlannedIsNoLongerLive() {
    SlotScheduler s = new SlotScheduler(2, 0, 64);
    Sequence a = enqueue(s, "a");
    Plan plan = s.plan(0);
    s.remove(a); // cancelled while its prefill ran
    assertFalse(s.live(a));
    assertEquals(List.of(a), plan.involved(), "the plan still names it: the server skips it");
    Sequence again = enqueue(s, "a"); // the same id, a new request
    assertTrue(s.live(again));
    assertFalse(s.live(a));
  }

  // ------------------------------------------------------------------------------------------ prompt cache

  private static Sequence enqueue(SlotScheduler s, String id, int... prompt) {
    return s.enqueue(new Generate(id, prompt, 10, Set.of(), TokenSampler.greedy(), null, null), 0, Long.MAX_VALUE);
  }

  /** A scheduler with the prompt cache on: {@code slots} slots, 64 positions, prompts written whole. */
  private static SlotScheduler cached(int slots) {
    return new SlotScheduler(slots, 10, 64, Integer.MAX_VALUE, true);
  }

  /**
   * Runs {@code s}'s next plan as a decoder would (every part and step written), gives each admitted request whose
   * prompt ends its first token {@code first} and each decoding one the token after its last, and returns the plan.
   */
  private static Plan iterate(SlotScheduler s, int first) {
    Plan p = s.plan(0);
    s.written(p);
    for (int i = 0; i < p.admitted().size(); i++) {
      if (p.endsPrompt(i)) {
        s.accept(p.admitted().get(i), true, first);
      }
    }
    for (int slot = 0; slot < p.active().length; slot++) {
      if (p.active()[slot]) {
        s.accept(p.occupants()[slot], false, p.tokens()[slot] + 1);
      }
    }
    return p;
  }

  @Test
  void aRequestTakesTheFreeSlotHoldingTheLongestPrefixOfItsPromptAndPrefillsTheRest() {
    SlotScheduler s = cached(3);
    Sequence a = enqueue(s, "a", 1, 2, 3, 4);
    Sequence b = enqueue(s, "b", 5, 6, 7);
    iterate(s, 9); // a and b prefilled into slots 0 and 1, each gives 9
    iterate(s, -1); // each decodes its 9 and gives 10
    assertArrayEquals(new int[] {1, 2, 3, 4, 9}, s.heldTokens(0), "a's prompt and the token fed back; 10 was never fed back");
    assertArrayEquals(new int[] {5, 6, 7, 9}, s.heldTokens(1));
    s.remove(a);
    s.remove(b);
    Sequence c = enqueue(s, "c", 5, 6, 7, 9, 10, 11); // b's conversation, one turn on
    Sequence d = enqueue(s, "d", 1, 2, 3, 4, 9, 10, 12);
    Plan p = s.plan(1);
    assertEquals(List.of(c, d), p.admitted(), "arrival order");
    assertEquals(List.of(c, d), p.newcomers());
    assertEquals(1, c.slot, "the slot holding 5 6 7 9");
    assertEquals(0, d.slot, "the slot holding 1 2 3 4 9");
    assertArrayEquals(new int[] {4, 5}, p.from(), "each prompt is written after the prefix its slot holds");
    assertArrayEquals(new int[] {2, 2}, p.count());
    assertEquals(4, c.cached);
    assertEquals(5, d.cached);
    assertTrue(p.endsPrompt(0) && p.endsPrompt(1));
    s.written(p);
    assertArrayEquals(new int[] {5, 6, 7, 9, 10, 11}, s.heldTokens(1));
    assertArrayEquals(new int[] {1, 2, 3, 4, 9, 10, 12}, s.heldTokens(0));
  }

  @Test
  void aPromptTheSlotHoldsWholeStillHasItsLastTokenPrefilled() {
    SlotScheduler s = cached(1);
    Sequence a = enqueue(s, "a", 1, 2, 3, 4);
    iterate(s, 9);
    iterate(s, -1);
    s.remove(a);
    Sequence again = enqueue(s, "again", 1, 2, 3, 4);
    Plan p = s.plan(1);
    assertArrayEquals(new int[] {3}, p.from(), "its first token is sampled from the logits of its last position");
    assertArrayEquals(new int[] {1}, p.count());
    assertEquals(3, again.cached);
    assertTrue(p.endsPrompt(0));
    s.written(p);
    assertArrayEquals(new int[] {1, 2, 3, 4}, s.heldTokens(0), "the 9 after the prompt is no longer held: position 4 is the next decode's");
    Sequence single = enqueue(s, "single", 1);
    s.remove(again);
    Plan one = s.plan(2);
    assertArrayEquals(new int[] {0, 1}, new int[] {one.from()[0], one.count()[0]}, "a prompt of one token is always prefilled");
    assertEquals(0, single.cached);
  }

  @Test
  void withoutAPrefixOfMoreThanHalfThePromptTheLeastRecentlyReleasedSlotIsTaken() {
    SlotScheduler s = cached(3);
    // Every prompt starts with the same token (a BOS): a one-token prefix is held by every row.
    Sequence a = enqueue(s, "a", 1, 10, 11);
    Sequence b = enqueue(s, "b", 1, 20, 21);
    iterate(s, 9);
    Sequence c = enqueue(s, "c", 1, 30);
    s.remove(b); // released first: the least recently used
    s.remove(a);
    Plan p = s.plan(1);
    assertEquals(2, c.slot, "an empty row holds nothing worth keeping: taken before any used one");
    s.written(p);
    Sequence x = enqueue(s, "x", 1, 40, 41);
    Sequence y = enqueue(s, "y", 1, 50, 51);
    Plan q = s.plan(2);
    assertEquals(1, x.slot, "b's row, released before a's; both share only x's first token");
    assertEquals(0, y.slot);
    assertArrayEquals(new int[] {1, 1}, q.from(), "the shared first token is not prefilled again");
  }

  @Test
  void admissionStaysInArrivalOrderWhateverTheRowsHold() {
    SlotScheduler s = cached(2);
    Sequence a = enqueue(s, "a", 1, 2, 3);
    Sequence running = enqueue(s, "running", 7);
    iterate(s, 9);
    s.remove(a); // slot 0 holds 1 2 3; slot 1 is busy
    Sequence first = enqueue(s, "first", 8, 8);
    Sequence matching = enqueue(s, "matching", 1, 2, 3, 4);
    Plan p = s.plan(1);
    assertEquals(List.of(first), p.admitted(), "the one free slot goes to the request that came first");
    assertEquals(0, first.slot);
    assertEquals(-1, matching.slot);
    assertEquals(1, s.waiting());
    assertSame(running, p.occupants()[1]);
  }

  @Test
  void theCacheIsForgottenWhenTheDecoderIsReset() {
    SlotScheduler s = cached(2);
    Sequence a = enqueue(s, "a", 1, 2, 3);
    iterate(s, 9);
    s.remove(a);
    s.decoderReset(); // a later step failed: the decoder's cache is a fresh one
    assertArrayEquals(new int[0], s.heldTokens(0));
    Sequence again = enqueue(s, "again", 1, 2, 3);
    Plan p = s.plan(1);
    assertEquals(0, again.slot, "no row holds anything: the lowest slot");
    assertArrayEquals(new int[] {0, 3}, new int[] {p.from()[0], p.count()[0]}, "the whole prompt is prefilled again");
  }

  @Test
  void onlyTheTokensAPlanWroteAreHeld() {
    SlotScheduler two = new SlotScheduler(2, 10, 64, 2, true);
    Sequence x = enqueue(two, "x", 1);
    iterate(two, 2); // x decodes from now on, so y's prompt goes in by parts of 2
    Sequence y = enqueue(two, "y", 4, 5, 6, 7, 8);
    Plan part = iterate(two, 0);
    assertArrayEquals(new int[] {0, 2}, new int[] {part.from()[0], part.count()[0]});
    two.remove(y); // cancelled after its first part
    assertArrayEquals(new int[] {4, 5}, two.heldTokens(1), "only the part written: a chunk's padding past it holds nothing known");
    Sequence z = enqueue(two, "z", 4, 5, 6, 9);
    Plan next = two.plan(1);
    assertEquals(1, z.slot);
    assertArrayEquals(new int[] {2, 2}, new int[] {next.from()[0], next.count()[0]});
    assertEquals(2, z.cached);
    assertSame(x, next.occupants()[0]);
  }

  @Test
  void withoutThePromptCacheEveryPromptIsWrittenWholeIntoTheLowestFreeSlot() {
    SlotScheduler s = new SlotScheduler(2, 10, 64, Integer.MAX_VALUE, false);
    Sequence a = enqueue(s, "a", 1, 2, 3);
    Sequence b = enqueue(s, "b", 4, 5);
    iterate(s, 9);
    s.remove(b);
    s.remove(a);
    Sequence again = enqueue(s, "again", 4, 5, 6);
    Plan p = s.plan(1);
    assertEquals(0, again.slot, "the lowest free slot, not b's");
    assertArrayEquals(new int[] {0, 3}, new int[] {p.from()[0], p.count()[0]});
    assertEquals(0, again.cached);
    assertFalse(s.cachesPrompts());
    assertArrayEquals(new int[0], s.heldTokens(1));
  }
}
