package dev.xlaactors.actors.serve;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.runtime.Device;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.Shape;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.model.JaxExport;
import dev.xlaactors.runtime.model.Model;
import dev.xlaactors.runtime.model.SafeTensors;
import java.util.LinkedHashMap;
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
 * <p>Each size is compiled once, by whoever made its Model, and kept here for the server's life. The
 * batched model owns its Models: {@link #close()} closes every one (runs in progress finish first, see
 * {@link Model#close()}). Immutable and thread-safe.
 */
public final class BatchedModel implements AutoCloseable {
  private final String name;
  private final SortedMap<Integer, Model> bySize;
  private final List<String> inputNames;
  private final List<TensorType> requestInputs;
  private final List<TensorType> requestOutputs;

  private BatchedModel(String name, SortedMap<Integer, Model> bySize, List<TensorType> requestInputs,
      List<TensorType> requestOutputs) {
    this.name = name;
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
    return new BatchedModel(name, sorted, inputs, outputs);
  }

  /**
   * The model {@code name} as shipped: one {@code jax.export} artifact per batch size (the same function
   * exported at each), each compiled once for {@code device}'s client, and the tensors of {@code weights}
   * uploaded to {@code device} once and bound, shared, to the parameter of their name in every size (as
   * {@link Model#load(JaxExport, SafeTensors, Device)} binds one). The weights file may be closed once this
   * returns. A weight without a parameter of its name, or of another type, fails naming it.
   */
  public static BatchedModel load(String name, Map<Integer, JaxExport> bySize, SafeTensors weights, Device device) {
    Objects.requireNonNull(bySize, "bySize");
    Objects.requireNonNull(weights, "weights");
    Objects.requireNonNull(device, "device");
    Map<String, DeviceBuffer> uploaded = new LinkedHashMap<>();
    Map<Integer, Model> models = new TreeMap<>();
    try {
      for (String tensor : weights.types().keySet()) {
        uploaded.put(tensor, device.client().upload(weights.tensor(tensor), device));
      }
      for (Map.Entry<Integer, JaxExport> e : new TreeMap<>(bySize).entrySet()) {
        JaxExport export = Objects.requireNonNull(e.getValue(), () -> "export of batch size " + e.getKey());
        Map<String, DeviceBuffer> bound = new LinkedHashMap<>(uploaded);
        List<DeviceBuffer> constants = new ArrayList<>();
        try {
          for (Map.Entry<String, HostTensor> c : export.constants(device.client()).entrySet()) {
            DeviceBuffer b = device.client().upload(c.getValue(), device);
            constants.add(b);
            bound.put(c.getKey(), b);
          }
          try (Executable exe = export.compile(device.client())) {
            models.put(e.getKey(), Model.bind(exe, export.parameterNames(), bound));
          }
        } finally {
          constants.forEach(DeviceBuffer::close); // the Model shares what it keeps
        }
      }
      return of(name, models);
    } catch (RuntimeException e) {
      models.values().forEach(Model::close);
      throw e;
    } finally {
      uploaded.values().forEach(DeviceBuffer::close);
    }
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

  /** Closes every Model (runs in progress finish first). */
  @Override
  public void close() {
    bySize.values().forEach(Model::close);
  }

  @Override
  public String toString() {
    return "BatchedModel(" + name + ", sizes " + bySize.keySet() + ", request inputs " + describe(inputNames, requestInputs) + ")";
  }
}
