package dev.xlaactors.lm;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.lm.sampling.SamplingParams;
import dev.xlaactors.lm.text.Tokenizer;
import dev.xlaactors.runtime.Device;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.RuntimeSettings;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.LoadedPackage;
import dev.xlaactors.runtime.model.Model;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.PackageXlaOptions;
import dev.xlaactors.runtime.model.ProgramSpec;
import dev.xlaactors.runtime.model.Role;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.Collections;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.SortedMap;

/**
 * A causal language model from a model package, loaded on one device: its tokenizer, its chat template, its
 * generation defaults, scoring (the logits at every position) and slot decoders for generation
 * ({@link TextGenerator} streams text from a generation server over one).
 *
 * <pre>{@code
 * try (LanguageModel lm = LanguageModel.load(ModelPackage.open(dir), client.devices().get(0), runtime)) {
 *   float[][] logits = lm.score(lm.encode("Hello"));
 * }
 * }</pre>
 *
 * <p>Every program runs as a supervised run of the {@link CallbackRuntime} (timeouts, cancel, metrics). The
 * model owns the loaded package and the tokenizer and closes them; the runtime stays the caller's.
 * Thread-safe except for the decoders it makes, which serve one caller each.
 */
public final class LanguageModel implements AutoCloseable {
  private final LoadedPackage loaded;
  private final CallbackRuntime runtime;
  private final Tokenizer tokenizer;
  private final Optional<String> chatTemplate;
  private final SamplingParams defaults;

  private LanguageModel(LoadedPackage loaded, CallbackRuntime runtime, Tokenizer tokenizer, Optional<String> chatTemplate) {
    this.loaded = loaded;
    this.runtime = runtime;
    this.tokenizer = tokenizer;
    this.chatTemplate = chatTemplate;
    this.defaults = samplingDefaults(loaded.modelPackage());
  }

  /**
   * The runtime settings a process that serves model packages creates its client with: the configured ones,
   * with one CPU device unless {@code xla-actors.runtime.cpu-device-count} is set. A client of N CPU devices
   * gives one run about 1/N of the cores' intra-op threads; a package's runs do not nest callbacks, so one
   * device loses nothing and a single sequence decodes about 15% faster (124 M GPT, 2 cores; bench/README.md,
   * "Where the decode time goes"). The command line and the models bench use it.
   */
  public static RuntimeSettings clientSettings() {
    RuntimeSettings configured = RuntimeSettings.load();
    return configured.cpuDeviceCount() > 0 ? configured : configured.withCpuDeviceCount(1);
  }

  /**
   * What a language model is loaded for: which of its package's programs are compiled. Compiling is most of a
   * load (a 124 M GPT package of 8 slots, 2 cores: 22 s for every program, 17 s for the generating ones, 6 s for
   * the scoring ones), so a command
   * that only scores or only generates compiles only what it runs.
   */
  public enum Use {
    /** Scoring and generation, every program: a server, a long-lived caller. */
    ALL(EnumSet.allOf(Role.class)),
    /** {@link LanguageModel#score} only: the score programs, the chunks that score long sequences, their cache. */
    SCORING(EnumSet.of(Role.SCORE, Role.SCORE_CHUNK, Role.SLOT_CACHE)),
    /** {@link LanguageModel#decoder} only: the prompt, decoding and cache programs. */
    GENERATION(EnumSet.of(Role.PREFILL_SLOT, Role.PREFILL_CHUNK, Role.DECODE_SLOTS, Role.DECODE_BATCH, Role.SLOT_CACHE));

    private final Set<Role> roles;

    Use(Set<Role> roles) {
      this.roles = Collections.unmodifiableSet(roles);
    }

    /** The roles whose programs are compiled. */
    public Set<Role> roles() {
      return roles;
    }
  }

  /**
   * Loads {@code pkg} (a {@code causal-lm} package) on {@code device}: each weight uploaded once, every
   * program compiled; its runs go through {@code runtime}. Refused naming the package when it is another kind.
   */
  public static LanguageModel load(ModelPackage pkg, Device device, CallbackRuntime runtime) {
    return load(pkg, device, runtime, Use.ALL);
  }

  /**
   * As {@link #load(ModelPackage, Device, CallbackRuntime)}, with only the programs {@code use} runs compiled;
   * the others' methods are then refused, naming the roles loaded.
   */
  public static LanguageModel load(ModelPackage pkg, Device device, CallbackRuntime runtime, Use use) {
    if (pkg.kind() != ModelPackage.Kind.CAUSAL_LM) {
      throw new InvalidArgumentException("model '" + pkg.name() + "' in " + pkg.directory() + " is a " + pkg.kind()
          + " package; a language model needs a causal-lm one (import a checkpoint whose architecture generates text)");
    }
    runtime.checkCallbacks(pkg);
    Tokenizer tokenizer = PackageTokenizers.open(pkg).orElseThrow(() -> new InvalidArgumentException("model '" + pkg.name()
        + "' has no tokenizer in its xla-model.json: add \"tokenizer\": {\"huggingface\": \"tokenizer.json\"}"));
    Optional<String> template;
    try {
      template = pkg.chatTemplate().map(LanguageModel::read);
    } catch (RuntimeException e) {
      tokenizer.close();
      throw e;
    }
    LoadedPackage loaded;
    try {
      loaded = pkg.load(device, PackageXlaOptions.load(), use.roles());
    } catch (RuntimeException e) {
      tokenizer.close();
      throw e;
    }
    return new LanguageModel(loaded, runtime, tokenizer, template);
  }

  /**
   * The sampling parameters a request to {@code pkg}'s model starts from: {@link SamplingParams#defaults()}
   * with what the package's {@code generation} sets, its end-of-sequence ids as stop tokens.
   */
  public static SamplingParams samplingDefaults(ModelPackage pkg) {
    ModelPackage.GenerationDefaults g = pkg.generation();
    SamplingParams p = SamplingParams.defaults();
    if (g.eosTokenIds() != null) {
      p = p.withStopTokenIds(Set.copyOf(g.eosTokenIds()));
    }
    if (g.maxTokens() != null) {
      p = p.withMaxTokens(g.maxTokens());
    }
    if (g.temperature() != null) {
      p = p.withTemperature(g.temperature());
    }
    if (g.topK() != null) {
      p = p.withTopK(g.topK());
    }
    if (g.topP() != null) {
      p = p.withTopP(g.topP());
    }
    if (g.minP() != null) {
      p = p.withMinP(g.minP());
    }
    if (g.repetitionPenalty() != null) {
      p = p.withRepetitionPenalty(g.repetitionPenalty());
    }
    return p;
  }

  private static String read(java.nio.file.Path file) {
    try {
      return Files.readString(file, StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read the chat template " + file, e);
    }
  }

  /** The model's name (its package's). */
  public String name() {
    return loaded.modelPackage().name();
  }

  /** The package the model was loaded from. */
  public ModelPackage modelPackage() {
    return loaded.modelPackage();
  }

  /** The package on its device (programs and weights). */
  public LoadedPackage loaded() {
    return loaded;
  }

  /** The runtime its programs run through. */
  public CallbackRuntime runtime() {
    return runtime;
  }

  /** The model's tokenizer. */
  public Tokenizer tokenizer() {
    return tokenizer;
  }

  /** The Jinja chat template of the package, if it has one. */
  public Optional<String> chatTemplate() {
    return chatTemplate;
  }

  /** The sampling parameters a request starts from: the package's generation defaults over {@link SamplingParams#defaults()}. */
  public SamplingParams defaults() {
    return defaults;
  }

  /** Token ids are below this. */
  public int vocabulary() {
    return modelPackage().limits().vocabulary();
  }

  /** The most tokens a sequence holds (prompt and generated). */
  public int contextLength() {
    return modelPackage().limits().contextLength();
  }

  /**
   * The token ids of {@code text} as a prompt, as the model's own tokenizer makes them by default: with
   * its special tokens (a Llama tokenizer's BOS), and the package's {@code bos_token_id} first when it has
   * one (for tokenizers that add none themselves).
   */
  public int[] encode(String text) {
    int[] ids = tokenizer.encode(text, true);
    Integer bos = modelPackage().generation().bosTokenId();
    if (bos == null) {
      return ids;
    }
    int[] withBos = new int[ids.length + 1];
    withBos[0] = bos;
    System.arraycopy(ids, 0, withBos, 1, ids.length);
    return withBos;
  }

  /**
   * The longest sequence {@link #score} takes: the context when the package scores by chunks (importer 2),
   * else the score program's length.
   */
  public int maxScoreLength() {
    return modelPackage().programs(Role.SCORE_CHUNK).isEmpty() ? scoreProgram().getValue().length() : contextLength();
  }

  /**
   * The logits at every position of {@code tokens} ({@code [tokens.length][vocabulary]}): row {@code i} is
   * the model's distribution of the token after {@code tokens[0..i]}. A supervised run of the package's
   * {@code score} program, or, for a sequence longer than it, of its {@code score_chunk} programs chunk by chunk
   * over a cache of their own; refused naming the limit when the sequence is empty, too long or holds a token
   * outside the vocabulary.
   */
  public float[][] score(int[] tokens) {
    Map.Entry<Model, ProgramSpec> program = scoreProgram();
    int length = program.getValue().length();
    if (tokens.length > length && !modelPackage().programs(Role.SCORE_CHUNK).isEmpty()) {
      return PackageSlotDecoder.scoreByChunks(loaded, runtime, tokens);
    }
    int batch = program.getValue().size();
    if (tokens.length < 1 || tokens.length > length) {
      throw new InvalidArgumentException("model '" + name() + "' scores 1.." + length + " tokens at once, got " + tokens.length
          + ": import it again with a longer --score-length, or score a shorter sequence");
    }
    for (int i = 0; i < tokens.length; i++) {
      if (tokens[i] < 0 || tokens[i] >= vocabulary()) {
        throw new InvalidArgumentException("token " + tokens[i] + " at " + i + " is outside the vocabulary of model '" + name()
            + "' (0.." + (vocabulary() - 1) + ")");
      }
    }
    int[] padded = new int[batch * length];
    System.arraycopy(tokens, 0, padded, 0, tokens.length);
    List<HostTensor> out = runtime.run(program.getKey(), List.of(Argument.of(HostTensor.ofInts(padded, batch, length))));
    float[] all = out.get(0).toFloatArray();
    int v = vocabulary();
    float[][] logits = new float[tokens.length][];
    for (int i = 0; i < tokens.length; i++) {
      logits[i] = java.util.Arrays.copyOfRange(all, i * v, (i + 1) * v);
    }
    out.forEach(HostTensor::close);
    return logits;
  }

  private Map.Entry<Model, ProgramSpec> scoreProgram() {
    SortedMap<Integer, Model> models = loaded.models(Role.SCORE);
    if (models.isEmpty()) {
      throw new InvalidArgumentException("model '" + name() + "' has no score program: import it again (bin/xla-actors import "
          + "exports one)");
    }
    int size = models.firstKey();
    return Map.entry(models.get(size), modelPackage().program(Role.SCORE, size).orElseThrow());
  }

  /** The slot counts a decoder can have: the caches the package's slot programs were exported for. */
  public List<Integer> slotCounts() {
    return PackageSlotDecoder.slotCounts(modelPackage());
  }

  /** A new decoder of {@code slots} sequences (one of {@link #slotCounts()}); the caller owns it (its cache). */
  public PackageSlotDecoder decoder(int slots) {
    return PackageSlotDecoder.create(loaded, runtime, slots);
  }

  /** Closes the tokenizer and frees the weights and programs (decoders made from it must be closed first). */
  @Override
  public void close() {
    tokenizer.close();
    loaded.close();
  }

  @Override
  public String toString() {
    return "LanguageModel(" + name() + ")";
  }
}
