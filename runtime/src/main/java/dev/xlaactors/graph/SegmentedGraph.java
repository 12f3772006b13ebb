package dev.xlaactors.graph;

import dev.xlaactors.runtime.HostCallback;
import java.util.ArrayList;
import java.util.List;

/**
 * A {@link Graph} cut at its host calls: a plan of pure {@link Stage}s, host calls, and loops and
 * conditionals driven from Java (those whose bodies call the host). Run it with {@link SegmentedProgram}.
 * Immutable; one plan serves every run.
 */
public final class SegmentedGraph {
  /** One step of a plan. */
  sealed interface Step {}

  /** Runs a stage: binds its outputs from its inputs. */
  record StageStep(Stage stage, List<Value> inputs, List<Value> outputs) implements Step {}

  /** Calls a host callback: inputs down to the host, outputs back up. */
  record HostCallStep(HostCallback callback, List<Value> inputs, List<Value> results) implements Step {}

  /** A loop whose condition or body calls the host, driven from Java. */
  record WhileStep(int id, List<Value> initial, List<Value> conditionArguments, Plan condition,
      List<Value> bodyArguments, Plan body, List<Value> results) implements Step {}

  /** A conditional whose branches call the host: the predicate comes down, the chosen branch runs. */
  record IfStep(int id, Value predicate, Plan onTrue, Plan onFalse, List<Value> results) implements Step {}

  /** Steps in order, then the values the plan returns. */
  record Plan(List<Step> steps, List<Value> results) {}

  private final Graph graph;
  private final List<Value> parameters;
  private final Plan plan;
  private final List<Stage> stages;
  private final java.util.Map<Value, Value> aliases;
  private final java.util.Set<Integer> donatedParameters;

  SegmentedGraph(Graph graph, List<Value> parameters, Plan plan, List<Stage> stages, java.util.Map<Value, Value> aliases,
      java.util.Set<Integer> donatedParameters) {
    this.graph = graph;
    this.donatedParameters = java.util.Set.copyOf(donatedParameters);
    this.parameters = parameters;
    this.plan = plan;
    this.stages = List.copyOf(stages);
    this.aliases = aliases;
  }

  /** The graph this plan was cut from. */
  public Graph graph() {
    return graph;
  }

  /** Every stage, in program order (a stage inside a loop is listed once, and runs once per iteration). */
  public List<Stage> stages() {
    return stages;
  }

  /**
   * The graph parameters a run may donate (see {@link SegmentationOptions#donatedParameters()}): each is
   * read by one top-level stage, which writes an output in its memory.
   */
  public java.util.Set<Integer> donatedParameters() {
    return donatedParameters;
  }

  /** The host call sites left after segmentation (inlined ones excluded), nested ones included. */
  public int hostCallSites() {
    return countHostCalls(plan);
  }

  /** The loops and conditionals driven from Java because they call the host. */
  public int hostDrivenControlFlow() {
    return countControl(plan);
  }

  List<Value> parameters() {
    return parameters;
  }

  Plan plan() {
    return plan;
  }

  Value resolve(Value v) {
    Value r = v;
    while (aliases.containsKey(r)) {
      r = aliases.get(r);
    }
    return r;
  }

  private static int countHostCalls(Plan p) {
    int n = 0;
    for (Step s : p.steps()) {
      if (s instanceof HostCallStep) {
        n++;
      } else if (s instanceof WhileStep w) {
        n += countHostCalls(w.condition()) + countHostCalls(w.body());
      } else if (s instanceof IfStep i) {
        n += countHostCalls(i.onTrue()) + countHostCalls(i.onFalse());
      }
    }
    return n;
  }

  private static int countControl(Plan p) {
    int n = 0;
    for (Step s : p.steps()) {
      if (s instanceof WhileStep w) {
        n += 1 + countControl(w.condition()) + countControl(w.body());
      } else if (s instanceof IfStep i) {
        n += 1 + countControl(i.onTrue()) + countControl(i.onFalse());
      }
    }
    return n;
  }

  /** The plan as indented lines: stages with their types, host calls, Java-driven loops and branches. */
  public String describe() {
    List<String> lines = new ArrayList<>();
    describe(plan, "", lines);
    return String.join("\n", lines);
  }

  private static void describe(Plan p, String indent, List<String> lines) {
    for (Step s : p.steps()) {
      if (s instanceof StageStep st) {
        lines.add(indent + st.stage());
      } else if (s instanceof HostCallStep h) {
        lines.add(indent + "host call '" + h.callback().name() + "': "
            + h.inputs().stream().map(Value::type).toList() + " to the host, " + h.callback().outputTemplate() + " back");
      } else if (s instanceof WhileStep w) {
        lines.add(indent + "while#" + w.id() + " driven from Java, carrying "
            + w.initial().stream().map(Value::type).toList() + " on the device");
        lines.add(indent + "  condition (pred[] to the host each iteration):");
        describe(w.condition(), indent + "    ", lines);
        lines.add(indent + "  body:");
        describe(w.body(), indent + "    ", lines);
      } else if (s instanceof IfStep i) {
        lines.add(indent + "if#" + i.id() + " driven from Java (pred[] to the host)");
        lines.add(indent + "  true branch:");
        describe(i.onTrue(), indent + "    ", lines);
        lines.add(indent + "  false branch:");
        describe(i.onFalse(), indent + "    ", lines);
      }
    }
  }

  @Override
  public String toString() {
    return "SegmentedGraph(" + graph.name() + ": " + stages.size() + " stages, " + hostCallSites() + " host call sites)";
  }
}
