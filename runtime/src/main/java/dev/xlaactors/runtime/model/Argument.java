package dev.xlaactors.runtime.model;

import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;

/**
 * One argument of a run: a host tensor (uploaded for the run, freed after it), a device buffer (read, left
 * as it is: the caller keeps owning it) or a donated device buffer (given to the run: PJRT may write the
 * run's output into its memory, as for a KV cache updated in place; the buffer is closed when the run
 * starts and any later use fails naming that run). Only a parameter the program aliases to an output
 * ({@code tf.aliasing_output} or {@code jax.buffer_donor} in its text) takes a donated buffer.
 */
public sealed interface Argument {
  /** The argument's element type and shape. */
  TensorType type();

  /** A host tensor, uploaded for the run. */
  static Argument of(HostTensor tensor) {
    return new Host(tensor);
  }

  /**
   * Host tensors as arguments, in order: how a run on host inputs is written, {@code
   * callbacks.run(model, Argument.of(List.of(x, y)))}. A null element stays null, so the program's check
   * names its position.
   */
  static List<Argument> of(List<HostTensor> tensors) {
    Objects.requireNonNull(tensors, "tensors");
    List<Argument> arguments = new ArrayList<>(tensors.size());
    for (HostTensor t : tensors) {
      arguments.add(t == null ? null : new Host(t));
    }
    return Collections.unmodifiableList(arguments);
  }

  /** A device buffer, read by the run and left to its owner. */
  static Argument of(DeviceBuffer buffer) {
    return new OnDevice(buffer);
  }

  /** A device buffer given to the run: see {@link Argument}. */
  static Argument donated(DeviceBuffer buffer) {
    return new Donated(buffer);
  }

  /** A host tensor argument. */
  record Host(HostTensor tensor) implements Argument {
    public Host {
      Objects.requireNonNull(tensor, "tensor");
    }

    @Override
    public TensorType type() {
      return tensor.type();
    }
  }

  /** A device buffer argument that stays its owner's. */
  record OnDevice(DeviceBuffer buffer) implements Argument {
    public OnDevice {
      Objects.requireNonNull(buffer, "buffer");
    }

    @Override
    public TensorType type() {
      return buffer.type();
    }
  }

  /** A device buffer argument given to the run. */
  record Donated(DeviceBuffer buffer) implements Argument {
    public Donated {
      Objects.requireNonNull(buffer, "buffer");
    }

    @Override
    public TensorType type() {
      return buffer.type();
    }
  }
}
