package dev.xlaactors.graph;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.graph.SegmentedGraph.HostCallStep;
import dev.xlaactors.graph.SegmentedGraph.IfStep;
import dev.xlaactors.graph.SegmentedGraph.Plan;
import dev.xlaactors.graph.SegmentedGraph.StageStep;
import dev.xlaactors.graph.SegmentedGraph.Step;
import dev.xlaactors.graph.SegmentedGraph.WhileStep;
import dev.xlaactors.runtime.TensorType;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;

/**
 * Cuts a graph at its host calls. Operations between two host calls (in program order, at one nesting
 * level) form a stage; a loop or conditional whose regions call the host becomes a step driven from Java
 * whose regions are cut the same way; loops and conditionals without host calls stay inside their stage.
 * Each stage takes the values defined outside it that it uses, and returns the values it defines that
 * later steps or the enclosing plan's results use, so nothing is computed twice and nothing unused
 * crosses a boundary. A pure host call whose results nothing uses is dropped, as XLA may drop it.
 */
final class Segmenter {
  private final String name;
  private final boolean inline;
  private final Map<Value, Value> aliases = new IdentityHashMap<>();
  private final List<Stage> stages = new ArrayList<>();
  // Donated graph parameters (resolved) -> their position; the stages that alias them, by value.
  private final Map<Value, Integer> donated = new IdentityHashMap<>();
  private final Map<Value, Stage> donorStages = new IdentityHashMap<>();
  private int controlIds;

  private Segmenter(String name, boolean inline) {
    this.name = name;
    this.inline = inline;
  }

  static SegmentedGraph segment(Graph graph, SegmentationOptions options) {
    if (options == null) {
      throw new InvalidArgumentException("segmentation options are null; use SegmentationOptions.defaults()");
    }
    if (graph.body() == null) {
      throw new InvalidArgumentException("graph '" + graph.name() + "' was made from text and has no recorded "
          + "operations, so it cannot be segmented; build it with GraphBuilder, or run it fused");
    }
    Segmenter s = new Segmenter(graph.name(), options.inlineCallbacks());
    List<Value> parameters = graph.body().parameters();
    for (int p : options.donatedParameters()) {
      if (p >= parameters.size()) {
        throw new InvalidArgumentException("graph '" + graph.name() + "': donated parameter " + p + " does not exist; "
            + "it has " + parameters.size() + " parameter(s) " + graph.parameterTypes());
      }
      s.donated.put(parameters.get(p), p);
    }
    List<Op> ops = s.expand(graph.body().ops());
    Plan plan = s.plan(ops, s.resolveAll(graph.body().outputs()), "top");
    s.checkDonations(plan);
    return new SegmentedGraph(graph, parameters, plan, s.stages, s.aliases, options.donatedParameters());
  }

  // ---------------------------------------------------------------------------------------------
  // Donation

  /**
   * Each donated parameter must be read by exactly one step, a top-level stage that aliased it to an
   * output: a donated buffer is consumed by the stage that reads it, so nothing may read it after, and a
   * stage in a loop or a branch may run several times or not at all.
   */
  private void checkDonations(Plan plan) {
    for (Map.Entry<Value, Integer> e : donated.entrySet()) {
      List<String> uses = new ArrayList<>();
      collectUses(plan, e.getKey(), uses);
      Stage donor = donorStages.get(e.getKey());
      if (donor == null || uses.size() != 1) {
        throw new InvalidArgumentException("graph '" + name + "': parameter " + e.getValue() + " (" + e.getKey().type()
            + ") is donated, so exactly one top-level stage with an output of its type may read it, but it is read by "
            + (uses.isEmpty() ? "nothing" : uses)
            + (donor == null && uses.size() == 1 ? " (no top-level stage with an output of type " + e.getKey().type() + ")" : "")
            + "; do not donate it, or pass a copy to the other readers");
      }
    }
  }

  private void collectUses(Plan plan, Value v, List<String> uses) {
    for (Step step : plan.steps()) {
      if (step instanceof StageStep s && s.inputs().contains(v)) {
        uses.add(s.stage().toString());
      } else if (step instanceof HostCallStep h && h.inputs().contains(v)) {
        uses.add("host call '" + h.callback().name() + "'");
      } else if (step instanceof WhileStep w) {
        if (w.initial().contains(v)) {
          uses.add("while#" + w.id());
        }
        collectUses(w.condition(), v, uses);
        collectUses(w.body(), v, uses);
      } else if (step instanceof IfStep i) {
        if (i.predicate() == v) {
          uses.add("if#" + i.id());
        }
        collectUses(i.onTrue(), v, uses);
        collectUses(i.onFalse(), v, uses);
      }
    }
    if (plan.results().contains(v)) {
      uses.add("the results");
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Inlining

  /** Replaces inlinable host calls by their graph equivalents, at every nesting level. */
  private List<Op> expand(List<Op> ops) {
    List<Op> out = new ArrayList<>(ops.size());
    for (Op op : ops) {
      if (inline && op.isHostCall() && op.equivalent() != null) {
        Op.Region eq = op.equivalent();
        for (int i = 0; i < eq.arguments().size(); i++) {
          aliases.put(eq.arguments().get(i), op.operands().get(i));
        }
        for (int i = 0; i < op.results().size(); i++) {
          aliases.put(op.results().get(i), eq.results().get(i));
        }
        out.addAll(expand(eq.ops()));
      } else if (!op.regions().isEmpty()) {
        List<Op.Region> regions = new ArrayList<>();
        for (Op.Region r : op.regions()) {
          regions.add(new Op.Region(r.arguments(), expand(r.ops()), r.results()));
        }
        out.add(new Op(op.mlirOp(), op.operands(), regions, op.attributes(), op.results(), op.callback(),
            op.equivalent()));
      } else {
        out.add(op);
      }
    }
    return out;
  }

  private Value resolve(Value v) {
    Value r = v;
    while (aliases.containsKey(r)) {
      r = aliases.get(r);
    }
    return r;
  }

  private List<Value> resolveAll(List<Value> values) {
    return values.stream().map(this::resolve).toList();
  }

  // ---------------------------------------------------------------------------------------------
  // Cutting

  private static boolean callsHost(Op op) {
    if (op.isHostCall()) {
      return true;
    }
    for (Op.Region r : op.regions()) {
      for (Op inner : r.ops()) {
        if (callsHost(inner)) {
          return true;
        }
      }
    }
    return false;
  }

  private static boolean effectful(Op op) {
    return op.attributes() != null && op.attributes().contains("has_side_effect = true");
  }

  /** A plan for {@code ops} (one nesting level) returning {@code results} (already resolved). */
  private Plan plan(List<Op> ops, List<Value> results, String where) {
    // Groups: a list of pure ops, or one op that calls the host.
    List<Object> groups = new ArrayList<>();
    List<Op> pure = new ArrayList<>();
    for (Op op : ops) {
      if (callsHost(op)) {
        if (!pure.isEmpty()) {
          groups.add(pure);
          pure = new ArrayList<>();
        }
        groups.add(op);
      } else {
        pure.add(op);
      }
    }
    if (!pure.isEmpty()) {
      groups.add(pure);
    }
    // Backward liveness: what each group must return, and which groups are dead.
    Set<Value> live = Collections.newSetFromMap(new IdentityHashMap<>());
    live.addAll(results);
    Object[] outputs = new Object[groups.size()];
    for (int g = groups.size() - 1; g >= 0; g--) {
      Object group = groups.get(g);
      if (group instanceof Op op) {
        boolean used = op.results().stream().anyMatch(v -> live.contains(resolve(v)));
        if (op.isHostCall() && !effectful(op) && !used) {
          continue; // a pure call nobody uses: dropped, as XLA may drop it
        }
        outputs[g] = Boolean.TRUE;
        live.addAll(freeValues(List.of(op)));
      } else {
        @SuppressWarnings("unchecked")
        List<Op> stageOps = (List<Op>) group;
        List<Value> out = new ArrayList<>();
        for (Op op : stageOps) {
          for (Value v : op.results()) {
            if (live.contains(v)) {
              out.add(v);
            }
          }
        }
        if (!out.isEmpty()) {
          outputs[g] = out;
          live.addAll(freeValues(stageOps));
        }
      }
    }
    // Forward: build the steps, numbering stages in program order.
    List<Step> steps = new ArrayList<>();
    for (int g = 0; g < groups.size(); g++) {
      if (outputs[g] == null) {
        continue;
      }
      Object group = groups.get(g);
      if (group instanceof Op op) {
        steps.add(hostStep(op, where));
      } else {
        @SuppressWarnings("unchecked")
        List<Op> stageOps = (List<Op>) group;
        @SuppressWarnings("unchecked")
        List<Value> out = (List<Value>) outputs[g];
        steps.add(stage(stageOps, new ArrayList<>(freeValues(stageOps)), out, where));
      }
    }
    return new Plan(steps, results);
  }

  private Step hostStep(Op op, String where) {
    if (op.isHostCall()) {
      return new HostCallStep(op.callback(), resolveAll(op.operands()), op.results());
    }
    if (op.mlirOp().equals("stablehlo.while")) {
      int id = controlIds++;
      Op.Region cond = op.regions().get(0);
      Op.Region body = op.regions().get(1);
      String at = where + "/while#" + id;
      Plan condPlan = plan(cond.ops(), resolveAll(cond.results()), at + ".condition");
      Plan bodyPlan = plan(body.ops(), resolveAll(body.results()), at + ".body");
      return new WhileStep(id, resolveAll(op.operands()), cond.arguments(), condPlan, body.arguments(), bodyPlan,
          op.results());
    }
    if (op.mlirOp().equals("stablehlo.if")) {
      int id = controlIds++;
      String at = where + "/if#" + id;
      Plan onTrue = plan(op.regions().get(0).ops(), resolveAll(op.regions().get(0).results()), at + ".true");
      Plan onFalse = plan(op.regions().get(1).ops(), resolveAll(op.regions().get(1).results()), at + ".false");
      return new IfStep(id, resolve(op.operands().get(0)), onTrue, onFalse, op.results());
    }
    throw new InvalidArgumentException("graph '" + name + "': " + op.mlirOp() + " calls the host inside its regions, "
        + "which segmentation supports only for while and if; run this graph fused");
  }

  /** Values {@code ops} use that they do not define (resolved), in first-use order. */
  private Set<Value> freeValues(List<Op> ops) {
    Set<Value> defined = Collections.newSetFromMap(new IdentityHashMap<>());
    Set<Value> free = new LinkedHashSet<>();
    collectFree(ops, defined, free);
    return free;
  }

  private void collectFree(List<Op> ops, Set<Value> defined, Set<Value> free) {
    for (Op op : ops) {
      for (Value v : op.operands()) {
        useValue(v, defined, free);
      }
      for (Op.Region r : op.regions()) {
        defined.addAll(r.arguments());
        collectFree(r.ops(), defined, free);
        for (Value v : r.results()) {
          useValue(v, defined, free);
        }
      }
      defined.addAll(op.results());
    }
  }

  private void useValue(Value v, Set<Value> defined, Set<Value> free) {
    Value r = resolve(v);
    if (!defined.contains(r)) {
      free.add(r);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Emitting a stage

  private StageStep stage(List<Op> ops, List<Value> inputs, List<Value> outputs, String where) {
    int index = stages.size();
    Map<Value, String> names = new IdentityHashMap<>();
    for (int i = 0; i < inputs.size(); i++) {
      names.put(inputs.get(i), "%s" + i);
    }
    Function<Value, String> namer = v -> {
      Value r = resolve(v);
      String n = names.get(r);
      return n != null ? n : r.ssaName();
    };
    List<TensorType> inTypes = inputs.stream().map(Value::type).toList();
    List<TensorType> outTypes = outputs.stream().map(Value::type).toList();
    StringBuilder sb = new StringBuilder();
    sb.append("module @").append(name).append("_stage").append(index).append(" {\n");
    sb.append("  func.func public @main(");
    java.util.Set<Integer> aliasedOutputs = new java.util.HashSet<>();
    List<Value> donors = new ArrayList<>();
    for (int i = 0; i < inputs.size(); i++) {
      sb.append(i > 0 ? ", " : "").append("%s").append(i).append(": ").append(inTypes.get(i).mlir());
      int alias = where.equals("top") && donated.containsKey(inputs.get(i)) ? aliasFor(inTypes.get(i), outTypes, aliasedOutputs) : -1;
      if (alias >= 0) {
        aliasedOutputs.add(alias);
        donors.add(inputs.get(i));
        sb.append(" {tf.aliasing_output = ").append(alias).append(" : i32}");
      }
    }
    sb.append(") -> (").append(StableHloWriter.types(outTypes)).append(") {\n");
    emitOps(ops, namer, "    ", sb);
    sb.append("    ").append(StableHloWriter.terminator("func.return", outputs, namer)).append('\n');
    sb.append("  }\n}\n");
    Stage stage = new Stage(index, where, inTypes, outTypes, sb.toString());
    stages.add(stage);
    donors.forEach(v -> donorStages.put(v, stage));
    return new StageStep(stage, inputs, outputs);
  }

  /** The first output of {@code type} not yet aliased, or -1. */
  private static int aliasFor(TensorType type, List<TensorType> outputs, java.util.Set<Integer> taken) {
    for (int k = 0; k < outputs.size(); k++) {
      if (outputs.get(k).equals(type) && !taken.contains(k)) {
        return k;
      }
    }
    return -1;
  }

  private static void emitOps(List<Op> ops, Function<Value, String> namer, String indent, StringBuilder sb) {
    for (Op op : ops) {
      List<String> regions = new ArrayList<>();
      for (Op.Region r : op.regions()) {
        StringBuilder body = new StringBuilder();
        emitOps(r.ops(), namer, indent + "    ", body);
        body.append(indent).append("    ").append(StableHloWriter.terminator("stablehlo.return", r.results(), namer))
            .append('\n');
        regions.add(StableHloWriter.region(r.arguments(), body.toString(), indent + "  "));
      }
      String first = op.results().get(0).ssaName();
      String declared = op.results().size() == 1 ? first
          : first.substring(0, first.indexOf('#')) + ":" + op.results().size();
      sb.append(indent).append(StableHloWriter.op(declared, op.mlirOp(), op.operands(), regions, op.attributes(),
          op.results().stream().map(Value::type).toList(), namer)).append('\n');
    }
  }
}
