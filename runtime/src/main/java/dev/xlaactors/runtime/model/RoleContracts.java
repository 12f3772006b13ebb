package dev.xlaactors.runtime.model;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.TensorType;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The input and output contract of each {@link Role} (the role table of docs/model-package.md), checked
 * against a program's {@code jax.export} signature before anything is compiled or uploaded.
 */
final class RoleContracts {
  private static final Pattern POSITIONAL = Pattern.compile("^\\[(\\d+)\\]");

  private RoleContracts() {}

  /**
   * A program's inputs, split: the leaves of its first argument (the flat dict of weights) by name, which of
   * them the module keeps (JAX drops unused inputs: only those become parameters), and the input indices of
   * each positional argument after it, in order.
   */
  record Split(Map<String, TensorType> weights, Set<String> keptWeights, List<List<Integer>> arguments) {}

  static Split split(ProgramSpec p) {
    JaxExport e = p.export();
    List<String> paths = e.inputPaths();
    List<String> names = e.inputNames();
    Set<Integer> kept = new HashSet<>(e.keptInputs());
    Map<String, TensorType> weights = new LinkedHashMap<>();
    Set<String> keptWeights = new LinkedHashSet<>();
    TreeMap<Integer, List<Integer>> positional = new TreeMap<>();
    for (int i = 0; i < paths.size(); i++) {
      String path = paths.get(i);
      Matcher m = POSITIONAL.matcher(path);
      if (!m.find()) {
        throw refuse(p, "input " + i + " " + path + " is a keyword argument; a program takes the weights dict and "
            + "the role's positional inputs only: export f(weights, *inputs)");
      }
      int argument = Integer.parseInt(m.group(1));
      if (argument == 0) {
        if (path.equals("[0]") || names.get(i).equals(path)) {
          throw refuse(p, "input " + i + " " + path + " is not a string key of a flat dict: the first argument must "
              + "be the flat dict of weights keyed by the tensors' names in the weights (f(weights, *inputs))");
        }
        weights.put(names.get(i), e.inputAvals().get(i).toTensorType(prefix(p) + "weight '" + names.get(i) + "'"));
        if (kept.contains(i)) {
          keptWeights.add(names.get(i));
        }
      } else {
        positional.computeIfAbsent(argument, k -> new ArrayList<>()).add(i);
      }
    }
    int expected = 1;
    for (int argument : positional.keySet()) {
      if (argument != expected++) {
        throw refuse(p, "has no positional argument " + (expected - 1) + " but has argument " + argument
            + ": export f(weights, *inputs) with every input an array (or, for the cache, a tree of arrays)");
      }
    }
    return new Split(Collections.unmodifiableMap(weights), Collections.unmodifiableSet(keptWeights),
        List.copyOf(positional.values()));
  }

  /**
   * Checks {@code p}'s positional inputs and its outputs against its role. {@code cache} is the output of the
   * {@code slot_cache} of the same slots (for the slot roles; null otherwise); {@code vocabulary} and {@code
   * contextLength} are the manifest's limits (0 where not set).
   */
  static void check(ProgramSpec p, Split s, List<TensorType> cache, int vocabulary, int contextLength) {
    int size = p.size();
    int length = p.length();
    if (p.role().hasLength() && contextLength > 0 && length > contextLength) {
      throw refuse(p, "has length " + length + ", longer than limits.context_length " + contextLength
          + ": export it for at most " + contextLength + " positions, or raise the limit");
    }
    List<TensorType> outputs = outputTypes(p);
    String sizes = p.role().sizeKey() + " " + size + (p.role().hasLength() ? ", length " + length : "");
    switch (p.role()) {
      case SCORE -> {
        arguments(p, s, 1, "tokens");
        input(p, s, 1, "tokens", TensorType.of(DType.S32, size, length), sizes);
        outputs(p, outputs, List.of(TensorType.of(DType.F32, size, length, vocabulary)), "logits f32[B,T,V]");
      }
      case PREFILL_SLOT -> {
        arguments(p, s, 4, "tokens, length, slot, cache");
        input(p, s, 1, "tokens", TensorType.of(DType.S32, 1, length), "one prompt of length " + length);
        input(p, s, 2, "length", TensorType.of(DType.S32), "a scalar");
        input(p, s, 3, "slot", TensorType.of(DType.S32), "a scalar");
        cacheInput(p, s, 4, cache);
        outputs(p, outputs, withCache(TensorType.of(DType.F32, 1, vocabulary), cache), "logits f32[1,V], then the cache");
      }
      case PREFILL_CHUNK -> {
        arguments(p, s, 5, "tokens, start, last, slot, cache");
        input(p, s, 1, "tokens", TensorType.of(DType.S32, 1, length), "one chunk of " + length + " prompt tokens");
        input(p, s, 2, "start", TensorType.of(DType.S32), "a scalar");
        input(p, s, 3, "last", TensorType.of(DType.S32), "a scalar");
        input(p, s, 4, "slot", TensorType.of(DType.S32), "a scalar");
        cacheInput(p, s, 5, cache);
        outputs(p, outputs, withCache(TensorType.of(DType.F32, 1, vocabulary), cache), "logits f32[1,V], then the cache");
      }
      case SCORE_CHUNK -> {
        arguments(p, s, 4, "tokens, start, slot, cache");
        input(p, s, 1, "tokens", TensorType.of(DType.S32, 1, length), "one chunk of " + length + " tokens");
        input(p, s, 2, "start", TensorType.of(DType.S32), "a scalar");
        input(p, s, 3, "slot", TensorType.of(DType.S32), "a scalar");
        cacheInput(p, s, 4, cache);
        outputs(p, outputs, withCache(TensorType.of(DType.F32, 1, length, vocabulary), cache),
            "logits f32[1,C,V], then the cache");
      }
      case DECODE_BATCH -> {
        String rows = "batch " + p.batch();
        arguments(p, s, 4, "tokens, positions, slots, cache");
        input(p, s, 1, "tokens", TensorType.of(DType.S32, p.batch()), rows);
        input(p, s, 2, "positions", TensorType.of(DType.S32, p.batch()), rows);
        input(p, s, 3, "slots", TensorType.of(DType.S32, p.batch()), rows);
        cacheInput(p, s, 4, cache);
        outputs(p, outputs, withCache(TensorType.of(DType.F32, p.batch(), vocabulary), cache), "logits f32[B,V], then the cache");
      }
      case DECODE_SLOTS -> {
        arguments(p, s, 3, "tokens, positions, cache");
        input(p, s, 1, "tokens", TensorType.of(DType.S32, size), sizes);
        input(p, s, 2, "positions", TensorType.of(DType.S32, size), sizes);
        cacheInput(p, s, 3, cache);
        outputs(p, outputs, withCache(TensorType.of(DType.F32, size, vocabulary), cache), "logits f32[S,V], then the cache");
      }
      case SLOT_CACHE -> {
        arguments(p, s, 0, "none");
        if (outputs.isEmpty()) {
          throw refuse(p, "returns nothing; expected the cache (any arrays) of " + size + " slots");
        }
      }
      case EMBED -> {
        arguments(p, s, 2, "tokens, mask");
        input(p, s, 1, "tokens", TensorType.of(DType.S32, size, length), sizes);
        input(p, s, 2, "mask", TensorType.of(DType.S32, size, length), sizes);
        if (outputs.size() != 1 || outputs.get(0).dtype() != DType.F32 || outputs.get(0).shape().rank() != 3
            || outputs.get(0).shape().dim(0) != size || outputs.get(0).shape().dim(1) != length) {
          throw refuse(p, "returns " + outputs + ", expected one output: hidden f32[" + size + "," + length + ",D]");
        }
      }
      case MAIN -> {
        for (int a = 1; a <= s.arguments().size(); a++) {
          for (int i : s.arguments().get(a - 1)) {
            leadingDimension(p, "input " + p.export().inputPaths().get(i),
                p.export().inputAvals().get(i).toTensorType(prefix(p) + "input " + i), size);
          }
        }
        for (int o = 0; o < outputs.size(); o++) {
          leadingDimension(p, "output " + o, outputs.get(o), size);
        }
      }
      default -> throw new IllegalStateException(p.role().toString());
    }
  }

  private static List<TensorType> outputTypes(ProgramSpec p) {
    List<TensorType> types = new ArrayList<>();
    List<JaxExport.Aval> avals = p.export().outputAvals();
    for (int o = 0; o < avals.size(); o++) {
      types.add(avals.get(o).toTensorType(prefix(p) + "output " + o));
    }
    return types;
  }

  private static List<TensorType> withCache(TensorType first, List<TensorType> cache) {
    List<TensorType> all = new ArrayList<>();
    all.add(first);
    all.addAll(cache);
    return all;
  }

  private static void arguments(ProgramSpec p, Split s, int count, String names) {
    if (s.arguments().size() != count) {
      throw refuse(p, "takes " + s.arguments().size() + " input(s) after the weights, expected " + count + " ("
          + names + "), as the role table of docs/model-package.md says");
    }
  }

  private static void input(ProgramSpec p, Split s, int argument, String name, TensorType expected, String why) {
    List<Integer> leaves = s.arguments().get(argument - 1);
    JaxExport e = p.export();
    if (leaves.size() != 1 || !e.inputPaths().get(leaves.get(0)).equals("[" + argument + "]")) {
      throw refuse(p, "input " + argument + " '" + name + "' is a tree of " + leaves.size() + " arrays, expected one "
          + "array " + expected);
    }
    int i = leaves.get(0);
    TensorType got = e.inputAvals().get(i).toTensorType(prefix(p) + "input " + argument + " '" + name + "'");
    if (!got.equals(expected)) {
      throw refuse(p, "input " + argument + " '" + name + "' is " + got + ", expected " + expected + " (" + why
          + "): export the program with that input, or fix the manifest");
    }
    kept(p, i, argument, name);
  }

  private static void cacheInput(ProgramSpec p, Split s, int argument, List<TensorType> cache) {
    List<Integer> leaves = s.arguments().get(argument - 1);
    List<TensorType> got = new ArrayList<>();
    for (int i : leaves) {
      got.add(p.export().inputAvals().get(i).toTensorType(prefix(p) + "input " + p.export().inputPaths().get(i)));
    }
    if (!got.equals(cache)) {
      throw refuse(p, "input " + argument + " 'cache' is " + got + ", expected " + cache + ", what slot_cache of "
          + p.size() + " slots returns: export both with the same cache");
    }
    for (int i : leaves) {
      kept(p, i, argument, "cache");
    }
  }

  /** A role's input the module dropped could not be passed to a run: the callers pass every input. */
  private static void kept(ProgramSpec p, int input, int argument, String name) {
    if (!p.export().keptInputs().contains(input)) {
      throw refuse(p, "input " + argument + " '" + name + "' is not used by the program, so JAX dropped it from the "
          + "module and a run could not pass it: the role's contract has it; use it in the exported function");
    }
  }

  private static void outputs(ProgramSpec p, List<TensorType> got, List<TensorType> expected, String what) {
    if (!got.equals(expected)) {
      throw refuse(p, "returns " + got + ", expected " + expected + " (" + what + ", V = limits.vocabulary"
          + "): export the program with those outputs, or fix the manifest");
    }
  }

  private static void leadingDimension(ProgramSpec p, String what, TensorType type, int batch) {
    if (type.shape().rank() == 0 || type.shape().dim(0) != batch) {
      throw refuse(p, what + " is " + type + ", expected its first dimension to be the batch " + batch
          + " (a main program is served by batches of B): fix the manifest's batch or export with that batch");
    }
  }

  static String prefix(ProgramSpec p) {
    return "program " + p.describe() + ": ";
  }

  static InvalidArgumentException refuse(ProgramSpec p, String what) {
    return new InvalidArgumentException(ModelPackage.MANIFEST + ": " + prefix(p) + what);
  }
}
