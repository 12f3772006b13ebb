package dev.xlaactors.actors.serve;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A {@link SlotDecoder} in plain Java, so the server's scheduling is tested without a model: the logits
 * of a position make token {@code (last token + 1) % vocabulary} the greedy choice. A test can hold every
 * call at {@link #gate} (it signals {@link #entered} first) and reads how many calls were made. One made with
 * {@code keepsFreeRows} says it {@link SlotDecoder#keepsFreeRows keeps free rows} and takes prompt parts; it
 * records each prompt part written as "from+count" in {@link #parts}.
 */
final class StepDecoder implements SlotDecoder {
  private final int slots;
  private final int vocabulary;
  private final int maxPrompt;
  private final int context;
  final AtomicInteger prefills = new AtomicInteger();
  final AtomicInteger decodes = new AtomicInteger();
  final java.util.Queue<String> parts = new java.util.concurrent.ConcurrentLinkedQueue<>();
  private final boolean keepsFreeRows;
  final CountDownLatch closed = new CountDownLatch(1);
  volatile CountDownLatch gate; // null: calls do not wait
  volatile CountDownLatch entered = new CountDownLatch(1);
  /** The names of the threads that made calls, in order. */
  final java.util.Queue<String> threads = new java.util.concurrent.ConcurrentLinkedQueue<>();

  StepDecoder(int slots, int vocabulary, int maxPrompt, int context) {
    this(slots, vocabulary, maxPrompt, context, false);
  }

  StepDecoder(int slots, int vocabulary, int maxPrompt, int context, boolean keepsFreeRows) {
    this.keepsFreeRows = keepsFreeRows;
    this.slots = slots;
    this.vocabulary = vocabulary;
    this.maxPrompt = maxPrompt;
    this.context = context;
  }

  @Override
  public int slots() {
    return slots;
  }

  @Override
  public int vocabulary() {
    return vocabulary;
  }

  @Override
  public int maxPromptLength() {
    return maxPrompt;
  }

  @Override
  public int contextLength() {
    return context;
  }

  @Override
  public boolean keepsFreeRows() {
    return keepsFreeRows;
  }

  @Override
  public float[] prefill(int slot, int[] prompt, int from, int count) {
    if (!keepsFreeRows) {
      return SlotDecoder.super.prefill(slot, prompt, from, count);
    }
    parts.add(from + "+" + count);
    return from + count == prompt.length ? logitsAfter(prompt) : null;
  }

  @Override
  public float[] prefill(int slot, int[] prompt) {
    parts.add("0+" + prompt.length);
    return logitsAfter(prompt);
  }

  private float[] logitsAfter(int[] prompt) {
    hold();
    prefills.incrementAndGet();
    float[] logits = new float[vocabulary];
    logits[(prompt[prompt.length - 1] + 1) % vocabulary] = 1;
    return logits;
  }

  @Override
  public float[] decode(int[] tokens, int[] positions, boolean[] active) {
    hold();
    decodes.incrementAndGet();
    float[] logits = new float[slots * vocabulary];
    for (int s = 0; s < slots; s++) {
      logits[s * vocabulary + (tokens[s] + 1) % vocabulary] = 1;
    }
    return logits;
  }

  private void hold() {
    threads.add(Thread.currentThread().getName());
    entered.countDown();
    CountDownLatch g = gate;
    if (g != null) {
      try {
        if (!g.await(60, TimeUnit.SECONDS)) {
          throw new IllegalStateException("the test never opened the decoder's gate");
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(e);
      }
    }
  }

  @Override
  public void reset() {}

  @Override
  public void close() {
    closed.countDown();
  }
}
