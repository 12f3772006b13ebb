package dev.xlaactors.runtime.model;

import dev.xlaactors.runtime.Device;
import dev.xlaactors.runtime.TensorType;
import java.util.List;
import java.util.Set;

/**
 * A compiled program ready to run on per-request inputs, with its weights (none, some or all of its
 * parameters) bound to device buffers uploaded once: the one handle a supervised run takes. It is either
 * a {@link Model} (one fused executable; {@link Model#of} for a program with nothing bound) or a {@link
 * SegmentedModel} (stages with host calls between them; {@link SegmentedModel#of} for a program with
 * nothing bound). A run passes {@link #inputNames()} in order as {@link Argument}s (host tensors, device
 * buffers, donated buffers; {@link Argument#of(List)} turns host tensors into arguments), and gets its
 * outputs on the host or, left on the device, owned by the caller.
 *
 * <p>Lifetime and thread-safety are those of the two kinds: closing is idempotent, runs in flight finish,
 * later runs fail naming the program; any number of threads may run it at once.
 */
public sealed interface BoundProgram extends AutoCloseable permits Model, SegmentedModel {
  /** The program's name (the executable's, or the segmented graph's). */
  String name();

  /** The names of every parameter, in order, bound ones included. */
  List<String> parameterNames();

  /** The names of the per-request inputs a run takes, in order. */
  List<String> inputNames();

  /** The types of the per-request inputs a run takes, in order. */
  List<TensorType> inputTypes();

  /** The types of the outputs, in order. */
  List<TensorType> outputTypes();

  /** The device the bound buffers live on, and where outputs left on the device are. */
  Device device();

  /** The names of the per-request inputs a run may donate ({@link Argument#donated}). */
  Set<String> donatableInputs();

  /** Frees what the program holds once its runs in flight have ended; idempotent. */
  @Override
  void close();
}
