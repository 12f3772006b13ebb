package dev.xlaactors.examples.gpt;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.runtime.Device;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.RunContext;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.JaxExport;
import dev.xlaactors.runtime.model.Model;
import dev.xlaactors.runtime.model.SafeTensors;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The GPT model of {@link GptArtifacts} loaded for one batch size: its weights uploaded once to a device
 * and bound to the programs ({@link Model}s sharing the same buffers), each compiled from its jax.export
 * artifact ({@code .jax}): prefill, decode step with the host callback "sample" (next token out), and, when
 * first used, the decode step with logits out and the scoring program. The KV cache is a device buffer
 * that each decode step takes donated and gives back updated in place (the runtime reads the alias the
 * export's {@code donate_argnums} left in the compiled module).
 *
 * <p>Prompts of one batch must have the same length (the programs take one position for the batch).
 * Thread-safe for concurrent generations (each owns its cache); close after the last one.
 */
public final class GptModel implements AutoCloseable {
  private final GptArtifacts artifacts;
  private final XlaClient client;
  private final int batch;
  private final Map<String, DeviceBuffer> weights;
  private final boolean ownsWeights; // false: the caller's, shared by several models
  private final Model prefill;
  private final Model decodeSample;
  private final Map<String, Model> lazy = new java.util.HashMap<>(); // decode_b<batch>, score_b<batch>, when used
  private boolean closed;

  private GptModel(GptArtifacts artifacts, XlaClient client, int batch, Map<String, DeviceBuffer> weights,
      boolean ownsWeights, Model prefill, Model decodeSample) {
    this.artifacts = artifacts;
    this.client = client;
    this.batch = batch;
    this.weights = weights;
    this.ownsWeights = ownsWeights;
    this.prefill = prefill;
    this.decodeSample = decodeSample;
  }

  /**
   * Uploads the weights to {@code client}'s first device and compiles and binds the generation programs of
   * {@code batch} (prefill, decode step with sampling); the decode step without sampling and the scoring
   * program are compiled on first use (each holds its own generated code, so a generation-only process
   * does not pay for them).
   */
  public static GptModel load(XlaClient client, GptArtifacts artifacts, int batch) {
    checkBatch(artifacts, batch);
    Map<String, DeviceBuffer> weights = uploadWeights(client, artifacts, client.devices().get(0));
    try {
      return load(client, artifacts, batch, weights, true);
    } catch (RuntimeException e) {
      weights.values().forEach(DeviceBuffer::close);
      throw e;
    }
  }

  /**
   * As {@link #load(XlaClient, GptArtifacts, int)} on weights already uploaded ({@link #uploadWeights}),
   * which the caller keeps and closes after the model: models of several batch sizes share one copy of the
   * weights (and one resident mapping of the file).
   */
  public static GptModel load(XlaClient client, GptArtifacts artifacts, int batch, Map<String, DeviceBuffer> weights) {
    checkBatch(artifacts, batch);
    return load(client, artifacts, batch, Map.copyOf(weights), false);
  }

  private static GptModel load(
      XlaClient client, GptArtifacts artifacts, int batch, Map<String, DeviceBuffer> weights, boolean ownsWeights) {
    Model prefill = bind(client, artifacts, "prefill_b" + batch, weights);
    try {
      Model decodeSample = bind(client, artifacts, "decode_sample_b" + batch, weights);
      return new GptModel(artifacts, client, batch, weights, ownsWeights, prefill, decodeSample);
    } catch (RuntimeException e) {
      prefill.close();
      throw e;
    }
  }

  private static void checkBatch(GptArtifacts artifacts, int batch) {
    if (java.util.Arrays.stream(artifacts.batches()).noneMatch(b -> b == batch)) {
      throw new InvalidArgumentException("model '" + artifacts.name() + "' was exported for batch sizes "
          + java.util.Arrays.toString(artifacts.batches()) + ", not " + batch + ": add it to the config in tools/jax_gpt.py");
    }
  }

  /**
   * Memory-maps the weights file and uploads every tensor once to {@code device}; the caller owns the buffers.
   * What {@code bench/run.sh models} times as "load".
   */
  public static Map<String, DeviceBuffer> uploadWeights(XlaClient client, GptArtifacts artifacts, Device device) {
    Map<String, DeviceBuffer> out = new LinkedHashMap<>();
    try (SafeTensors file = SafeTensors.open(artifacts.weights())) {
      for (String name : file.types().keySet()) {
        out.put(name, client.upload(file.tensor(name), device));
      }
      return out;
    } catch (RuntimeException e) {
      out.values().forEach(DeviceBuffer::close);
      throw e;
    }
  }

  /**
   * The jax.export artifact {@code program} ({@code <program>.jax}) compiled, its weights bound by name.
   * Its inputs are named by their tree paths made plain, so the weights dict's entries are named as in the
   * safetensors file ({@code wte}, {@code h.0.ln_1.g}, ...) and the per-request inputs keep their keystr
   * ({@code [1]}, {@code [2]}, ...). The runtime reads which parameter the compiled module aliases (the KV
   * cache, exported with {@code donate_argnums}), so the cache can be donated.
   */
  static Model bind(XlaClient client, GptArtifacts artifacts, String program, Map<String, DeviceBuffer> weights) {
    JaxExport export;
    try {
      export = JaxExport.read(artifacts.program(program, ".jax"));
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read program " + program + " of " + artifacts.dir(), e);
    }
    try (Executable exe = export.compile(client)) {
      return Model.bind(exe, export.inputNames(), weights);
    }
  }

  /** A program compiled and bound on first use; closed with the model. */
  private synchronized Model lazily(String program) {
    if (closed) {
      throw new InvalidArgumentException("model '" + artifacts.name() + "' (batch " + batch + ") is closed");
    }
    return lazy.computeIfAbsent(program, p -> bind(client, artifacts, p, weights));
  }

  public GptArtifacts artifacts() {
    return artifacts;
  }

  public XlaClient client() {
    return client;
  }

  /** The batch size the programs were exported for. */
  public int batch() {
    return batch;
  }

  public int vocab() {
    return artifacts.vocab();
  }

  /**
   * The scoring program ({@code score(params, tokens[1,T], length) -> mean negative log-likelihood f32[1]}),
   * weights bound: a run passes the padded tokens and the length. Batch 1 only.
   */
  public Model scoreModel() {
    if (!java.nio.file.Files.exists(artifacts.program("score_b" + batch, ".jax"))) {
      throw new InvalidArgumentException("model '" + artifacts.name() + "' has no scoring program for batch " + batch
          + ": load it for batch 1 (tools/jax_gpt.py exports score_b1)");
    }
    return lazily("score_b" + batch);
  }

  /** The logits of the last prompt position, {@code [batch * vocab]}, and the KV cache the caller now owns. */
  public record Prefilled(float[] logits, DeviceBuffer cache) {}

  /**
   * Runs the prompts through the model. Each row of {@code prompts} is one batch row; all have the same
   * length, between 1 and the prefill length; every token is in the vocabulary.
   */
  public Prefilled prefill(int[][] prompts) {
    checkPrompts(prompts);
    int t = artifacts.prefillLength();
    int[] padded = new int[batch * t];
    for (int b = 0; b < batch; b++) {
      System.arraycopy(prompts[b], 0, padded, b * t, prompts[b].length);
    }
    List<DeviceBuffer> out = prefill.execute(
        List.of(Argument.of(HostTensor.ofInts(padded, batch, t)), Argument.of(HostTensor.scalar(prompts[0].length))), null);
    try (DeviceBuffer logits = out.get(0)) {
      return new Prefilled(logits.toHost().toFloatArray(), out.get(1));
    } catch (RuntimeException e) {
      out.get(1).close();
      throw e;
    }
  }

  /** One decode step's logits {@code [batch * vocab]} and the updated cache. */
  public record Step(float[] logits, DeviceBuffer cache) {}

  /**
   * One decode step without sampling: {@code tokens} (one per row) at position {@code pos}; {@code cache}
   * is donated (closed by this call) and the updated one comes back.
   */
  public Step decodeLogits(int[] tokens, int pos, DeviceBuffer cache) {
    checkStep(tokens.length, pos);
    List<DeviceBuffer> out = lazily("decode_b" + batch).execute(
        List.of(Argument.of(HostTensor.ofInts(tokens, batch)), Argument.of(HostTensor.scalar(pos)), Argument.donated(cache)), null);
    try (DeviceBuffer logits = out.get(0)) {
      return new Step(logits.toHost().toFloatArray(), out.get(1));
    } catch (RuntimeException e) {
      out.get(1).close();
      throw e;
    }
  }

  /**
   * One decode step with sampling: the program calls back "sample" through {@code context} and returns
   * the sampled tokens (on the device, to feed the next step) and the updated cache; {@code token} is an
   * s32[batch] host tensor or device buffer, {@code cache} is donated.
   */
  List<DeviceBuffer> decodeSample(Argument token, int pos, DeviceBuffer cache, RunContext context) {
    checkStep(batch, pos);
    return decodeSample.execute(List.of(token, Argument.of(HostTensor.scalar(pos)), Argument.donated(cache)), context);
  }

  /** The decode step with sampling, weights bound (what {@link GptSampling} runs through the supervised layer). */
  Model decodeSampleModel() {
    return decodeSample;
  }

  /**
   * Starts a generation of at most {@code maxTokens} new tokens per row, sampled by {@code settings}: the
   * prompts are checked and prefilled here. Its decode steps run at the runtime level (Model.execute with
   * a run context serving "sample" on XLA's thread); see {@link #start(int[][], SamplingSettings, int,
   * GptSampling)} for supervised steps.
   */
  public GptGeneration start(int[][] prompts, SamplingSettings settings, int maxTokens) {
    return start(prompts, settings, maxTokens, null);
  }

  /**
   * As {@link #start(int[][], SamplingSettings, int)}, each decode step a supervised run of {@code
   * sampling}'s runtime (null: at the runtime level), its "sample" calls timed out by the runtime's
   * configuration.
   */
  public GptGeneration start(int[][] prompts, SamplingSettings settings, int maxTokens, GptSampling sampling) {
    if (maxTokens < 1) {
      throw new InvalidArgumentException("max tokens must be at least 1, got " + maxTokens);
    }
    if (sampling != null && sampling.model() != this) {
      throw new InvalidArgumentException("the sampling given serves another model ('" + sampling.model().artifacts().name()
          + "', batch " + sampling.model().batch() + "): register one for this model with GptSampling.register");
    }
    return new GptGeneration(this, prefill(prompts), prompts[0].length, new Sampler(settings), maxTokens, sampling);
  }

  /** Fails with a message naming the problem when {@code prompts} cannot be prefilled. */
  public void checkPrompts(int[][] prompts) {
    if (prompts == null || prompts.length != batch) {
      throw new InvalidArgumentException("model '" + artifacts.name() + "' loaded for batch " + batch + " takes " + batch
          + " prompt(s), got " + (prompts == null ? "none" : prompts.length));
    }
    int t = artifacts.prefillLength();
    for (int b = 0; b < batch; b++) {
      int n = prompts[b] == null ? 0 : prompts[b].length;
      if (n < 1 || n > t) {
        throw new InvalidArgumentException("prompt " + b + " has " + n + " tokens, expected 1.." + t
            + " (the prefill length of model '" + artifacts.name() + "'): " + (n < 1 ? "give some text" : "shorten it"));
      }
      if (n != prompts[0].length) {
        throw new InvalidArgumentException("prompt " + b + " has " + n + " tokens, prompt 0 has " + prompts[0].length
            + ": the prompts of one batch must have the same length");
      }
      for (int i = 0; i < n; i++) {
        if (prompts[b][i] < 0 || prompts[b][i] >= vocab()) {
          throw new InvalidArgumentException("token " + prompts[b][i] + " at position " + i + " of prompt " + b
              + " is outside the vocabulary of model '" + artifacts.name() + "' (0.." + (vocab() - 1) + ")");
        }
      }
    }
  }

  private void checkStep(int rows, int pos) {
    if (rows != batch) {
      throw new InvalidArgumentException("a decode step of batch " + batch + " takes " + batch + " tokens, got " + rows);
    }
    if (pos < 1 || pos >= artifacts.ctx()) {
      throw new InvalidArgumentException("position " + pos + " is outside the context of model '" + artifacts.name() + "' (1.."
          + (artifacts.ctx() - 1) + ")");
    }
  }

  @Override
  public void close() {
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
      lazy.values().forEach(Model::close);
    }
    prefill.close();
    decodeSample.close();
    if (ownsWeights) {
      weights.values().forEach(DeviceBuffer::close); // the file's mappings go when the JDK collects them
    }
  }
}
