package dev.xlaactors.actors.jobs;

import dev.xlaactors.graph.Graph;
import dev.xlaactors.runtime.HostCallback;
import java.util.List;
import java.util.Objects;

/**
 * A program a {@link ComputationActor} compiles and serves: StableHLO text with a {@code @main}, and the
 * host callbacks it calls that the actor registers before compiling (a built {@link Graph} knows them;
 * for hand-written text they are registered by the caller, or listed here).
 *
 * @param name how logs and error messages call the program
 * @param stablehlo the program text
 * @param hostCallbacks callbacks to register with the {@code CallbackRuntime} before compiling
 */
public record Program(String name, String stablehlo, List<HostCallback> hostCallbacks) {
  public Program {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(stablehlo, "stablehlo");
    hostCallbacks = List.copyOf(hostCallbacks);
  }

  /** The program of a built graph, with the graph's host callbacks. */
  public static Program of(Graph graph) {
    return new Program(graph.name(), graph.stablehlo(), graph.hostCallbacks());
  }

  /** Hand-written StableHLO text; callbacks it calls must be registered by the caller. */
  public static Program ofText(String name, String stablehlo) {
    return new Program(name, stablehlo, List.of());
  }

  /** Whether the program calls back into Java, so it must run through a {@code CallbackRuntime}. */
  public boolean callsHost() {
    return !hostCallbacks.isEmpty() || stablehlo.contains(HostCallback.TARGET);
  }

  @Override
  public String toString() {
    return "Program(" + name + ")";
  }
}
