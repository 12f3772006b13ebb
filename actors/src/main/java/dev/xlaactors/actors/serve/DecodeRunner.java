package dev.xlaactors.actors.serve;

import dev.xlaactors.actors.serve.SlotScheduler.Plan;
import dev.xlaactors.actors.serve.SlotScheduler.Sequence;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.ExecutionFailedException;
import dev.xlaactors.error.XlaException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;

/**
 * Runs the {@link SlotScheduler}'s plans on a {@link GenerationServer}'s {@link SlotDecoder}, off the
 * actor's thread (the decoder blocks in PJRT): one decode step of the running slots, then the prefill of
 * each admitted request, sampling every sequence's next token with its own {@link TokenSampler}. A sampler
 * that fails fails its own request only; a decoder that fails fails the iteration, and the decoder is
 * {@link SlotDecoder#reset reset} so the next iteration starts from empty slots. It owns the decoder: one
 * plan runs at a time, and {@link #stop} closes the decoder after the plan in flight.
 */
final class DecodeRunner {

  /** What an iteration gave. */
  sealed interface Result permits Done, Broken {}

  /**
   * The iteration ran: {@code admitted[i]} is the first token of the plan's i-th admitted request when its part
   * ended its prompt (-1 when the prompt goes on in a later iteration) and {@code decoded[s]} the next token of
   * slot s (where it decoded); an error in the same place is that request's sampler failing (its token is then
   * meaningless).
   */
  record Done(int[] admitted, int[] decoded, XlaException[] admittedErrors, XlaException[] decodedErrors) implements Result {}

  /** The decoder failed: every request of the plan fails with {@code error}; {@code resetFailed}: the decoder is unusable. */
  record Broken(XlaException error, boolean resetFailed) implements Result {}

  private final SlotDecoder decoder;
  private final Executor blocking;

  /** A runner of {@code decoder}'s iterations on {@code blocking}'s threads. */
  DecodeRunner(SlotDecoder decoder, Executor blocking) {
    this.decoder = decoder;
    this.blocking = blocking;
  }

  /** Runs {@code plan} on a blocking thread. The stage fails only when the thread itself failed (an Error, a refused task). */
  CompletableFuture<Result> start(Plan plan) {
    return CompletableFuture.supplyAsync(() -> run(plan), blocking);
  }

  /** The iteration, on the calling thread: one decode step of the running requests, then the admitted ones' prompt parts. */
  Result run(Plan plan) {
    int vocab = decoder.vocabulary();
    int slots = plan.active().length;
    int[] admitted = new int[plan.admitted().size()];
    XlaException[] admittedErrors = new XlaException[admitted.length];
    int[] decoded = new int[slots];
    XlaException[] decodedErrors = new XlaException[slots];
    try {
      // Decode first: a fixed decode_slots step writes into the slots not in use, so a prompt prefilled before it would be
      // overwritten (such a decoder takes whole prompts only, so no slot holds part of one across iterations).
      if (plan.decodes()) {
        float[] logits = decoder.decode(plan.tokens(), plan.positions(), plan.active());
        for (int slot = 0; slot < slots; slot++) {
          if (plan.active()[slot]) {
            decodedErrors[slot] = sample(plan.samplers()[slot], logits, slot * vocab, vocab, plan.occupants()[slot].id(), decoded, slot);
          }
        }
      }
      for (int i = 0; i < admitted.length; i++) {
        Sequence s = plan.admitted().get(i);
        int[] prompt = s.request.prompt();
        float[] logits = plan.from()[i] == 0 && plan.count()[i] == prompt.length ? decoder.prefill(s.slot, prompt.clone())
            : decoder.prefill(s.slot, prompt.clone(), plan.from()[i], plan.count()[i]);
        admitted[i] = -1;
        if (plan.endsPrompt(i)) {
          admittedErrors[i] = sample(s.request.sampler(), logits, 0, vocab, s.id(), admitted, i);
        }
      }
      return new Done(admitted, decoded, admittedErrors, decodedErrors);
    } catch (RuntimeException e) {
      XlaException error = e instanceof XlaException x ? x
          : new ExecutionFailedException(ErrorCode.INTERNAL, "the decoder failed: " + e.getMessage(), e);
      try {
        decoder.reset();
        return new Broken(error, false);
      } catch (RuntimeException resetError) {
        error.addSuppressed(resetError);
        return new Broken(error, true);
      }
    }
  }

  /** Runs a request's sampler into {@code out[index]}; its failure (or a token outside the vocabulary) is that request's error. */
  private static XlaException sample(TokenSampler sampler, float[] logits, int offset, int vocab, String id, int[] out, int index) {
    try {
      int token = sampler.sample(logits, offset, vocab);
      if (token < 0 || token >= vocab) {
        return new ExecutionFailedException(ErrorCode.INTERNAL, "the sampler of request '" + id + "' chose token " + token
            + ", outside the vocabulary (0.." + (vocab - 1) + ")");
      }
      out[index] = token;
      return null;
    } catch (RuntimeException e) {
      return new ExecutionFailedException(ErrorCode.INTERNAL, "the sampler of request '" + id + "' failed: " + e.getMessage(), e);
    }
  }

  /**
   * Closes the decoder: at once when no plan runs ({@code inFlight} null), else after it, first aborting
   * its call ({@link SlotDecoder#cancel}) since nobody waits for its results any more.
   */
  void stop(String reason, CompletableFuture<?> inFlight) {
    if (inFlight != null) {
      decoder.cancel(reason);
      inFlight.whenComplete((r, e) -> decoder.close());
    } else {
      decoder.close();
    }
  }
}
