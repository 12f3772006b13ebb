package dev.xlaactors.lm;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.DeviceRunHandle;
import dev.xlaactors.actors.serve.SlotDecoder;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.LoadedPackage;
import dev.xlaactors.runtime.model.Model;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.ProgramSpec;
import dev.xlaactors.runtime.model.Role;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletionException;
import java.util.function.Function;

/**
 * A {@link SlotDecoder} over the slot programs of a loaded model package, for any decoder that honours their
 * contract (docs/model-package.md): GPT-2, Llama and whatever else an importer exports. The cache stays on the
 * device, donated to every call and given back updated in place. Two kinds of package:
 * <ul>
 *   <li>chunked (importer 2): {@code prefill_chunk} writes a prompt of any length up to the context by chunks
 *       at offsets of a slot's row, and each decode step runs the smallest {@code decode_batch} program whose
 *       batch holds the running sequences and whose window holds their positions, so one sequence on a decoder
 *       of N slots costs one row of the smallest window;
 *   <li>fixed (importer 1): {@code prefill_slot} of one prompt length, {@code decode_slots} of every slot.
 * </ul>
 *
 * <p>Every call is a supervised run of the {@link CallbackRuntime} (its run timeout, its metrics, host
 * callbacks the programs make), so a step that hangs fails with DEADLINE_EXCEEDED and {@link #cancel}
 * aborts the step in flight. The decoder does not own the loaded package (several decoders and a scorer
 * may share its weights); it owns its cache.
 *
 * <p>Not thread-safe: one caller at a time (the generation server's iteration), except {@link #cancel}.
 */
public final class PackageSlotDecoder implements SlotDecoder {
  private final String name;
  private final CallbackRuntime runtime;
  private final int slots;
  private final int vocabulary;
  private final int maxPromptLength;
  private final int contextLength;
  private final Model prefill; // fixed packages; null for chunked ones
  private final Model decode; // fixed packages; null for chunked ones
  private final List<Program> chunks; // chunked packages, by increasing length; empty for fixed ones
  private final List<Program> steps; // chunked packages, by increasing batch then length; empty for fixed ones
  private final Model emptyCache;
  private DeviceBuffer cache; // null only while a call holds it, after a failed call, or after close
  // A chunked package's decode logits, slots x vocabulary, overwritten by each step (see decode). A new array of
  // that size per step was 1.6 MB for GPT-2 at 8 slots: a G1 humongous object in a small heap, whose young
  // collections (3-4 ms every 11 steps at -Xmx256m) took 1-2% of one sequence's decode.
  private float[] stepLogits;
  private volatile DeviceRunHandle inFlight;

  /** A program of a chunked package with its sizes: a chunk's length, or a decode step's batch and window. */
  private record Program(int batch, int length, Model model) {}

  private PackageSlotDecoder(String name, CallbackRuntime runtime, int slots, int vocabulary, int maxPromptLength,
      int contextLength, Model prefill, Model decode, List<Program> chunks, List<Program> steps, Model emptyCache) {
    this.name = name;
    this.runtime = runtime;
    this.slots = slots;
    this.vocabulary = vocabulary;
    this.maxPromptLength = maxPromptLength;
    this.contextLength = contextLength;
    this.prefill = prefill;
    this.decode = decode;
    this.chunks = chunks;
    this.steps = steps;
    this.emptyCache = emptyCache;
  }

  /**
   * A decoder of {@code slots} sequences over {@code loaded}'s slot programs of that count, its steps run
   * by {@code runtime}; makes an empty cache. Refused naming the slot counts the package has.
   */
  public static PackageSlotDecoder create(LoadedPackage loaded, CallbackRuntime runtime, int slots) {
    ModelPackage pkg = loaded.modelPackage();
    if (pkg.kind() != ModelPackage.Kind.CAUSAL_LM) {
      throw new InvalidArgumentException("model '" + pkg.name() + "' is a " + pkg.kind() + " package, not a causal-lm one: "
          + "it has no slot programs to decode with");
    }
    int context = pkg.limits().contextLength();
    List<Program> chunks = new ArrayList<>();
    List<Program> steps = new ArrayList<>();
    for (ProgramSpec p : pkg.programs()) {
      if (p.size() == slots && p.role() == Role.PREFILL_CHUNK) {
        chunks.add(new Program(1, p.length(), loaded.model(p)));
      } else if (p.size() == slots && p.role() == Role.DECODE_BATCH) {
        steps.add(new Program(p.batch(), p.length(), loaded.model(p)));
      }
    }
    PackageSlotDecoder decoder;
    if (!chunks.isEmpty()) {
      chunks.sort(Comparator.comparingInt(Program::length));
      steps.sort(Comparator.comparingInt(Program::batch).thenComparingInt(Program::length));
      decoder = new PackageSlotDecoder(pkg.name(), runtime, slots, pkg.limits().vocabulary(), context, context, null, null,
          List.copyOf(chunks), List.copyOf(steps), loaded.model(Role.SLOT_CACHE, slots));
    } else {
      var spec = pkg.program(Role.PREFILL_SLOT, slots).orElseThrow(() -> new InvalidArgumentException("model '" + pkg.name()
          + "' has no slot programs for " + slots + " slot(s); it has them for " + slotCounts(pkg)
          + ": pick one of those, or import it again with --slots " + slots));
      decoder = new PackageSlotDecoder(pkg.name(), runtime, slots, pkg.limits().vocabulary(), spec.length(), context,
          loaded.model(Role.PREFILL_SLOT, slots), loaded.model(Role.DECODE_SLOTS, slots), List.of(), List.of(),
          loaded.model(Role.SLOT_CACHE, slots));
    }
    decoder.reset();
    return decoder;
  }

  /**
   * The logits at every position of {@code tokens} (1 to the context), by the package's {@code score_chunk}
   * programs over a cache of their own, made for this call and freed after it: chunk after chunk, each attending
   * to the ones before. Refused when the package has no score_chunk program (importer 1).
   */
  static float[][] scoreByChunks(LoadedPackage loaded, CallbackRuntime runtime, int[] tokens) {
    ModelPackage pkg = loaded.modelPackage();
    List<ProgramSpec> specs = pkg.programs(Role.SCORE_CHUNK);
    if (specs.isEmpty()) {
      throw new InvalidArgumentException("model '" + pkg.name() + "' has no score_chunk program to score " + tokens.length
          + " tokens: import it again (importer 2 scores sequences up to the context)");
    }
    int cacheSlots = specs.get(0).size();
    List<Program> chunks = specs.stream().filter(p -> p.size() == cacheSlots)
        .map(p -> new Program(1, p.length(), loaded.model(p))).sorted(Comparator.comparingInt(Program::length)).toList();
    int context = pkg.limits().contextLength();
    int vocab = pkg.limits().vocabulary();
    try (PackageSlotDecoder scorer = new PackageSlotDecoder(pkg.name(), runtime, cacheSlots, vocab, context, context, null, null,
        chunks, List.of(), loaded.model(Role.SLOT_CACHE, cacheSlots))) {
      if (tokens.length < 1 || tokens.length > context) {
        throw new InvalidArgumentException("model '" + pkg.name() + "' scores 1.." + context + " tokens (its context), got "
            + tokens.length);
      }
      scorer.checkTokens(tokens, "token");
      scorer.reset();
      float[][] logits = new float[tokens.length][];
      for (int start = 0; start < tokens.length; ) {
        Program chunk = scorer.chunkFor(tokens.length - start);
        int c = chunk.length();
        int at = Math.min(start, context - c);
        int stop = Math.min(at + c, tokens.length);
        int[] part = new int[c];
        System.arraycopy(tokens, at, part, 0, stop - at);
        float[] rows = scorer.call(chunk.model(), List.of(Argument.of(HostTensor.ofInts(part, 1, c)),
            Argument.of(HostTensor.scalar(at)), Argument.of(HostTensor.scalar(0))));
        for (int i = start; i < stop; i++) {
          logits[i] = java.util.Arrays.copyOfRange(rows, (i - at) * vocab, (i - at + 1) * vocab);
        }
        start = stop;
      }
      return logits;
    }
  }

  /**
   * The slot counts a decoder of {@code pkg} can have: its chunked programs' caches (importer 2), else its
   * fixed slot programs' counts (importer 1).
   */
  public static List<Integer> slotCounts(ModelPackage pkg) {
    Role role = pkg.programs(Role.PREFILL_CHUNK).isEmpty() ? Role.PREFILL_SLOT : Role.PREFILL_CHUNK;
    return pkg.programs(role).stream().map(ProgramSpec::size).distinct().sorted().toList();
  }

  /**
   * The most prompt tokens one {@link #prefill(int, int[], int, int)} call writes at once: the longest chunk
   * (a chunked package), else the prefill length.
   */
  @Override
  public int prefillChunk() {
    return chunks.isEmpty() ? maxPromptLength : chunks.get(chunks.size() - 1).length();
  }

  /**
   * True for a chunked package: its decode step runs only the rows of the active slots ({@code decode_batch},
   * padding rows repeat an active one) and its chunks write only the slot given, so a free slot's row keeps the
   * tokens its last sequence wrote. False for a fixed package, whose {@code decode_slots} step writes position 0
   * of every inactive slot and whose prefill takes only whole prompts.
   */
  @Override
  public boolean keepsFreeRows() {
    return !steps.isEmpty();
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
    return maxPromptLength;
  }

  @Override
  public int contextLength() {
    return contextLength;
  }

  @Override
  public float[] prefill(int slot, int[] prompt) {
    return prefill(slot, prompt, 0, prompt.length);
  }

  /**
   * Writes {@code prompt[from .. from+count)} into {@code slot}'s row (the positions below {@code from} were
   * written by earlier calls for the same prompt) and returns the logits of the prompt's last token when the
   * part ends the prompt, else null. A chunked package writes the part by chunks: the shortest chunk that holds
   * the whole rest (padded), else the longest; a chunk that would run past the context is moved back to end
   * there, writing again positions of the prompt it already holds (the same values). A fixed package takes only
   * a whole prompt in one part.
   */
  @Override
  public float[] prefill(int slot, int[] prompt, int from, int count) {
    if (slot < 0 || slot >= slots) {
      throw new InvalidArgumentException("slot " + slot + " is outside 0.." + (slots - 1));
    }
    if (prompt.length < 1 || prompt.length > maxPromptLength) {
      throw new InvalidArgumentException("a prompt of model '" + name + "' has 1.." + maxPromptLength + " tokens, got "
          + prompt.length + (chunks.isEmpty() ? ": import the model again (importer 2 takes prompts up to the context)" : ""));
    }
    if (from < 0 || count < 1 || from + count > prompt.length) {
      throw new InvalidArgumentException("a part of a prompt of " + prompt.length + " tokens runs from " + from + " for " + count
          + " tokens; expected 0 <= from, 1 <= count, from + count <= " + prompt.length);
    }
    checkTokens(prompt, "prompt token");
    if (chunks.isEmpty()) {
      if (from != 0 || count != prompt.length) {
        throw new InvalidArgumentException("model '" + name + "' has a fixed prefill program: it takes a whole prompt at once, "
            + "not tokens " + from + ".." + (from + count - 1) + " of " + prompt.length);
      }
      int[] padded = new int[maxPromptLength];
      System.arraycopy(prompt, 0, padded, 0, prompt.length);
      return call(prefill, List.of(Argument.of(HostTensor.ofInts(padded, 1, maxPromptLength)),
          Argument.of(HostTensor.scalar(prompt.length)), Argument.of(HostTensor.scalar(slot))));
    }
    int end = from + count;
    float[] logits = null;
    for (int start = from; start < end; ) {
      Program chunk = chunkFor(end - start);
      int c = chunk.length();
      int at = Math.min(start, contextLength - c); // a chunk never runs past the row (the program would clamp it)
      int stop = Math.min(at + c, end);
      int[] tokens = new int[c];
      System.arraycopy(prompt, at, tokens, 0, stop - at);
      logits = call(chunk.model(), List.of(Argument.of(HostTensor.ofInts(tokens, 1, c)), Argument.of(HostTensor.scalar(at)),
          Argument.of(HostTensor.scalar(stop - 1 - at)), Argument.of(HostTensor.scalar(slot))));
      start = stop;
    }
    return end == prompt.length ? logits : null;
  }

  /**
   * The shortest chunk that holds all {@code remaining} tokens, else the longest. Every run reads every weight
   * once and computes the head's row, which costs more than padding a chunk: on GPT-2 (chunks of 32, 64 and
   * 128, two interleaved rounds, medians) 40 tokens took 149-164 ms as one chunk of 64 against 180-185 as two
   * of 32, 60 tokens 148-173 against 192-196, 100 tokens 263-270 as one of 128 against 356-360 as 64 + 32 + 32
   * (the longest chunk the rest fills, then the rest padded: the order before 2026-11-29).
   */
  private Program chunkFor(int remaining) {
    for (Program p : chunks) { // by increasing length
      if (p.length() >= remaining) {
        return p;
      }
    }
    return chunks.get(chunks.size() - 1);
  }

  @Override
  public float[] decode(int[] tokens, int[] positions, boolean[] active) {
    if (tokens.length != slots || positions.length != slots || active.length != slots) {
      throw new InvalidArgumentException("a decode step of model '" + name + "' takes " + slots + " tokens, positions and flags, got "
          + tokens.length + ", " + positions.length + ", " + active.length);
    }
    int[] tok = new int[slots];
    int[] pos = new int[slots];
    for (int s = 0; s < slots; s++) {
      if (active[s]) { // an inactive slot decodes token 0 at position 0: overwritten by its next prefill
        if (positions[s] < 1 || positions[s] >= contextLength) {
          throw new InvalidArgumentException("slot " + s + " decodes at position " + positions[s] + ", outside 1.."
              + (contextLength - 1));
        }
        tok[s] = tokens[s];
        pos[s] = positions[s];
      }
    }
    checkTokens(tok, "token");
    if (steps.isEmpty()) {
      return call(decode, List.of(Argument.of(HostTensor.ofInts(tok, slots)), Argument.of(HostTensor.ofInts(pos, slots))));
    }
    return decodeRows(tok, pos, active);
  }

  /**
   * A chunked package's step: the smallest batch that holds the active slots and, of those, the smallest window
   * past their positions. Rows beyond the active ones repeat the first active row (the same token at the same
   * position of the same slot writes the same values), so no other slot's row is touched.
   */
  private float[] decodeRows(int[] tok, int[] pos, boolean[] active) {
    int n = 0;
    int furthest = 0;
    for (int s = 0; s < slots; s++) {
      if (active[s]) {
        n++;
        furthest = Math.max(furthest, pos[s]);
      }
    }
    if (stepLogits == null) {
      stepLogits = new float[slots * vocabulary];
    }
    float[] all = stepLogits;
    if (n == 0) {
      return all;
    }
    Program step = null;
    for (Program p : steps) {
      if (p.batch() >= n && p.length() > furthest && (step == null || p.batch() < step.batch()
          || (p.batch() == step.batch() && p.length() < step.length()))) {
        step = p;
      }
    }
    if (step == null) { // the package check guarantees a program of every slot over the whole context
      throw new XlaException(ErrorCode.INTERNAL, "model '" + name + "' has no decode_batch program for " + n + " sequences at "
          + "position " + furthest);
    }
    int b = step.batch();
    int[] rows = new int[b];
    int[] rowTokens = new int[b];
    int[] rowPositions = new int[b];
    int r = 0;
    for (int s = 0; s < slots; s++) {
      if (active[s]) {
        rows[r] = s;
        rowTokens[r] = tok[s];
        rowPositions[r++] = pos[s];
      }
    }
    for (; r < b; r++) {
      rows[r] = rows[0];
      rowTokens[r] = rowTokens[0];
      rowPositions[r] = rowPositions[0];
    }
    int running = n;
    return call(step.model(), List.of(Argument.of(HostTensor.ofInts(rowTokens, b)),
        Argument.of(HostTensor.ofInts(rowPositions, b)), Argument.of(HostTensor.ofInts(rows, b))), logits -> {
          for (int i = 0; i < running; i++) { // each row straight into its slot's row
            logits.readFloats(i * vocabulary, all, rows[i] * vocabulary, vocabulary);
          }
          return all;
        });
  }

  /** Runs {@code model} as a supervised run with {@code inputs} and the donated cache; keeps the new cache, returns the logits. */
  private float[] call(Model model, List<Argument> inputs) {
    return call(model, inputs, HostTensor::toFloatArray);
  }

  /** {@link #call(Model, List)}, the logits read by {@code read} while their host copy is open. */
  private float[] call(Model model, List<Argument> inputs, Function<HostTensor, float[]> read) {
    if (cache == null) {
      throw new XlaException(ErrorCode.FAILED_PRECONDITION, "the slot decoder of model '" + name + "' has no cache: it is closed, "
          + "or a failed step was not followed by reset()");
    }
    List<Argument> all = new ArrayList<>(inputs);
    all.add(Argument.donated(cache));
    DeviceBuffer held = cache;
    cache = null; // donated: the program consumes it
    List<DeviceBuffer> out;
    try {
      DeviceRunHandle run = runtime.startOnDevice(model, all);
      inFlight = run;
      out = await(run);
    } catch (RuntimeException e) {
      closeQuietly(held); // still ours when the run was refused before XLA took it
      throw e;
    } finally {
      inFlight = null;
    }
    cache = out.get(1);
    try (DeviceBuffer logits = out.get(0); HostTensor host = logits.toHost()) {
      return read.apply(host);
    }
  }

  private static List<DeviceBuffer> await(DeviceRunHandle run) {
    try {
      return run.result().toCompletableFuture().join();
    } catch (CompletionException e) {
      if (e.getCause() instanceof RuntimeException cause) {
        throw cause;
      }
      throw e;
    }
  }

  /**
   * Cancels the step in flight, if any: it fails with CANCELLED naming {@code reason}, and the caller must
   * {@link #reset()} before the next step. Safe from any thread.
   */
  @Override
  public void cancel(String reason) {
    DeviceRunHandle run = inFlight;
    if (run != null) {
      run.cancel(reason);
    }
  }

  private void checkTokens(int[] tokens, String what) {
    for (int i = 0; i < tokens.length; i++) {
      if (tokens[i] < 0 || tokens[i] >= vocabulary) {
        throw new InvalidArgumentException(what + " " + tokens[i] + " at " + i + " is outside the vocabulary of model '" + name
            + "' (0.." + (vocabulary - 1) + ")");
      }
    }
  }

  @Override
  public void reset() {
    closeQuietly(cache);
    cache = null;
    cache = await(runtime.startOnDevice(emptyCache, List.of())).get(0);
  }

  private static void closeQuietly(DeviceBuffer buffer) {
    if (buffer != null) {
      try {
        buffer.close();
      } catch (RuntimeException ignored) {
        // a buffer the failed run consumed is gone already
      }
    }
  }

  /** Frees the cache; the package's weights and programs stay loaded (their owner closes them). */
  @Override
  public void close() {
    closeQuietly(cache);
    cache = null;
  }
}
