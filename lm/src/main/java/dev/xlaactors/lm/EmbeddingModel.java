package dev.xlaactors.lm;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.lm.text.Tokenizer;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Device;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.LoadedPackage;
import dev.xlaactors.runtime.model.Model;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.ModelPackage.EmbeddingDefaults;
import dev.xlaactors.runtime.model.ModelPackage.Pooling;
import dev.xlaactors.runtime.model.Role;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.SortedMap;

/**
 * An embedding model from a model package, loaded on one device: the package's encoder ({@code embed}
 * programs: tokens and mask in, last hidden states out) followed by pooling (the mean over the attention
 * mask, or the first token's state) and, when asked, L2 normalisation. Sequences are batched: each group
 * runs on the smallest exported batch size that holds it, padded (padding is masked, so it changes nothing).
 *
 * <p>Every encoder call is a supervised run of the {@link CallbackRuntime}. The model owns the loaded
 * package and closes it. Thread-safe.
 */
public final class EmbeddingModel implements AutoCloseable {
  private final LoadedPackage loaded;
  private final CallbackRuntime runtime;
  private final Optional<Tokenizer> tokenizer;
  private final SortedMap<Integer, Model> encoders;
  private final int length;

  private EmbeddingModel(LoadedPackage loaded, CallbackRuntime runtime, Optional<Tokenizer> tokenizer) {
    this.loaded = loaded;
    this.runtime = runtime;
    this.tokenizer = tokenizer;
    this.encoders = loaded.models(Role.EMBED);
    this.length = loaded.modelPackage().programs(Role.EMBED).get(0).length();
  }

  /** Loads {@code pkg} (an {@code embedding} package) on {@code device}; its runs go through {@code runtime}. */
  public static EmbeddingModel load(ModelPackage pkg, Device device, CallbackRuntime runtime) {
    if (pkg.kind() != ModelPackage.Kind.EMBEDDING) {
      throw new InvalidArgumentException("model '" + pkg.name() + "' in " + pkg.directory() + " is a " + pkg.kind()
          + " package; embeddings need an embedding one (import an encoder checkpoint such as BERT)");
    }
    runtime.checkCallbacks(pkg);
    Optional<Tokenizer> tokenizer = PackageTokenizers.open(pkg);
    try {
      return new EmbeddingModel(pkg.load(device), runtime, tokenizer);
    } catch (RuntimeException e) {
      tokenizer.ifPresent(Tokenizer::close);
      throw e;
    }
  }

  /**
   * The token ids of {@code text} as the model's tokenizer makes them for the encoder (with its special
   * tokens: BERT's [CLS] and [SEP]). Refused when the package has no tokenizer.
   */
  public int[] encode(String text) {
    return tokenizer.orElseThrow(() -> new InvalidArgumentException("model '" + name() + "' has no tokenizer in its "
        + "xla-model.json: give token ids, or add \"tokenizer\": {\"huggingface\": \"tokenizer.json\"}")).encode(text, true);
  }

  /** The model's name (its package's). */
  public String name() {
    return loaded.modelPackage().name();
  }

  /** The package the model was loaded from. */
  public ModelPackage modelPackage() {
    return loaded.modelPackage();
  }

  /** The package on its device (its {@code embed} programs can also be served by a model server). */
  public LoadedPackage loaded() {
    return loaded;
  }

  /** The length of each embedding: the last dimension of the encoder's hidden states. */
  public int dimensions() {
    long[] dims = encoders.get(encoders.firstKey()).outputTypes().get(0).shape().dims();
    return (int) dims[dims.length - 1];
  }

  /** The longest sequence the encoder takes. */
  public int maxLength() {
    return length;
  }

  /** The pooling and normalisation the package asks for by default. */
  public EmbeddingDefaults defaults() {
    return modelPackage().embedding().orElse(new EmbeddingDefaults(Pooling.MEAN, false));
  }

  /** {@link #embed(List, Pooling, boolean)} with the package's defaults. */
  public float[][] embed(List<int[]> sequences) {
    return embed(sequences, defaults().pooling(), defaults().normalize());
  }

  /**
   * One embedding per sequence of token ids: the encoder's last hidden states pooled by {@code pooling}
   * over the sequence's own tokens, scaled to unit length when {@code normalize}. Refused naming the
   * sequence when one is empty, longer than {@link #maxLength()} or holds a token outside the vocabulary.
   */
  public float[][] embed(List<int[]> sequences, Pooling pooling, boolean normalize) {
    for (int s = 0; s < sequences.size(); s++) {
      check(s, sequences.get(s));
    }
    float[][] result = new float[sequences.size()][];
    int largest = encoders.lastKey();
    for (int from = 0; from < sequences.size(); from += largest) {
      List<int[]> group = sequences.subList(from, Math.min(sequences.size(), from + largest));
      float[][] pooled = encode(group, pooling);
      for (int i = 0; i < pooled.length; i++) {
        result[from + i] = normalize ? unitLength(pooled[i]) : pooled[i];
      }
    }
    return result;
  }

  private void check(int s, int[] ids) {
    if (ids.length < 1 || ids.length > length) {
      throw new InvalidArgumentException("sequence " + s + " of model '" + name() + "' has " + ids.length + " tokens; the encoder "
          + "takes 1.." + length);
    }
    int vocabulary = modelPackage().limits().vocabulary();
    for (int i = 0; i < ids.length; i++) {
      if (ids[i] < 0 || ids[i] >= vocabulary) {
        throw new InvalidArgumentException("token " + ids[i] + " at " + i + " of sequence " + s + " is outside the vocabulary of "
            + "model '" + name() + "' (0.." + (vocabulary - 1) + ")");
      }
    }
  }

  /**
   * The encoder's inputs for one sequence as a model server of the package's {@code embed} programs takes
   * them as one request (its per-request inputs, without the batch dimension): tokens and mask, each
   * {@code i32[maxLength()]}, padded with zeros (masked, so padding changes nothing). The caller owns and
   * closes them (their memory is pooled: closing gives it back for the next request's rows). Refused as
   * {@link #embed(List)} refuses a sequence; {@code s} names it in the message.
   */
  public List<HostTensor> row(int s, int[] ids) {
    check(s, ids);
    TensorType type = TensorType.of(DType.S32, length);
    HostTensor t = HostTensor.filled(type, b -> b.asIntBuffer().put(ids)); // the padding stays zero
    try {
      return List.of(t, HostTensor.filled(type, b -> {
        for (int i = 0; i < ids.length; i++) {
          b.putInt(i * Integer.BYTES, 1);
        }
      }));
    } catch (RuntimeException e) {
      t.close();
      throw e;
    }
  }

  /**
   * The embedding of a sequence of {@code tokens} tokens from the encoder's answer to its {@link #row}: its
   * hidden states {@code f32[maxLength(), d]}, pooled and normalised as the package's {@link #defaults()} say
   * (the same vector {@link #embed(List)} makes).
   */
  public float[] pooled(HostTensor hidden, int tokens) {
    float[] states = hidden.toFloatArray();
    if (states.length == 0 || states.length % length != 0) {
      throw new InvalidArgumentException("model '" + name() + "': the encoder answered " + states.length + " floats for one sequence, "
          + "expected maxLength (" + length + ") times its hidden size");
    }
    float[] v = pool(states, 0, tokens, states.length / length, defaults().pooling());
    return defaults().normalize() ? unitLength(v) : v;
  }

  /** Runs the smallest encoder that holds {@code group} and pools each sequence's hidden states. */
  private float[][] encode(List<int[]> group, Pooling pooling) {
    int batch = encoders.tailMap(group.size()).firstKey();
    int[] tokens = new int[batch * length];
    int[] mask = new int[batch * length];
    for (int s = 0; s < group.size(); s++) {
      int[] ids = group.get(s);
      System.arraycopy(ids, 0, tokens, s * length, ids.length);
      java.util.Arrays.fill(mask, s * length, s * length + ids.length, 1);
    }
    List<HostTensor> out = runtime.run(encoders.get(batch), List.of(Argument.of(HostTensor.ofInts(tokens, batch, length)),
        Argument.of(HostTensor.ofInts(mask, batch, length))));
    try {
      float[] hidden = out.get(0).toFloatArray();
      int d = (int) (hidden.length / ((long) batch * length));
      float[][] pooled = new float[group.size()][];
      for (int s = 0; s < group.size(); s++) {
        pooled[s] = pool(hidden, s, group.get(s).length, d, pooling);
      }
      return pooled;
    } finally {
      out.forEach(HostTensor::close);
    }
  }

  private float[] pool(float[] hidden, int sequence, int tokens, int d, Pooling pooling) {
    int base = sequence * length * d;
    float[] v = new float[d];
    if (pooling == Pooling.CLS) {
      System.arraycopy(hidden, base, v, 0, d);
      return v;
    }
    double[] sum = new double[d];
    for (int t = 0; t < tokens; t++) {
      for (int j = 0; j < d; j++) {
        sum[j] += hidden[base + t * d + j];
      }
    }
    for (int j = 0; j < d; j++) {
      v[j] = (float) (sum[j] / tokens);
    }
    return v;
  }

  private static float[] unitLength(float[] v) {
    double norm = 0;
    for (float x : v) {
      norm += (double) x * x;
    }
    norm = Math.sqrt(norm);
    float[] u = new float[v.length];
    for (int j = 0; j < v.length; j++) {
      u[j] = (float) (v[j] / Math.max(norm, 1e-12)); // as torch.nn.functional.normalize: a zero vector stays zero
    }
    return u;
  }

  /** Frees the weights, the programs and the tokenizer. */
  @Override
  public void close() {
    tokenizer.ifPresent(Tokenizer::close);
    loaded.close();
  }
}
