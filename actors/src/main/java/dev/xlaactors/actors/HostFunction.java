package dev.xlaactors.actors;

import dev.xlaactors.runtime.HostTensor;
import java.util.List;

/**
 * Java code a compiled program calls in the middle of its execution. It receives the call's inputs (read
 * only, owned by Java, safe to keep) and the static argument captured when the callback was registered,
 * and returns one tensor per entry of the callback's output template. It runs on the callback dispatcher
 * (see reference.conf), so it may block; a slow function never stalls other runs' callbacks.
 */
@FunctionalInterface
public interface HostFunction {
  List<HostTensor> apply(List<HostTensor> inputs, Object staticArgument) throws Exception;
}
