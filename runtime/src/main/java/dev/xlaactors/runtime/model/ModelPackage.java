package dev.xlaactors.runtime.model;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.Device;
import dev.xlaactors.runtime.TensorType;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Collectors;

/**
 * A model package (docs/model-package.md): one directory holding a model's compiled programs, its weights,
 * tokenizer, chat template and defaults, described by its manifest {@value #MANIFEST}.
 *
 * <p>{@link #open} reads the manifest and checks all of it before it returns, so that a bad package fails
 * there, naming the file, the key or tensor, expected vs got and the fix, and never half-way through a load:
 * the keys (any unknown key anywhere is refused), every file (inside the directory), the weights (one
 * safetensors file, or shards checked against their index), each program's {@code jax.export} signature
 * against its role's contract, and the weights against the programs (each weight a program takes is in the
 * weights with the same dtype and shape, and each tensor of the weights is taken by some program).
 *
 * <p>{@link #load} puts the package on one device ({@link LoadedPackage}). A package holds no native memory
 * and no open file (the weights are re-opened by {@link #load}); it is immutable and thread-safe.
 */
public final class ModelPackage {
  /** The manifest's file name. */
  public static final String MANIFEST = "xla-model.json";

  /** The manifest format this reads. */
  public static final int FORMAT = 1;

  private static final String NAME_PATTERN = "[A-Za-z0-9._-]+";
  private static final String SPECIAL_TOKEN_NAME = "[a-z][a-z0-9_]*_token";
  private static final List<String> TOP_KEYS = List.of("format", "name", "kind", "source", "weights", "programs",
      "host_callbacks", "tokenizer", "chat_template", "special_tokens", "generation", "embedding", "limits");
  private static final List<String> GENERATION_KEYS = List.of("eos_token_ids", "bos_token_id", "max_tokens",
      "temperature", "top_k", "top_p", "min_p", "repetition_penalty");

  /** What a package serves, which decides the roles its programs have. */
  public enum Kind {
    /** Text generation and scoring: {@code prefill_slot}, {@code decode_slots}, {@code slot_cache}, optionally {@code score}. */
    CAUSAL_LM(Set.of(Role.SCORE, Role.PREFILL_SLOT, Role.DECODE_SLOTS, Role.SLOT_CACHE, Role.PREFILL_CHUNK, Role.DECODE_BATCH,
        Role.SCORE_CHUNK)),
    /** An encoder whose hidden states are pooled: {@code embed}. */
    EMBEDDING(Set.of(Role.EMBED)),
    /** Any program served by tensors: {@code main}. */
    TENSOR(Set.of(Role.MAIN));

    private final Set<Role> roles;

    Kind(Set<Role> roles) {
      this.roles = roles;
    }

    /** The roles a package of this kind may have. */
    public Set<Role> roles() {
      return roles;
    }

    /** The manifest's name, e.g. {@code causal-lm}. */
    public String jsonName() {
      return name().toLowerCase(Locale.ROOT).replace('_', '-');
    }

    /** The kind the manifest names {@code name}; refused naming the kinds there are. */
    public static Kind fromJson(String name) {
      for (Kind k : values()) {
        if (k.jsonName().equals(name)) {
          return k;
        }
      }
      throw new InvalidArgumentException("unknown kind '" + name + "'; the kinds are "
          + Arrays.stream(values()).map(Kind::jsonName).toList());
    }
  }

  /** How {@code embed}'s hidden states become one vector per input. */
  public enum Pooling {
    /** The mean over the real tokens (mask 1). */
    MEAN,
    /** The first token's state. */
    CLS
  }

  /**
   * The package's tokenizer: exactly one of a Hugging Face {@code tokenizer.json} inside the package, or the
   * name of an encoding JTokkit bundles.
   */
  public record TokenizerSpec(Path huggingFaceFile, String tiktokenEncoding) {
    public TokenizerSpec {
      if ((huggingFaceFile == null) == (tiktokenEncoding == null)) {
        throw new IllegalArgumentException("exactly one of huggingFaceFile and tiktokenEncoding, got "
            + huggingFaceFile + " and " + tiktokenEncoding);
      }
    }
  }

  /** Defaults of a generation request; a null field is not set (the request's or the engine's applies). */
  public record GenerationDefaults(List<Integer> eosTokenIds, Integer bosTokenId, Integer maxTokens, Float temperature,
      Integer topK, Float topP, Float minP, Float repetitionPenalty) {
    public GenerationDefaults {
      eosTokenIds = eosTokenIds == null ? null : List.copyOf(eosTokenIds);
    }

    /** Nothing set. */
    public static final GenerationDefaults NONE = new GenerationDefaults(null, null, null, null, null, null, null, null);
  }

  /** Defaults of {@code embed}: how hidden states are pooled and whether the vector is L2-normalized. */
  public record EmbeddingDefaults(Pooling pooling, boolean normalize) {
    public EmbeddingDefaults {
      Objects.requireNonNull(pooling, "pooling");
    }
  }

  /**
   * @param vocabulary token ids are below it ({@code causal-lm} and {@code embedding}; 0 for a tensor package
   *     that does not set it)
   * @param contextLength the positions a sequence may use (0 for a tensor package that does not set it)
   */
  public record Limits(int vocabulary, int contextLength) {}

  private final Path directory;
  private final String name;
  private final Kind kind;
  private final Map<String, String> source;
  private final Path weightsFile;
  private final boolean sharded;
  private final Map<String, TensorType> weightTypes;
  private final List<ProgramSpec> programs;
  private final Map<Role, List<ProgramSpec>> byRole;
  private final Map<ProgramSpec, List<String>> weightParameters;
  private final List<String> hostCallbacks;
  private final TokenizerSpec tokenizer;
  private final Path chatTemplate;
  private final Map<String, String> specialTokens;
  private final GenerationDefaults generation;
  private final EmbeddingDefaults embedding;
  private final Limits limits;

  private ModelPackage(Reader r) {
    this.directory = r.directory;
    this.name = r.name;
    this.kind = r.kind;
    this.source = Collections.unmodifiableMap(r.source);
    this.weightsFile = r.weightsFile;
    this.sharded = r.sharded;
    this.weightTypes = Collections.unmodifiableMap(r.weightTypes);
    List<ProgramSpec> all = new ArrayList<>(r.programs);
    all.sort(Comparator.comparing(ProgramSpec::role).thenComparingInt(ProgramSpec::size).thenComparingInt(ProgramSpec::batch)
        .thenComparingInt(ProgramSpec::length));
    this.programs = List.copyOf(all);
    Map<Role, List<ProgramSpec>> roles = new EnumMap<>(Role.class);
    for (Role role : Role.values()) {
      roles.put(role, all.stream().filter(p -> p.role() == role).toList());
    }
    this.byRole = Collections.unmodifiableMap(roles);
    this.weightParameters = Collections.unmodifiableMap(r.weightParameters);
    this.hostCallbacks = List.copyOf(r.hostCallbacks);
    this.tokenizer = r.tokenizer;
    this.chatTemplate = r.chatTemplate;
    this.specialTokens = Collections.unmodifiableMap(r.specialTokens);
    this.generation = r.generation;
    this.embedding = r.embedding;
    this.limits = r.limits;
  }

  /**
   * Reads {@code dir}/{@value #MANIFEST} and checks everything (see the class doc); an {@link
   * InvalidArgumentException} naming what is wrong, expected vs got, and the fix.
   */
  public static ModelPackage open(Path dir) {
    Objects.requireNonNull(dir, "dir");
    Path directory = dir.toAbsolutePath().normalize();
    try {
      return new ModelPackage(new Reader(directory).read());
    } catch (InvalidArgumentException e) {
      if (e.getMessage().startsWith("model package ")) {
        throw e;
      }
      // Name the package: a server opens many, and "xla-model.json: ..." alone does not say which.
      InvalidArgumentException named = new InvalidArgumentException("model package " + directory + ": " + e.getMessage());
      named.initCause(e);
      throw named;
    }
  }

  /** The package's directory (absolute). */
  public Path directory() {
    return directory;
  }

  /** The model's name: what {@code /v1/models} lists and a request's {@code model} names. */
  public String name() {
    return name;
  }

  /** What the package serves. */
  public Kind kind() {
    return kind;
  }

  /** Free facts about where the package came from (architecture, dtype, the importer's version). */
  public Map<String, String> source() {
    return source;
  }

  /** Every program, by role (in {@link Role} order) then size. */
  public List<ProgramSpec> programs() {
    return programs;
  }

  /** The programs of {@code role}, by increasing size (empty when the package has none). */
  public List<ProgramSpec> programs(Role role) {
    return byRole.get(Objects.requireNonNull(role, "role"));
  }

  /** The program of {@code role} at {@code size} (its batch or slots). */
  public Optional<ProgramSpec> program(Role role, int size) {
    return programs(role).stream().filter(p -> p.size() == size).findFirst();
  }

  /** The names of the host callbacks the programs call: each must be registered before a run. */
  public List<String> hostCallbacks() {
    return hostCallbacks;
  }

  /** The tokenizer, when the manifest names one. */
  public Optional<TokenizerSpec> tokenizer() {
    return Optional.ofNullable(tokenizer);
  }

  /** The chat template (a Jinja file inside the package), when the manifest names one. */
  public Optional<Path> chatTemplate() {
    return Optional.ofNullable(chatTemplate);
  }

  /**
   * The texts of the tokenizer's special tokens by the names a chat template knows them by
   * ({@code bos_token -> "<s>"}, {@code eos_token}, {@code unk_token}, {@code pad_token}, ...), as the
   * checkpoint's {@code tokenizer_config.json} gives them; empty when the manifest has none (a package
   * imported before the importer wrote them).
   */
  public Map<String, String> specialTokens() {
    return specialTokens;
  }

  /** The defaults of a generation request ({@link GenerationDefaults#NONE} when the manifest has none). */
  public GenerationDefaults generation() {
    return generation;
  }

  /** The defaults of {@code embed} (an {@code embedding} package has them; others do not). */
  public Optional<EmbeddingDefaults> embedding() {
    return Optional.ofNullable(embedding);
  }

  /** The model's limits. */
  public Limits limits() {
    return limits;
  }

  /** Every tensor of the weights (of every shard) and its type. */
  public Map<String, TensorType> weightTypes() {
    return weightTypes;
  }

  /** The weights' file: the safetensors file, or the index of the shards. */
  public Path weightsFile() {
    return weightsFile;
  }

  /** Opens the weights (one file or the shards); the caller closes them. */
  public WeightFiles openWeights() {
    return sharded ? WeightFiles.index(weightsFile) : WeightFiles.single(weightsFile);
  }

  /** The names of the weights {@code program} takes as parameters of its module, in parameter order. */
  public List<String> weightParameters(ProgramSpec program) {
    List<String> names = weightParameters.get(Objects.requireNonNull(program, "program"));
    if (names == null) {
      throw new InvalidArgumentException("program " + program.describe() + " is not a program of package '" + name + "'");
    }
    return names;
  }

  /**
   * The package on {@code device}: every program compiled for its client with the configured XLA options
   * of its role ({@link PackageXlaOptions#load()}), every weight uploaded once and bound to each program that
   * takes it. Everything made is closed again if any step fails.
   */
  public LoadedPackage load(Device device) {
    return load(device, PackageXlaOptions.load());
  }

  /** As {@link #load(Device)}, each program compiled with {@code xlaOptions} of its role. */
  public LoadedPackage load(Device device, PackageXlaOptions xlaOptions) {
    return LoadedPackage.load(this, device, xlaOptions, EnumSet.allOf(Role.class));
  }

  /**
   * As {@link #load(Device, PackageXlaOptions)}, but only the programs of {@code roles} compiled and bound (every
   * weight is still uploaded): a command that only scores does not wait for the decoding programs to compile
   * (a 124 M GPT package of 8 slots: 6 s instead of 22). Asking the result for another role's program is refused, naming
   * the roles it was loaded with; refused at once when the package has no program of {@code roles}.
   */
  public LoadedPackage load(Device device, PackageXlaOptions xlaOptions, Set<Role> roles) {
    return LoadedPackage.load(this, device, xlaOptions, roles);
  }

  @Override
  public String toString() {
    return "ModelPackage(" + name + ", " + kind.jsonName() + ", " + programs.size() + " programs, " + weightTypes.size()
        + " weights, " + directory + ")";
  }

  /** Reads and checks a manifest; one use. */
  private static final class Reader {
    private final Path directory;
    private String name;
    private Kind kind;
    private Map<String, String> source;
    private Path weightsFile;
    private boolean sharded;
    private Map<String, TensorType> weightTypes;
    private final List<ProgramSpec> programs = new ArrayList<>();
    private final Map<ProgramSpec, List<String>> weightParameters = new LinkedHashMap<>();
    private final List<String> hostCallbacks = new ArrayList<>();
    private TokenizerSpec tokenizer;
    private Path chatTemplate;
    private Map<String, String> specialTokens = new LinkedHashMap<>();
    private GenerationDefaults generation = GenerationDefaults.NONE;
    private EmbeddingDefaults embedding;
    private Limits limits;

    Reader(Path directory) {
      this.directory = directory;
    }

    Reader read() {
      ManifestObject top = ManifestObject.of(MANIFEST, "", parseManifest()).allowOnly(TOP_KEYS);
      int format = top.integer("format");
      if (format != FORMAT) {
        throw top.invalid("format", "is " + format + ", this runtime reads format " + FORMAT
            + ": re-import the model with this version's importer");
      }
      name = top.string("name");
      if (!name.matches(NAME_PATTERN)) {
        throw top.invalid("name", "is \"" + name + "\", expected letters, digits, '.', '_' and '-' only ("
            + NAME_PATTERN + "): it names the model in requests and URLs");
      }
      String kindName = top.string("kind");
      try {
        kind = Kind.fromJson(kindName);
      } catch (InvalidArgumentException e) {
        throw top.invalid("kind", "is \"" + kindName + "\", expected one of "
            + Arrays.stream(Kind.values()).map(Kind::jsonName).toList());
      }
      source = top.strings("source");
      readWeights(top.object("weights"));
      readPrograms(top);
      readHostCallbacks(top);
      readTokenizer(top);
      String template = top.optionalString("chat_template");
      if (template != null) {
        chatTemplate = PackagePaths.inside(directory, template, MANIFEST + ": 'chat_template'");
      }
      readSpecialTokens(top);
      readLimits(top);
      readGeneration(top);
      readEmbedding(top);
      checkRoles();
      checkSignatures();
      checkWeights();
      return this;
    }

    private Object parseManifest() {
      if (!Files.isDirectory(directory)) {
        throw new InvalidArgumentException("model package " + directory + " is not a directory: a package is a "
            + "directory holding " + MANIFEST + " (docs/model-package.md)");
      }
      Path manifest = directory.resolve(MANIFEST);
      if (!Files.isRegularFile(manifest)) {
        throw new InvalidArgumentException("model package " + directory + " has no " + MANIFEST + ": make one with "
            + "bin/xla-actors import, or write it as docs/model-package.md says");
      }
      try {
        return HeaderJson.parse(Files.readString(manifest, StandardCharsets.UTF_8));
      } catch (HeaderJson.Malformed e) {
        throw new InvalidArgumentException(manifest + " is not valid JSON: " + e.getMessage());
      } catch (IOException e) {
        throw new XlaException(ErrorCode.DATA_LOSS, manifest + " cannot be read: " + e, e);
      }
    }

    private void readWeights(ManifestObject weights) {
      weights.allowOnly("file", "index");
      if (weights.has("file") == weights.has("index")) {
        throw new InvalidArgumentException(MANIFEST + ": 'weights' needs exactly one of \"file\" (one safetensors "
            + "file) or \"index\" (the index of shards, model.safetensors.index.json)");
      }
      sharded = weights.has("index");
      String key = sharded ? "index" : "file";
      weightsFile = PackagePaths.inside(directory, weights.string(key), MANIFEST + ": 'weights." + key + "'");
      // The index's shards are inside the index's directory (WeightFiles checks), so inside the package.
      try (WeightFiles files = sharded ? WeightFiles.index(weightsFile) : WeightFiles.single(weightsFile)) {
        weightTypes = new LinkedHashMap<>(files.types());
      }
    }

    private void readPrograms(ManifestObject top) {
      List<Object> entries = top.list("programs");
      if (entries.isEmpty()) {
        throw top.invalid("programs", "is empty: a package has at least one program");
      }
      Set<String> seen = new LinkedHashSet<>();
      for (int i = 0; i < entries.size(); i++) {
        ManifestObject entry = ManifestObject.of(MANIFEST, "programs[" + i + "]", entries.get(i));
        String roleName = entry.string("role");
        Role role;
        try {
          role = Role.fromJson(roleName);
        } catch (InvalidArgumentException e) {
          throw entry.invalid("role", "is \"" + roleName + "\", expected one of "
              + Arrays.stream(Role.values()).map(Role::jsonName).toList());
        }
        List<String> allowed = new ArrayList<>(List.of("role", role.sizeKey()));
        if (role.hasLength()) {
          allowed.add("length");
        }
        if (role.hasBatch()) {
          allowed.add("batch");
        }
        allowed.add("file");
        entry.allowOnly(allowed);
        int size = entry.integer(role.sizeKey());
        if (size < 1) {
          throw entry.invalid(role.sizeKey(), "is " + size + ", expected at least 1");
        }
        int length = role.hasLength() ? entry.integer("length") : 0;
        if (role.hasLength() && length < 1) {
          throw entry.invalid("length", "is " + length + ", expected at least 1");
        }
        int batch = role.hasBatch() ? entry.integer("batch") : 0;
        if (role.hasBatch() && (batch < 1 || batch > size)) {
          throw entry.invalid("batch", "is " + batch + ", expected 1.." + size + " (the rows a step decodes, at most "
              + "the cache's slots)");
        }
        // Roles with several programs per size (chunk lengths, windows) are told apart by length and batch.
        boolean manyPerSize = role == Role.PREFILL_CHUNK || role == Role.DECODE_BATCH || role == Role.SCORE_CHUNK;
        String key = role.jsonName() + " " + size + (manyPerSize ? " " + batch + " " + length : "");
        if (!seen.add(key)) {
          throw entry.invalid(role.sizeKey(), "repeats " + role.jsonName() + " at " + role.sizeKey() + " " + size
              + (manyPerSize ? (role.hasBatch() ? ", batch " + batch : "") + ", length " + length : "")
              + ": a package has one program per role and size" + (manyPerSize ? ", batch and length" : ""));
        }
        String fileName = entry.string("file");
        Path file = PackagePaths.inside(directory, fileName, MANIFEST + ": '" + entry.at("file") + "'");
        JaxExport export;
        try {
          export = JaxExport.read(file);
        } catch (IOException e) {
          throw new XlaException(ErrorCode.DATA_LOSS, MANIFEST + ": '" + entry.at("file") + "' " + file
              + " cannot be read: " + e, e);
        } catch (InvalidArgumentException e) {
          throw new InvalidArgumentException(MANIFEST + ": '" + entry.at("file") + "': " + e.getMessage());
        }
        programs.add(new ProgramSpec(role, size, length, batch, file, export));
      }
    }

    private void readHostCallbacks(ManifestObject top) {
      List<Object> names = top.optionalList("host_callbacks");
      if (names == null) {
        return;
      }
      for (int i = 0; i < names.size(); i++) {
        if (!(names.get(i) instanceof String s) || s.isEmpty()) {
          throw top.invalid("host_callbacks[" + i + "]", "must be a callback's name (a non-empty string), got "
              + ManifestObject.describe(names.get(i)));
        }
        if (hostCallbacks.contains(s)) {
          throw top.invalid("host_callbacks[" + i + "]", "repeats \"" + s + "\": name each callback once");
        }
        hostCallbacks.add(s);
      }
    }

    /** {@code special_tokens}: template variable names ({@code bos_token}, ...) to their texts; causal-lm packages only. */
    private void readSpecialTokens(ManifestObject top) {
      if (!top.has("special_tokens")) {
        return;
      }
      if (kind != Kind.CAUSAL_LM) {
        throw top.invalid("special_tokens", "is for causal-lm packages (their chat template reads it); this one is "
            + kind.jsonName() + ": drop it");
      }
      specialTokens = top.strings("special_tokens");
      for (String name : specialTokens.keySet()) {
        if (!name.matches(SPECIAL_TOKEN_NAME)) {
          throw top.invalid("special_tokens", "has the name \"" + name + "\", expected names such as bos_token, eos_token, "
              + "unk_token, pad_token (lower case, ending in _token): the chat template sees each by its name");
        }
      }
    }

    private void readTokenizer(ManifestObject top) {
      ManifestObject t = top.optionalObject("tokenizer");
      if (t == null) {
        if (kind == Kind.CAUSAL_LM) {
          throw top.invalid("tokenizer", "is required for a causal-lm package: {\"huggingface\": \"tokenizer.json\"} "
              + "or {\"tiktoken\": \"r50k_base\"}");
        }
        return;
      }
      t.allowOnly("huggingface", "tiktoken");
      if (t.has("huggingface") == t.has("tiktoken")) {
        throw top.invalid("tokenizer", "needs exactly one of \"huggingface\" (a tokenizer.json in the package) or "
            + "\"tiktoken\" (an encoding's name, e.g. r50k_base)");
      }
      if (t.has("huggingface")) {
        tokenizer = new TokenizerSpec(PackagePaths.inside(directory, t.string("huggingface"),
            MANIFEST + ": '" + t.at("huggingface") + "'"), null);
      } else {
        String encoding = t.string("tiktoken");
        if (!encoding.matches("[A-Za-z0-9_]+")) {
          throw t.invalid("tiktoken", "is \"" + encoding + "\", expected an encoding's name such as r50k_base or "
              + "cl100k_base");
        }
        tokenizer = new TokenizerSpec(null, encoding);
      }
    }

    private void readLimits(ManifestObject top) {
      ManifestObject l = top.object("limits").allowOnly("vocabulary", "context_length");
      boolean tokens = kind != Kind.TENSOR;
      int vocabulary = tokens ? l.integer("vocabulary") : Objects.requireNonNullElse(l.optionalInteger("vocabulary"), 0);
      int context = tokens ? l.integer("context_length")
          : Objects.requireNonNullElse(l.optionalInteger("context_length"), 0);
      if (vocabulary < (tokens ? 1 : 0)) {
        throw l.invalid("vocabulary", "is " + vocabulary + ", expected at least " + (tokens ? 1 : 0));
      }
      if (context < (tokens ? 1 : 0)) {
        throw l.invalid("context_length", "is " + context + ", expected at least " + (tokens ? 1 : 0));
      }
      limits = new Limits(vocabulary, context);
    }

    private void readGeneration(ManifestObject top) {
      ManifestObject g = top.optionalObject("generation");
      if (g == null) {
        return;
      }
      if (kind != Kind.CAUSAL_LM) {
        throw top.invalid("generation", "is for causal-lm packages; this one is " + kind.jsonName() + ": drop it");
      }
      g.allowOnly(GENERATION_KEYS);
      List<Integer> eos = g.optionalIntegers("eos_token_ids");
      if (eos != null) {
        for (int id : eos) {
          tokenId(g, "eos_token_ids", id);
        }
      }
      Integer bos = g.optionalInteger("bos_token_id");
      if (bos != null) {
        tokenId(g, "bos_token_id", bos);
      }
      Integer maxTokens = g.optionalInteger("max_tokens");
      atLeast(g, "max_tokens", maxTokens, 1);
      Float temperature = g.optionalNumber("temperature");
      if (temperature != null && temperature < 0) {
        throw g.invalid("temperature", "is " + temperature + ", expected >= 0 (0 is greedy)");
      }
      Integer topK = g.optionalInteger("top_k");
      atLeast(g, "top_k", topK, 0);
      Float topP = g.optionalNumber("top_p");
      if (topP != null && (topP <= 0 || topP > 1)) {
        throw g.invalid("top_p", "is " + topP + ", expected in (0, 1]");
      }
      Float minP = g.optionalNumber("min_p");
      if (minP != null && (minP < 0 || minP > 1)) {
        throw g.invalid("min_p", "is " + minP + ", expected in [0, 1]");
      }
      Float repetition = g.optionalNumber("repetition_penalty");
      if (repetition != null && repetition <= 0) {
        throw g.invalid("repetition_penalty", "is " + repetition + ", expected > 0 (1 is none)");
      }
      generation = new GenerationDefaults(eos, bos, maxTokens, temperature, topK, topP, minP, repetition);
    }

    private void tokenId(ManifestObject g, String key, int id) {
      if (id < 0 || id >= limits.vocabulary()) {
        throw g.invalid(key, "has token id " + id + ", expected an id in [0, " + limits.vocabulary()
            + ") (limits.vocabulary)");
      }
    }

    private static void atLeast(ManifestObject o, String key, Integer value, int least) {
      if (value != null && value < least) {
        throw o.invalid(key, "is " + value + ", expected at least " + least);
      }
    }

    private void readEmbedding(ManifestObject top) {
      ManifestObject e = top.optionalObject("embedding");
      if (e == null) {
        if (kind == Kind.EMBEDDING) {
          throw top.invalid("embedding", "is required for an embedding package: {\"pooling\": \"mean\" | \"cls\", "
              + "\"normalize\": true | false}");
        }
        return;
      }
      if (kind != Kind.EMBEDDING) {
        throw top.invalid("embedding", "is for embedding packages; this one is " + kind.jsonName() + ": drop it");
      }
      e.allowOnly("pooling", "normalize");
      String pooling = e.string("pooling");
      Pooling p = switch (pooling) {
        case "mean" -> Pooling.MEAN;
        case "cls" -> Pooling.CLS;
        default -> throw e.invalid("pooling", "is \"" + pooling + "\", expected \"mean\" or \"cls\"");
      };
      embedding = new EmbeddingDefaults(p, Boolean.TRUE.equals(e.optionalBoolean("normalize")));
    }

    /** The roles the kind allows and needs; a causal-lm's slot roles at the same slot counts. */
    private void checkRoles() {
      for (ProgramSpec p : programs) {
        if (!kind.roles().contains(p.role())) {
          throw new InvalidArgumentException(MANIFEST + ": program " + p.describe() + " has role "
              + p.role().jsonName() + ", which a package of kind " + kind.jsonName() + " does not have; its roles are "
              + kind.roles().stream().sorted().map(Role::jsonName).toList());
        }
      }
      switch (kind) {
        case CAUSAL_LM -> {
          if (programs.stream().anyMatch(p -> p.role() == Role.PREFILL_CHUNK || p.role() == Role.DECODE_BATCH)) {
            checkChunkedSlots();
          } else {
            checkFixedSlots();
          }
        }
        case EMBEDDING -> needs(Role.EMBED);
        case TENSOR -> needs(Role.MAIN);
        default -> throw new IllegalStateException(kind.toString());
      }
    }

    /** A package of fixed slot programs (importer 1): prefill_slot, decode_slots and slot_cache at the same slot counts. */
    private void checkFixedSlots() {
      Map<Role, Set<Integer>> slots = sizes(Role.PREFILL_SLOT, Role.DECODE_SLOTS, Role.SLOT_CACHE);
      Set<Integer> all = new TreeSet<>();
      slots.values().forEach(all::addAll);
      for (Map.Entry<Role, Set<Integer>> e : slots.entrySet()) {
        if (all.isEmpty() || !e.getValue().equals(all)) {
          Set<Integer> missing = new TreeSet<>(all.isEmpty() ? Set.of() : all);
          missing.removeAll(e.getValue());
          throw new InvalidArgumentException(MANIFEST + ": a causal-lm package needs prefill_slot, decode_slots and "
              + "slot_cache at the same slot counts; " + e.getKey().jsonName() + " is missing"
              + (missing.isEmpty() ? "" : " at slots " + missing) + " (the package has " + describeSlots(slots)
              + "): export it, or drop the other slot programs of that count");
        }
      }
    }

    /**
     * A package of chunked prefill and batched decode (importer 2): prefill_chunk and decode_batch over caches of
     * the same slot counts, each with its slot_cache, and for each count a decode_batch of every slot over the
     * whole context, so that any set of running sequences has a program; score_chunk with a slot_cache too.
     */
    private void checkChunkedSlots() {
      Map<Role, Set<Integer>> slots = sizes(Role.PREFILL_CHUNK, Role.DECODE_BATCH, Role.SLOT_CACHE, Role.SCORE_CHUNK);
      if (!slots.get(Role.PREFILL_CHUNK).equals(slots.get(Role.DECODE_BATCH))) {
        throw new InvalidArgumentException(MANIFEST + ": a causal-lm package needs prefill_chunk and decode_batch over "
            + "caches of the same slot counts (the package has " + describeSlots(slots) + "): export both for each cache");
      }
      for (ProgramSpec p : programs) {
        if (p.role() != Role.SLOT_CACHE && p.role().sizeKey().equals("slots") && !slots.get(Role.SLOT_CACHE).contains(p.size())) {
          throw new InvalidArgumentException(MANIFEST + ": program " + p.describe() + " needs slot_cache at slots " + p.size()
              + " (its cache's maker); the package has slot_cache at " + slots.get(Role.SLOT_CACHE) + ": export it");
        }
      }
      for (int n : slots.get(Role.DECODE_BATCH)) {
        boolean whole = programs.stream().anyMatch(p -> p.role() == Role.DECODE_BATCH && p.size() == n && p.batch() == n
            && p.length() == limits.contextLength());
        if (!whole) {
          throw new InvalidArgumentException(MANIFEST + ": decode_batch over the cache of " + n + " slots has no program of batch "
              + n + " and length " + limits.contextLength() + " (limits.context_length): without it " + n + " sequences, or one "
              + "at the end of the context, could not decode; export it");
        }
      }
    }

    private Map<Role, Set<Integer>> sizes(Role... roles) {
      Map<Role, Set<Integer>> slots = new EnumMap<>(Role.class);
      for (Role r : roles) {
        slots.put(r, programs.stream().filter(p -> p.role() == r).map(ProgramSpec::size)
            .collect(Collectors.toCollection(TreeSet::new)));
      }
      return slots;
    }

    private static String describeSlots(Map<Role, Set<Integer>> slots) {
      return slots.entrySet().stream().map(e -> e.getKey().jsonName() + " at " + e.getValue())
          .collect(Collectors.joining(", "));
    }

    private void needs(Role role) {
      if (programs.stream().noneMatch(p -> p.role() == role)) {
        throw new InvalidArgumentException(MANIFEST + ": a package of kind " + kind.jsonName() + " needs a " + role.jsonName()
            + " program (at one or more batch sizes); it has none");
      }
    }

    private final Map<ProgramSpec, RoleContracts.Split> splits = new LinkedHashMap<>();

    private void checkSignatures() {
      for (ProgramSpec p : programs) {
        splits.put(p, RoleContracts.split(p));
      }
      Map<Integer, List<TensorType>> caches = new TreeMap<>();
      for (ProgramSpec p : programs) {
        if (p.role() == Role.SLOT_CACHE) {
          RoleContracts.check(p, splits.get(p), null, limits.vocabulary(), limits.contextLength());
          caches.put(p.size(), p.export().outputAvals().stream()
              .map(a -> a.toTensorType(RoleContracts.prefix(p) + "output")).toList());
        }
      }
      Long hidden = null;
      for (ProgramSpec p : programs) {
        if (p.role() != Role.SLOT_CACHE) {
          RoleContracts.check(p, splits.get(p), caches.get(p.size()), limits.vocabulary(), limits.contextLength());
        }
        if (p.role() == Role.EMBED) {
          long width = p.export().outputAvals().get(0).toTensorType("hidden").shape().dim(2);
          if (hidden != null && hidden != width) {
            throw RoleContracts.refuse(p, "returns hidden states of width " + width + ", the other embed programs "
                + hidden + ": every embed program is the same model");
          }
          hidden = width;
        }
      }
    }

    /** Each weight a program takes is in the weights with its type; each tensor of the weights is taken. */
    private void checkWeights() {
      Set<String> taken = new LinkedHashSet<>();
      String weightsName = directory.relativize(weightsFile).toString();
      for (ProgramSpec p : programs) {
        RoleContracts.Split s = splits.get(p);
        for (Map.Entry<String, TensorType> w : s.weights().entrySet()) {
          TensorType got = weightTypes.get(w.getKey());
          if (got == null) {
            throw RoleContracts.refuse(p, "takes weight '" + w.getKey() + "' " + w.getValue() + ", which the weights ("
                + weightsName + ") lack (a parameter with no weight): add it to the weights, or export the program "
                + "without it");
          }
          if (!got.equals(w.getValue())) {
            throw RoleContracts.refuse(p, "takes weight '" + w.getKey() + "' as " + w.getValue() + ", but the weights ("
                + weightsName + ") hold it as " + got + ": expected " + w.getValue() + ", got " + got + "; export "
                + "the program from the same checkpoint as the weights");
          }
        }
        List<String> parameters = new ArrayList<>();
        for (String parameter : p.export().parameterNames()) {
          if (s.keptWeights().contains(parameter)) {
            parameters.add(parameter);
          }
        }
        weightParameters.put(p, List.copyOf(parameters));
        taken.addAll(parameters);
      }
      for (Map.Entry<String, TensorType> w : weightTypes.entrySet()) {
        if (!taken.contains(w.getKey())) {
          throw new InvalidArgumentException(MANIFEST + ": the weights (" + weightsName + ") hold tensor '" + w.getKey()
              + "' " + w.getValue() + ", which no program takes (a weight with no parameter; JAX drops inputs a "
              + "function does not use): drop it from the weights, or export a program that uses it");
        }
      }
    }
  }
}
