package dev.xlaactors.examples.gpt;

import dev.xlaactors.actors.serve.SlotDecoder;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The GPT of {@link GptArtifacts} as a {@link SlotDecoder} for continuous batching
 * ({@link dev.xlaactors.actors.serve.GenerationServer}): weights uploaded once and bound to the slot
 * programs of {@code tools/jax_gpt.py} ({@code prefill_slot_s<S>}: a prompt into one row of the cache;
 * {@code decode_slots_s<S>}: one step of every row at its own position), and one KV cache of S slots
 * on the device, donated to every call and given back updated in place.
 *
 * <p>Not thread-safe: one caller at a time (the server's iteration). Close it to free the cache and weights.
 */
public final class GptSlotDecoder implements SlotDecoder {
  private final GptArtifacts artifacts;
  private final int slots;
  private final Map<String, DeviceBuffer> weights;
  private final Model prefill;
  private final Model decode;
  private final Model emptyCache;
  private DeviceBuffer cache; // null only while a call holds it, or after close

  private GptSlotDecoder(GptArtifacts artifacts, int slots, Map<String, DeviceBuffer> weights, Model prefill, Model decode,
      Model emptyCache) {
    this.artifacts = artifacts;
    this.slots = slots;
    this.weights = weights;
    this.prefill = prefill;
    this.decode = decode;
    this.emptyCache = emptyCache;
    this.cache = emptyCache.execute(List.of(), null).get(0);
  }

  /** Uploads the weights to {@code client}'s first device, compiles the slot programs and makes an empty cache. */
  public static GptSlotDecoder load(XlaClient client, GptArtifacts artifacts) {
    String slotsKey = artifacts.properties().getProperty("slots");
    if (slotsKey == null) {
      throw new InvalidArgumentException("model '" + artifacts.name() + "' in " + artifacts.dir() + " has no slot programs "
          + "(model.properties has no 'slots'): remake it with the current tools/jax_gpt.py make");
    }
    int slots = Integer.parseInt(slotsKey.trim());
    Map<String, DeviceBuffer> weights = GptModel.uploadWeights(client, artifacts, client.devices().get(0));
    List<Model> models = new ArrayList<>();
    try {
      for (String program : List.of("prefill_slot_s", "decode_slots_s", "slot_cache_s")) {
        models.add(GptModel.bind(client, artifacts, program + slots, program.equals("slot_cache_s") ? Map.of() : weights));
      }
      return new GptSlotDecoder(artifacts, slots, weights, models.get(0), models.get(1), models.get(2));
    } catch (RuntimeException e) {
      models.forEach(Model::close);
      weights.values().forEach(DeviceBuffer::close);
      throw e;
    }
  }

  /** The artifacts this decoder was loaded from. */
  public GptArtifacts artifacts() {
    return artifacts;
  }

  @Override
  public int slots() {
    return slots;
  }

  @Override
  public int vocabulary() {
    return artifacts.vocab();
  }

  @Override
  public int maxPromptLength() {
    return artifacts.prefillLength();
  }

  @Override
  public int contextLength() {
    return artifacts.ctx();
  }

  @Override
  public float[] prefill(int slot, int[] prompt) {
    if (slot < 0 || slot >= slots) {
      throw new InvalidArgumentException("slot " + slot + " is outside 0.." + (slots - 1));
    }
    int t = maxPromptLength();
    if (prompt.length < 1 || prompt.length > t) {
      throw new InvalidArgumentException("a prompt has 1.." + t + " tokens, got " + prompt.length);
    }
    checkTokens(prompt, "prompt");
    int[] padded = new int[t];
    System.arraycopy(prompt, 0, padded, 0, prompt.length);
    return call(prefill, List.of(Argument.of(HostTensor.ofInts(padded, 1, t)), Argument.of(HostTensor.scalar(prompt.length)),
        Argument.of(HostTensor.scalar(slot))));
  }

  @Override
  public float[] decode(int[] tokens, int[] positions, boolean[] active) {
    if (tokens.length != slots || positions.length != slots || active.length != slots) {
      throw new InvalidArgumentException("a decode step takes " + slots + " tokens, positions and flags, got " + tokens.length + ", "
          + positions.length + ", " + active.length);
    }
    int[] pos = new int[slots];
    int[] tok = new int[slots];
    for (int s = 0; s < slots; s++) {
      if (active[s]) {
        if (positions[s] < 1 || positions[s] >= contextLength()) {
          throw new InvalidArgumentException("slot " + s + " decodes at position " + positions[s] + ", outside 1.." + (contextLength() - 1));
        }
        pos[s] = positions[s];
        tok[s] = tokens[s];
      } // an inactive slot decodes token 0 at position 0: overwritten by its next prefill
    }
    checkTokens(tok, "token");
    return call(decode, List.of(Argument.of(HostTensor.ofInts(tok, slots)), Argument.of(HostTensor.ofInts(pos, slots))));
  }

  /** Runs {@code model} with {@code inputs} and the donated cache; keeps the updated cache, returns the logits. */
  private float[] call(Model model, List<Argument> inputs) {
    if (cache == null) {
      throw new IllegalStateException("the slot decoder of model '" + artifacts.name() + "' has no cache: it is closed, or a failed "
          + "call was not followed by reset()");
    }
    List<Argument> all = new ArrayList<>(inputs);
    all.add(Argument.donated(cache));
    DeviceBuffer held = cache;
    cache = null; // donated: the program consumes it
    List<DeviceBuffer> out;
    try {
      out = model.execute(all, null);
    } catch (RuntimeException e) {
      closeQuietly(held); // still ours when the call was refused before running
      throw e;
    }
    cache = out.get(1);
    try (DeviceBuffer logits = out.get(0)) {
      return logits.toHost().toFloatArray();
    }
  }

  private void checkTokens(int[] tokens, String what) {
    for (int i = 0; i < tokens.length; i++) {
      if (tokens[i] < 0 || tokens[i] >= vocabulary()) {
        throw new InvalidArgumentException(what + " " + tokens[i] + " at " + i + " is outside the vocabulary of model '"
            + artifacts.name() + "' (0.." + (vocabulary() - 1) + ")");
      }
    }
  }

  @Override
  public void reset() {
    closeQuietly(cache);
    cache = null;
    cache = emptyCache.execute(List.of(), null).get(0);
  }

  private static void closeQuietly(DeviceBuffer buffer) {
    if (buffer != null) {
      try {
        buffer.close();
      } catch (RuntimeException ignored) {
        // a buffer the failed call consumed is gone already
      }
    }
  }

  @Override
  public void close() {
    closeQuietly(cache);
    cache = null;
    prefill.close();
    decode.close();
    emptyCache.close();
    weights.values().forEach(DeviceBuffer::close);
  }
}
