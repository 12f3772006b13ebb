package dev.xlaactors.runtime;

/**
 * Where a run's host calls go. Called on the XLA thread that made the call, which then blocks until the
 * call is answered: implementations hand the call on (for example, tell an actor) and return at once.
 * An exception thrown here fails the call and so the run.
 */
@FunctionalInterface
public interface HostCallSink {
  void accept(HostCall call);
}
