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
import dev.xlaactors.runtime.model.Role;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletionException;

/**
 * A {@link SlotDecoder} over the slot programs of a loaded model package ({@code prefill_slot},
 * {@code decode_slots}, {@code slot_cache} of one slot count: docs/model-package.md), for any decoder that
 * honours that contract: GPT-2, Llama and whatever else an importer exports. The cache stays on the device,
 * donated to every call and given back updated in place.
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
  private final Model prefill;
  private final Model decode;
  private final Model emptyCache;
  private DeviceBuffer cache; // null only while a call holds it, after a failed call, or after close
  private volatile DeviceRunHandle inFlight;

  private PackageSlotDecoder(String name, CallbackRuntime runtime, int slots, int vocabulary, int maxPromptLength,
      int contextLength, Model prefill, Model decode, Model emptyCache) {
    this.name = name;
    this.runtime = runtime;
    this.slots = slots;
    this.vocabulary = vocabulary;
    this.maxPromptLength = maxPromptLength;
    this.contextLength = contextLength;
    this.prefill = prefill;
    this.decode = decode;
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
    var spec = pkg.program(Role.PREFILL_SLOT, slots).orElseThrow(() -> new InvalidArgumentException("model '" + pkg.name()
        + "' has no slot programs for " + slots + " slot(s); it has them for " + loaded.models(Role.PREFILL_SLOT).keySet()
        + ": pick one of those, or import it again with --slots " + slots));
    PackageSlotDecoder decoder = new PackageSlotDecoder(pkg.name(), runtime, slots, pkg.limits().vocabulary(), spec.length(),
        pkg.limits().contextLength(), loaded.model(Role.PREFILL_SLOT, slots), loaded.model(Role.DECODE_SLOTS, slots),
        loaded.model(Role.SLOT_CACHE, slots));
    decoder.reset();
    return decoder;
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
    if (slot < 0 || slot >= slots) {
      throw new InvalidArgumentException("slot " + slot + " is outside 0.." + (slots - 1));
    }
    if (prompt.length < 1 || prompt.length > maxPromptLength) {
      throw new InvalidArgumentException("a prompt of model '" + name + "' has 1.." + maxPromptLength + " tokens, got "
          + prompt.length);
    }
    checkTokens(prompt, "prompt token");
    int[] padded = new int[maxPromptLength];
    System.arraycopy(prompt, 0, padded, 0, prompt.length);
    return call(prefill, List.of(Argument.of(HostTensor.ofInts(padded, 1, maxPromptLength)),
        Argument.of(HostTensor.scalar(prompt.length)), Argument.of(HostTensor.scalar(slot))));
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
    return call(decode, List.of(Argument.of(HostTensor.ofInts(tok, slots)), Argument.of(HostTensor.ofInts(pos, slots))));
  }

  /** Runs {@code model} as a supervised run with {@code inputs} and the donated cache; keeps the new cache, returns the logits. */
  private float[] call(Model model, List<Argument> inputs) {
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
      return host.toFloatArray();
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
