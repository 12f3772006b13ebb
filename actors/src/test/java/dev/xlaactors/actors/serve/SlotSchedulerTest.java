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
}
