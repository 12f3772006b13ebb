package dev.xlaactors.runtime;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.List;
import java.util.Objects;

/**
 * A host callback as a program uses it: the name the program calls, the types it returns (its output
 * template: one tensor type, or several for a tuple), a static argument captured when the program was
 * built, and the Java function. Register it with the actors module's {@code CallbackRuntime} before
 * running a program that calls it.
 *
 * @param name the name programs use in {@code backend_config = {callback = "<name>"}}
 * @param outputTemplate the result types, in order
 * @param staticArgument passed to every call of the function (may be null)
 * @param function the Java code to run
 */
public record HostCallback(String name, List<TensorType> outputTemplate, Object staticArgument, HostFunction function) {
  public HostCallback {
    if (name == null || name.isBlank() || name.contains("\"") || name.contains("\\")) {
      throw new InvalidArgumentException("a host callback needs a name without quotes or backslashes, got '" + name + "'");
    }
    Objects.requireNonNull(function, "function");
    if (outputTemplate == null || outputTemplate.isEmpty() || outputTemplate.stream().anyMatch(Objects::isNull)) {
      throw new InvalidArgumentException("host callback '" + name + "' needs at least one output type, got " + outputTemplate);
    }
    outputTemplate = List.copyOf(outputTemplate);
  }

  /**
   * A host callback whose function receives {@code staticArgument} as an {@code S}, not an {@code Object}:
   * {@code HostCallback.of("threshold", List.of(type), 0.2f, (inputs, limit) -> ... limit ...)} with
   * {@code limit} a {@code Float}.
   */
  public static <S> HostCallback of(String name, List<TensorType> outputTemplate, S staticArgument, HostFunction.Typed<S> function) {
    Objects.requireNonNull(function, "function");
    @SuppressWarnings("unchecked") // the only value ever passed is staticArgument itself, an S
    HostFunction untyped = (inputs, s) -> function.apply(inputs, (S) s);
    return new HostCallback(name, outputTemplate, staticArgument, untyped);
  }

  /** The name of the FFI handler the native bridge registers for host callbacks. */
  public static final String TARGET = "xla_actors.host_callback";
}
