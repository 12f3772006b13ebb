package dev.xlaactors.actors.serve;

import dev.xlaactors.actors.serve.GenerationServer.Generate;
import dev.xlaactors.actors.serve.GenerationServer.Reason;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The iteration-level scheduling of a {@link GenerationServer}, as plain state and no actor (vLLM's
 * scheduler beside its worker): which requests wait and in what order, which slot of the decoder each
 * running request holds, whether one more may wait (max-waiting beyond the free slots), whose deadline
 * passed, the {@link Plan} of each iteration (who is admitted into which free slot and prefilled, who
 * decodes, with which token at which position) and what a sampled token does to its request (streamed,
 * finished by a stop token, its token limit or the end of the context). Times are {@link System#nanoTime()}
 * values passed in, so tests drive the clock.
 *
 * <p>With a prompt cache ({@link PromptCache}, for a decoder that {@link SlotDecoder#keepsFreeRows keeps free
 * rows}) it remembers which tokens each slot's row holds ({@link #written}), admits a request into the free slot
 * that holds the longest prefix of its prompt and starts its prefill after that prefix; requests are still
 * admitted in arrival order, only the slot each gets changes.
 *
 * <p>It decides but does nothing: the server sends the events and the {@link DecodeRunner} runs the plans.
 * A request is held from {@link #enqueue} until {@link #remove}. Not thread-safe: the server's actor is its
 * only user (a running plan is read by the runner, never changed).
 */
final class SlotScheduler {

  /** One request in the server. Mutated by the scheduler only, on the actor's thread. */
  static final class Sequence {
    final Generate request;
    final long arrived; // System.nanoTime()
    final long deadline; // System.nanoTime(), Long.MAX_VALUE for none (Deadlines)
    int slot = -1; // -1 while waiting
    int prefilled; // prompt tokens written into the slot, or planned to be by the iteration in flight
    int cached; // prompt tokens the slot's row held already when the request was admitted (not prefilled)
    int position; // the position the next decode step writes
    int lastToken;
    int produced;

    Sequence(Generate request, long arrived, long deadline) {
      this.request = request;
      this.arrived = arrived;
      this.deadline = deadline;
    }

    String id() {
      return request.id();
    }

    @Override
    public String toString() {
      return request.id();
    }
  }

  /**
   * One iteration's work, fixed when it starts: what the runner reads. {@code admitted} are the requests whose
   * prompt is (partly) written into their slots, the i-th from prompt position {@code from[i]} for {@code
   * count[i]} tokens (a long prompt goes in over several iterations while others decode); slot s decodes
   * {@code tokens[s]} at {@code positions[s]} with {@code samplers[s]} where {@code active[s]}; {@code occupants}
   * are the requests that decode, by slot (null where none); {@code newcomers} are the admitted requests that got
   * their slot in this plan (the others go on with a prompt begun earlier).
   */
  record Plan(long started, List<Sequence> admitted, int[] from, int[] count, int[] tokens, int[] positions, boolean[] active,
      TokenSampler[] samplers, Sequence[] occupants, List<Sequence> newcomers) {
    /** Whether the i-th admitted request's part ends its prompt (its first token is sampled in this iteration). */
    boolean endsPrompt(int i) {
      return from[i] + count[i] == admitted.get(i).request.prompt().length;
    }

    /** Whether a slot decodes in this iteration. */
    boolean decodes() {
      for (boolean a : active) {
        if (a) {
          return true;
        }
      }
      return false;
    }

    /** Every request of the plan: the admitted ones, then the decoding ones. */
    List<Sequence> involved() {
      List<Sequence> involved = new ArrayList<>(admitted);
      for (Sequence s : occupants) {
        if (s != null && !involved.contains(s)) {
          involved.add(s);
        }
      }
      return involved;
    }
  }

  /**
   * What a sampled token does to its request: {@code emit} it as token number {@code index} (false: it is a
   * stop token, not emitted), and {@code finish} the request for that reason (null: it goes on).
   */
  record Step(boolean emit, int index, Reason finish) {}

  private final Sequence[] slots;
  private final int maxWaiting;
  private final int contextLength;
  private final int prefillChunk;
  private final PromptCache cache; // null: every request prefills its whole prompt
  private final ArrayDeque<Sequence> waiting = new ArrayDeque<>();
  private final Map<String, Sequence> byId = new LinkedHashMap<>();

  /** A scheduler of {@code slots} slots, at most {@code maxWaiting} requests waiting beyond the free slots, sequences of {@code contextLength} positions. */
  SlotScheduler(int slots, int maxWaiting, int contextLength) {
    this(slots, maxWaiting, contextLength, Integer.MAX_VALUE);
  }

  /**
   * As above, with prompts written at most {@code prefillChunk} tokens a request per iteration while other
   * requests decode ({@link SlotDecoder#prefillChunk()}), so that a long prompt does not stall their streams;
   * when nothing decodes, a prompt goes in whole.
   */
  SlotScheduler(int slots, int maxWaiting, int contextLength, int prefillChunk) {
    this(slots, maxWaiting, contextLength, prefillChunk, false);
  }

  /**
   * As above; {@code promptCache}: reuse the prompt prefix a free slot's row holds (only for a decoder that
   * {@link SlotDecoder#keepsFreeRows keeps free rows}; the caller checks).
   */
  SlotScheduler(int slots, int maxWaiting, int contextLength, int prefillChunk, boolean promptCache) {
    this.slots = new Sequence[slots];
    this.maxWaiting = maxWaiting;
    this.contextLength = contextLength;
    this.prefillChunk = prefillChunk;
    this.cache = promptCache ? new PromptCache(slots, contextLength) : null;
  }

  // ------------------------------------------------------------------------------------------ admission

  /** Whether request {@code id} is held (waiting or in a slot). */
  boolean holds(String id) {
    return byId.containsKey(id);
  }

  /** The held request {@code id}, or null. */
  Sequence get(String id) {
    return byId.get(id);
  }

  /**
   * Whether one more request would be refused as overloaded: requests that will get a slot at the next
   * boundary do not count as waiting, so max-waiting more may wait beyond the free slots.
   */
  boolean full() {
    return waiting.size() >= free() + maxWaiting;
  }

  /** Holds {@code request}, arrived at {@code now} with deadline {@code deadline}, at the end of the waiting queue. */
  Sequence enqueue(Generate request, long now, long deadline) {
    Sequence s = new Sequence(request, now, deadline);
    waiting.add(s);
    byId.put(request.id(), s);
    return s;
  }

  /** Whether {@code s} is still held (a plan's request may have ended while the plan ran). */
  boolean live(Sequence s) {
    return byId.get(s.id()) == s;
  }

  /** Lets {@code s} go: its slot is free for the next iteration (or it leaves the waiting queue). */
  void remove(Sequence s) {
    byId.remove(s.id());
    if (s.slot >= 0) {
      if (slots[s.slot] == s) {
        slots[s.slot] = null;
        if (cache != null) {
          cache.released(s.slot);
        }
      }
    } else {
      waiting.remove(s);
    }
  }

  // ------------------------------------------------------------------------------------------ iterations

  /**
   * The next iteration at a boundary: every request in a slot whose prompt is written decodes one step, then
   * waiting requests are admitted into the free slots in arrival order, and every request whose prompt is not
   * yet written gets its next part: all of it when nothing decodes, else at most prefillChunk tokens. Null when
   * there is nothing to do. The admitted requests hold their slots from now on. Without a prompt cache a request
   * takes the lowest free slot and its prompt is written from position 0; with one it takes the free slot whose
   * row holds the longest prefix of its prompt, if more than half of it (else the least recently used free slot:
   * {@link PromptCache#choose}), and its prompt is written from the end of that prefix, but always at least its
   * last token, since its first token is sampled from the logits of that position.
   */
  Plan plan(long now) {
    int[] tokenRow = new int[slots.length];
    int[] positions = new int[slots.length];
    boolean[] active = new boolean[slots.length];
    TokenSampler[] samplers = new TokenSampler[slots.length];
    Sequence[] occupants = new Sequence[slots.length];
    boolean decodes = false;
    List<Sequence> prefilling = new ArrayList<>();
    for (int slot = 0; slot < slots.length; slot++) {
      Sequence s = slots[slot];
      if (s != null && s.prefilled == s.request.prompt().length) {
        active[slot] = true;
        decodes = true;
        occupants[slot] = s;
        tokenRow[slot] = s.lastToken;
        positions[slot] = s.position;
        samplers[slot] = s.request.sampler();
      } else if (s != null) {
        prefilling.add(s);
      }
    }
    prefilling.sort(Comparator.comparingLong(s -> s.arrived));
    List<Sequence> newcomers = new ArrayList<>();
    boolean[] free = new boolean[slots.length];
    int freeSlots = 0;
    for (int slot = 0; slot < slots.length; slot++) {
      free[slot] = slots[slot] == null;
      freeSlots += free[slot] ? 1 : 0;
    }
    for (; freeSlots > 0 && !waiting.isEmpty(); freeSlots--) {
      Sequence s = waiting.poll();
      int[] prompt = s.request.prompt();
      int slot = cache != null ? cache.choose(free, prompt) : lowest(free);
      s.slot = slot;
      s.cached = cache != null ? Math.min(cache.commonPrefix(slot, prompt), prompt.length - 1) : 0;
      s.prefilled = s.cached;
      slots[slot] = s;
      free[slot] = false;
      prefilling.add(s);
      newcomers.add(s);
    }
    int[] from = new int[prefilling.size()];
    int[] count = new int[prefilling.size()];
    for (int i = 0; i < prefilling.size(); i++) {
      Sequence s = prefilling.get(i);
      int rest = s.request.prompt().length - s.prefilled;
      from[i] = s.prefilled;
      count[i] = decodes ? Math.min(rest, prefillChunk) : rest;
      s.prefilled += count[i];
    }
    Plan plan = new Plan(now, List.copyOf(prefilling), from, count, tokenRow, positions, active, samplers, occupants,
        List.copyOf(newcomers));
    return prefilling.isEmpty() && !decodes ? null : plan;
  }

  private static int lowest(boolean[] free) {
    int slot = 0;
    while (!free[slot]) {
      slot++;
    }
    return slot;
  }

  /**
   * {@code plan} ran: its prompt parts and decode steps are in their slots' rows (whether or not their requests
   * are still held: a request cancelled meanwhile left its tokens there all the same). Call before the next plan.
   */
  void written(Plan plan) {
    if (cache == null) {
      return;
    }
    for (int slot = 0; slot < plan.active().length; slot++) {
      if (plan.active()[slot]) {
        cache.written(slot, plan.positions()[slot], plan.tokens()[slot]);
      }
    }
    for (int i = 0; i < plan.admitted().size(); i++) {
      Sequence s = plan.admitted().get(i);
      cache.written(s.slot, s.request.prompt(), plan.from()[i], plan.count()[i]);
    }
  }

  /**
   * The decoder failed a step and was {@link SlotDecoder#reset reset} (or is gone): no row holds anything known,
   * including the rows of the plan's slots, which the failed step may have half written.
   */
  void decoderReset() {
    if (cache != null) {
      cache.forgetAll();
    }
  }

  /** Whether admitted requests reuse the prompt prefix their slot's row holds. */
  boolean cachesPrompts() {
    return cache != null;
  }

  /** The tokens {@code slot}'s row is known to hold (empty without a prompt cache). */
  int[] heldTokens(int slot) {
    return cache == null ? new int[0] : cache.tokens(slot);
  }

  /**
   * Request {@code s} got {@code token}: from its prefill ({@code prefilled}, its next position is after
   * the prompt) or from a decode step (its next position is one further). Records the token and says what
   * the server does with it: a stop token ends the request unemitted; otherwise the token is emitted, and
   * the request finishes at its token limit or when it filled the context.
   */
  Step accept(Sequence s, boolean prefilled, int token) {
    s.position = prefilled ? s.request.prompt().length : s.position + 1;
    if (s.request.stopTokens().contains(token)) {
      return new Step(false, -1, Reason.STOP_TOKEN);
    }
    int index = s.produced++;
    s.lastToken = token;
    Reason finish = s.produced >= s.request.maxTokens() ? Reason.MAX_TOKENS
        : s.position >= contextLength ? Reason.CONTEXT_FULL : null;
    return new Step(true, index, finish);
  }

  /** The held requests whose deadline is at or before {@code now}, in arrival order; the caller ends each ({@link #remove}). */
  List<Sequence> expired(long now) {
    List<Sequence> late = new ArrayList<>();
    for (Sequence s : byId.values()) {
      if (s.deadline <= now) { // never wraps (Deadlines): no difference
        late.add(s);
      }
    }
    return late;
  }

  // ------------------------------------------------------------------------------------------ state

  /** Every held request (a copy), in arrival order. */
  List<Sequence> held() {
    return new ArrayList<>(byId.values());
  }

  /** Whether no request is held. */
  boolean isEmpty() {
    return byId.isEmpty();
  }

  /** The decoder's slots. */
  int slots() {
    return slots.length;
  }

  /** Slots holding a request. */
  int active() {
    int active = 0;
    for (Sequence s : slots) {
      active += s == null ? 0 : 1;
    }
    return active;
  }

  /** Free slots. */
  int free() {
    return slots.length - active();
  }

  /** Requests waiting for a slot. */
  int waiting() {
    return waiting.size();
  }

  /** The request in {@code slot}, or null. */
  Sequence occupant(int slot) {
    return slots[slot];
  }

  @Override
  public String toString() {
    return "slots=" + Arrays.toString(slots) + ", waiting=" + waiting.size();
  }
}
