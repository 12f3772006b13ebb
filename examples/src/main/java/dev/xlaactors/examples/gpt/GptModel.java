package dev.xlaactors.examples.gpt;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.graph.ImportedProgram;
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
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The GPT model of {@link GptArtifacts} loaded for one batch size: its weights uploaded once to a device
 * and bound to three programs ({@link Model}s sharing the same buffers): prefill, decode step (logits out)
 * and decode step with the host callback "sample" (next token out). The KV cache is a device buffer that
 * each decode step takes donated and gives back updated in place.
 *
 * <p>Prompts of one batch must have the same length (the programs take one position for the batch).
 * Thread-safe for concurrent generations (each owns its cache); close after the last one.
 */
public final class GptModel implements AutoCloseable {
  private final GptArtifacts artifacts;
  private final XlaClient client;
  private final int batch;
  private final Map<String, DeviceBuffer> weights;
  private final Model prefill;
  private final Model decode;
  private final Model decodeSample;
  private final Model score; // null unless the artifacts have score_b<batch>

  private GptModel(GptArtifacts artifacts, XlaClient client, int batch, Map<String, DeviceBuffer> weights, Model prefill,
      Model decode, Model decodeSample, Model score) {
    this.artifacts = artifacts;
    this.client = client;
    this.batch = batch;
    this.weights = weights;
    this.prefill = prefill;
    this.decode = decode;
    this.decodeSample = decodeSample;
    this.score = score;
  }

  /** Uploads the weights to {@code client}'s first device and compiles and binds the programs of {@code batch}. */
  public static GptModel load(XlaClient client, GptArtifacts artifacts, int batch) {
    if (java.util.Arrays.stream(artifacts.batches()).noneMatch(b -> b == batch)) {
      throw new InvalidArgumentException("model '" + artifacts.name() + "' was exported for batch sizes "
          + java.util.Arrays.toString(artifacts.batches()) + ", not " + batch + ": add it to the config in tools/jax_gpt.py");
    }
    Map<String, DeviceBuffer> weights = uploadWeights(client, artifacts, client.devices().get(0));
    List<Model> models = new ArrayList<>();
    try {
      for (String program : List.of("prefill_b", "decode_b", "decode_sample_b", "score_b")) {
        if (program.equals("score_b") && !java.nio.file.Files.exists(artifacts.dir().resolve(program + batch + ".jax"))) {
          models.add(null); // scoring is exported for batch 1 only
          continue;
        }
        JaxExport export = read(artifacts, program + batch);
        try (Executable exe = compileText(client, artifacts, program + batch)) {
          models.add(Model.bind(exe, export.inputNames(), weights));
        }
      }
      return new GptModel(artifacts, client, batch, weights, models.get(0), models.get(1), models.get(2), models.get(3));
    } catch (RuntimeException e) {
      models.stream().filter(java.util.Objects::nonNull).forEach(Model::close);
      weights.values().forEach(DeviceBuffer::close);
      throw e;
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
   * The module of {@code program} as text ({@code Exported.mlir_module()}), compiled. Not the serialized
   * export's bytecode: an executable compiled from bytecode does not know which parameters the module
   * aliases to outputs ({@code tf.aliasing_output}), so the runtime would refuse to donate the KV cache.
   */
  static Executable compileText(XlaClient client, GptArtifacts artifacts, String program) {
    try {
      java.nio.file.Path gz = artifacts.dir().resolve(program + ".mlir.gz"); // the committed test fixtures are gzipped
      if (java.nio.file.Files.exists(gz)) {
        try (var in = new java.util.zip.GZIPInputStream(java.nio.file.Files.newInputStream(gz))) {
          return ImportedProgram.fromText(program, new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8))
              .compile(client);
        }
      }
      return ImportedProgram.fromFile(artifacts.program(program, ".mlir")).compile(client);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read program " + program + " of " + artifacts.dir(), e);
    }
  }

  /**
   * The jax.export artifact of {@code program}: its inputs are named by their tree paths made plain, so
   * the weights dict's entries are named as in the safetensors file ({@code wte}, {@code h.0.ln_1.g}, ...)
   * and the per-request inputs keep their keystr ({@code [1]}, {@code [2]}, ...).
   */
  static JaxExport read(GptArtifacts artifacts, String program) {
    // The names come from the serialized export; the module is compiled from its text twin (below).
    try {
      return JaxExport.read(artifacts.program(program, ".jax"));
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read program " + program + " of " + artifacts.dir(), e);
    }
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
    if (score == null) {
      throw new InvalidArgumentException("model '" + artifacts.name() + "' has no scoring program for batch " + batch
          + ": load it for batch 1 (tools/jax_gpt.py exports score_b1)");
    }
    return score;
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
    List<DeviceBuffer> out = decode.execute(
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

  /**
   * Starts a generation of at most {@code maxTokens} new tokens per row, sampled by {@code settings}: the
   * prompts are checked and prefilled here.
   */
  public GptGeneration start(int[][] prompts, SamplingSettings settings, int maxTokens) {
    if (maxTokens < 1) {
      throw new InvalidArgumentException("max tokens must be at least 1, got " + maxTokens);
    }
    return new GptGeneration(this, prefill(prompts), prompts[0].length, new Sampler(settings), maxTokens);
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
    prefill.close();
    decode.close();
    decodeSample.close();
    if (score != null) {
      score.close();
    }
    weights.values().forEach(DeviceBuffer::close);
  }
}
