package dev.xlaactors.actors.serve;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.runtime.Shape;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.model.LoadedPackage;
import dev.xlaactors.runtime.model.Model;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.ProgramSpec;
import dev.xlaactors.runtime.model.Role;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.SortedMap;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * One model compiled at a few batch sizes: a {@link Model} per size, each taking every input and giving
 * every output with that size as its leading dimension (as {@code jax.export} writes a function exported
 * at batch 1, 2, 4, ... 32). A {@link ModelServer} pads a batch of requests to the smallest size that
 * holds it ({@link #sizeFor}); a request's inputs and outputs are the model's minus that leading dimension
 * ({@link #requestInputTypes()}, {@link #requestOutputTypes()}).
 *
 * <p>Each size is compiled once, by whoever made its Model, and kept here for the server's life. A model
 * package's batched model ({@link #of(LoadedPackage, Role)}, the usual way) borrows the package's Models:
 * the {@link LoadedPackage} closes them, and {@link #close()} leaves them open. One made of Models given
 * by hand ({@link #of(String, Map)}) owns them: {@link #close()} closes every one (runs in progress finish
 * first, see {@link Model#close()}). Immutable and thread-safe.
 */
public final class BatchedModel implements AutoCloseable {
  private final String name;
  private final SortedMap<Integer, Model> bySize;
  private final List<String> inputNames;
  private final List<TensorType> requestInputs;
  private final List<TensorType> requestOutputs;
  private final boolean ownsModels;
  private final List<String> hostCallbacks;

  private BatchedModel(String name, SortedMap<Integer, Model> bySize, List<TensorType> requestInputs,
      List<TensorType> requestOutputs, boolean ownsModels, List<String> hostCallbacks) {
    this.name = name;
    this.ownsModels = ownsModels;
    this.hostCallbacks = List.copyOf(hostCallbacks);
    this.bySize = Collections.unmodifiableSortedMap(bySize);
    this.inputNames = bySize.get(bySize.firstKey()).inputNames();
    this.requestInputs = List.copyOf(requestInputs);
    this.requestOutputs = List.copyOf(requestOutputs);
  }

  /**
   * The model {@code name} (the name its settings are found under, {@code
   * xla-actors.actors.serve.models.<name>}) compiled at each size of {@code bySize}. Every Model must take
   * at least one input; every input and output of each must have its size as the leading dimension, and
   * the rest of each type must agree across sizes. Anything else fails here naming the size, the input or
   * output, expected vs got. Takes ownership of the Models.
   */
  public static BatchedModel of(String name, Map<Integer, Model> bySize) {
    return checked(name, bySize, true, List.of());
  }

  private static BatchedModel checked(String name, Map<Integer, Model> bySize, boolean ownsModels, List<String> hostCallbacks) {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(bySize, "bySize");
    if (name.isBlank()) {
      throw new InvalidArgumentException("a batched model needs a name (its settings are under xla-actors.actors.serve.models.<name>)");
    }
    if (bySize.isEmpty()) {
      throw new InvalidArgumentException("batched model '" + name + "' needs at least one batch size and its Model, got none");
    }
    SortedMap<Integer, Model> sorted = new TreeMap<>();
    List<TensorType> inputs = null;
    List<TensorType> outputs = null;
    List<String> names = null;
    int reference = 0;
    for (Map.Entry<Integer, Model> e : new TreeMap<>(bySize).entrySet()) {
      int size = Objects.requireNonNull(e.getKey(), "batch size");
      Model m = Objects.requireNonNull(e.getValue(), () -> "model of batch size " + size);
      if (size < 1 || size > ServeSettings.MAX_BATCH) {
        throw new InvalidArgumentException("batched model '" + name + "': batch size " + size + " is out of range: it must be from 1 to "
            + ServeSettings.MAX_BATCH);
      }
      if (m.inputTypes().isEmpty()) {
        throw new InvalidArgumentException("batched model '" + name + "' at batch size " + size
            + " takes no per-request input: a served model needs at least one (the batch dimension is read from it)");
      }
      List<TensorType> in = unbatched(name, size, "input", m.inputNames(), m.inputTypes());
      List<String> outNames = new ArrayList<>();
      for (int i = 0; i < m.outputTypes().size(); i++) {
        outNames.add("output " + i);
      }
      List<TensorType> out = unbatched(name, size, "output", outNames, m.outputTypes());
      if (inputs == null) {
        inputs = in;
        outputs = out;
        names = m.inputNames();
        reference = size;
      } else {
        if (!in.equals(inputs) || !m.inputNames().equals(names)) {
          throw new InvalidArgumentException("batched model '" + name + "': at batch size " + size + " a request's inputs are "
              + describe(m.inputNames(), in) + ", at batch size " + reference + " " + describe(names, inputs)
              + ": every size must be the same program exported at another batch size");
        }
        if (!out.equals(outputs)) {
          throw new InvalidArgumentException("batched model '" + name + "': at batch size " + size + " a request's outputs are "
              + out + ", at batch size " + reference + " " + outputs + ": every size must be the same program exported at another batch size");
        }
      }
      sorted.put(size, m);
    }
    return new BatchedModel(name, sorted, inputs, outputs, ownsModels, hostCallbacks);
  }

  /**
   * The programs of {@code role} of a loaded package, by batch size, named as the package ({@link
   * ModelPackage#name()}: its settings are under {@code xla-actors.actors.serve.models.<name>}), checked as
   * {@link #of(String, Map)}. The package's {@link ModelPackage#hostCallbacks()} become {@link
   * #hostCallbacks()}, which a {@link ModelServer} checks against its runtime before it serves.
   *
   * <p>The package keeps its Models: this batched model borrows them, and its {@link #close()} leaves them
   * open. Close {@code loaded} once the servers of this model have stopped.
   */
  public static BatchedModel of(LoadedPackage loaded, Role role) {
    Objects.requireNonNull(loaded, "loaded");
    Objects.requireNonNull(role, "role");
    ModelPackage pkg = loaded.modelPackage();
    if (loaded.models(role).isEmpty()) {
      throw new InvalidArgumentException("model package '" + pkg.name() + "' has no " + role.jsonName() + " program to "
          + "serve; its programs are " + pkg.programs().stream().map(ProgramSpec::describe).toList());
    }
    if (!role.sizeKey().equals("batch")) {
      throw new InvalidArgumentException("model package '" + pkg.name() + "': " + role.jsonName() + " programs are sized by "
          + role.sizeKey() + ", not batch: a batched model serves programs exported at several batch sizes (main, score, embed)");
    }
    return checked(pkg.name(), loaded.models(role), false, pkg.hostCallbacks());
  }

  /** The types minus their leading (batch) dimension, which must be {@code size}. */
  private static List<TensorType> unbatched(String name, int size, String what, List<String> names, List<TensorType> types) {
    List<TensorType> result = new ArrayList<>();
    for (int i = 0; i < types.size(); i++) {
      TensorType t = types.get(i);
      if (t.shape().rank() == 0 || t.shape().dim(0) != size) {
        throw new InvalidArgumentException("batched model '" + name + "': the Model given for batch size " + size + " has " + what + " "
            + i + " '" + names.get(i) + "' of type " + t + ", expected a leading (batch) dimension of " + size
            + ": give each Model under the batch size it was exported at");
      }
      long[] dims = t.shape().dims();
      result.add(new TensorType(t.dtype(), Shape.of(Arrays.copyOfRange(dims, 1, dims.length))));
    }
    return result;
  }

  static String describe(List<String> names, List<TensorType> types) {
    List<String> parts = new ArrayList<>();
    for (int i = 0; i < types.size(); i++) {
      parts.add(names.get(i) + ": " + types.get(i));
    }
    return parts.toString();
  }

  /** The model's name. */
  public String name() {
    return name;
  }

  /** The compiled batch sizes, ascending. */
  public SortedSet<Integer> batchSizes() {
    return Collections.unmodifiableSortedSet(new TreeSet<>(bySize.keySet()));
  }

  /** The largest compiled batch size. */
  public int largestBatch() {
    return bySize.lastKey();
  }

  /** The names of a request's inputs, in order. */
  public List<String> inputNames() {
    return inputNames;
  }

  /** The types of a request's inputs: the model's input types minus the batch dimension. */
  public List<TensorType> requestInputTypes() {
    return requestInputs;
  }

  /** The types of a request's outputs: the model's output types minus the batch dimension. */
  public List<TensorType> requestOutputTypes() {
    return requestOutputs;
  }

  /** The smallest compiled batch size that holds {@code requests} requests (at most {@link #largestBatch()}). */
  public int sizeFor(int requests) {
    if (requests < 1 || requests > largestBatch()) {
      throw new IllegalArgumentException("batched model '" + name + "': no compiled size holds " + requests + " requests; sizes "
          + bySize.keySet());
    }
    return bySize.tailMap(requests).firstKey();
  }

  /** The Model compiled at {@code batchSize} (one of {@link #batchSizes()}). */
  public Model model(int batchSize) {
    Model m = bySize.get(batchSize);
    if (m == null) {
      throw new IllegalArgumentException("batched model '" + name + "' has no batch size " + batchSize + "; sizes " + bySize.keySet());
    }
    return m;
  }

  /**
   * The host callbacks its programs call, each of which must be registered on the runtime that serves it
   * ({@link dev.xlaactors.actors.CallbackRuntime#checkCallbacks(String, java.util.Collection)}); empty for a
   * model made by {@link #of(String, Map)}, which the caller vouches for.
   */
  public List<String> hostCallbacks() {
    return hostCallbacks;
  }

  /**
   * Closes every Model it owns (runs in progress finish first): those given to {@link #of(String, Map)}.
   * The Models of a package ({@link #of(LoadedPackage, Role)}) are the package's: this leaves them open.
   */
  @Override
  public void close() {
    if (ownsModels) {
      bySize.values().forEach(Model::close);
    }
  }

  @Override
  public String toString() {
    return "BatchedModel(" + name + ", sizes " + bySize.keySet() + ", request inputs " + describe(inputNames, requestInputs) + ")";
  }
}
