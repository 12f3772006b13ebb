package dev.xlaactors.actors.serve;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.actors.serve.GenerationServer.Generate;
import dev.xlaactors.actors.serve.SlotScheduler.Plan;
import dev.xlaactors.actors.serve.SlotScheduler.Sequence;
import dev.xlaactors.error.ExecutionFailedException;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** {@link DecodeRunner} runs a {@link SlotScheduler}'s plans on a plain-Java decoder, on the calling thread. */
class DecodeRunnerTest {

  private static Generate request(String id, int[] prompt, TokenSampler sampler) {
    return new Generate(id, prompt, 10, Set.of(), sampler, null, null);
  }

  @Test
  void decodesTheRunningSlotsThenPrefillsTheAdmittedOnes() {
    StepDecoder decoder = new StepDecoder(2, 16, 4, 32);
    SlotScheduler scheduler = new SlotScheduler(2, 0, 32);
    DecodeRunner runner = new DecodeRunner(decoder, Runnable::run);
    Sequence a = scheduler.enqueue(request("a", new int[] {1, 2}, TokenSampler.greedy()), 0, Long.MAX_VALUE);
    DecodeRunner.Done first = assertInstanceOf(DecodeRunner.Done.class, runner.run(scheduler.plan(0)));
    assertArrayEquals(new int[] {3}, first.admitted(), "the step decoder's next token after 2");
    assertEquals(0, decoder.decodes.get(), "nothing decoded before a slot was filled");
    scheduler.accept(a, true, first.admitted()[0]);
    Sequence b = scheduler.enqueue(request("b", new int[] {7}, TokenSampler.greedy()), 1, Long.MAX_VALUE);
    DecodeRunner.Done second = assertInstanceOf(DecodeRunner.Done.class, runner.run(scheduler.plan(1)));
    assertEquals(4, second.decoded()[a.slot], "a decodes after its token 3");
    assertArrayEquals(new int[] {8}, second.admitted(), "b is prefilled after the step");
    assertEquals(1, decoder.decodes.get());
    assertEquals(2, decoder.prefills.get());
    assertNull(second.decodedErrors()[a.slot]);
    assertEquals(1, b.slot);
  }

  @Test
  void aFailingSamplerFailsOnlyItsOwnRequest() {
    StepDecoder decoder = new StepDecoder(2, 16, 4, 32);
    SlotScheduler scheduler = new SlotScheduler(2, 0, 32);
    scheduler.enqueue(request("bad", new int[] {1}, (logits, offset, vocabulary) -> vocabulary), 0, Long.MAX_VALUE);
    scheduler.enqueue(request("good", new int[] {1}, TokenSampler.greedy()), 0, Long.MAX_VALUE);
    DecodeRunner.Done done = assertInstanceOf(DecodeRunner.Done.class, new DecodeRunner(decoder, Runnable::run).run(scheduler.plan(0)));
    assertInstanceOf(ExecutionFailedException.class, done.admittedErrors()[0]);
    assertTrue(done.admittedErrors()[0].getMessage().contains("outside the vocabulary"), done.admittedErrors()[0].getMessage());
    assertNull(done.admittedErrors()[1]);
    assertEquals(2, done.admitted()[1]);
  }

  @Test
  void aFailingDecoderBreaksTheIterationAndIsReset() {
    AtomicInteger resets = new AtomicInteger();
    SlotDecoder failing = new SlotDecoder() {
      public int slots() { return 1; }
      public int vocabulary() { return 4; }
      public int maxPromptLength() { return 4; }
      public int contextLength() { return 8; }
      public float[] prefill(int slot, int[] prompt) { throw new IllegalStateException("device lost"); }
      public float[] decode(int[] tokens, int[] positions, boolean[] active) { throw new IllegalStateException("device lost"); }
      public void reset() { resets.incrementAndGet(); }
      public void close() {}
    };
    SlotScheduler scheduler = new SlotScheduler(1, 0, 8);
    scheduler.enqueue(request("a", new int[] {1}, TokenSampler.greedy()), 0, Long.MAX_VALUE);
    Plan plan = scheduler.plan(0);
    DecodeRunner.Broken broken = assertInstanceOf(DecodeRunner.Broken.class, new DecodeRunner(failing, Runnable::run).run(plan));
    assertFalse(broken.resetFailed());
    assertNotNull(broken.error());
    assertTrue(broken.error().getMessage().contains("device lost"), broken.error().getMessage());
    assertEquals(1, resets.get());
  }
}
