package dev.xlaactors.runtime;

import java.util.List;

/**
 * Java code a compiled program calls in the middle of its execution. It receives the call's inputs (read
 * only, owned by Java, safe to keep) and the static argument captured when the callback was registered,
 * and returns one tensor per entry of the callback's output template. The actors module runs it on its
 * callback dispatcher, so it may block; a slow function never stalls other runs' callbacks.
 */
@FunctionalInterface
public interface HostFunction {
  List<HostTensor> apply(List<HostTensor> inputs, Object staticArgument) throws Exception;

  /**
   * A host function whose static argument has the type {@code S} it was built with (see {@link
   * HostCallback#of}), so it needs no cast.
   *
   * @param <S> the static argument's type
   */
  @FunctionalInterface
  interface Typed<S> {
    List<HostTensor> apply(List<HostTensor> inputs, S staticArgument) throws Exception;
  }
}
