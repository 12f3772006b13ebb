package dev.xlaactors.cluster;

import dev.xlaactors.actors.jobs.Program;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.model.Model;
import dev.xlaactors.runtime.model.SegmentedModel;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

/**
 * A {@link ShardedComputations.ComputationCatalog} of programs and of models bound on this node: each
 * model is named, and its supplier loads it on this node (typically {@code Model.load(export,
 * SafeTensors.open(path), device)}: weights uploaded once to this node's device). A supplier is called at
 * most once per node while it succeeds, the first time an entity of the model starts on this node (or
 * at once, {@link #loadAll}); the model is then kept, across entity restarts and passivation, until
 * {@link #close}. A supplier that throws is called again by the next entity start. On a node that only
 * sends runs (no role) the suppliers are never called: the names serve to refuse unknown ids at once.
 *
 * <pre>{@code
 * ModelCatalog catalog = ModelCatalog.of(Map.of(), Map.of("dense", () -> loadDense(client)));
 * ShardedComputations computations = ShardedComputations.init(system, "compute", client, callbacks, catalog);
 * // any node: only the per-request inputs travel
 * computations.run("dense", List.of(x), Duration.ofSeconds(10));
 * }</pre>
 *
 * <p>Thread-safe. Close it after the actor system has terminated (the loaded models are closed).
 */
public final class ModelCatalog implements ShardedComputations.ComputationCatalog, AutoCloseable {
  private final Map<String, Program> programs;
  private final Map<String, Supplier<Model>> suppliers;
  private final Map<String, Supplier<SegmentedModel>> segmentedSuppliers;
  private final Set<String> ids;
  private final Map<String, AutoCloseable> loaded = new ConcurrentHashMap<>(); // a Model or a SegmentedModel
  private volatile boolean closed;

  private ModelCatalog(Map<String, Program> programs, Map<String, Supplier<Model>> suppliers,
      Map<String, Supplier<SegmentedModel>> segmentedSuppliers, Set<String> ids) {
    this.programs = programs;
    this.suppliers = suppliers;
    this.segmentedSuppliers = segmentedSuppliers;
    this.ids = ids;
  }

  /**
   * A catalog of {@code programs} (compiled by each entity, as {@link
   * ShardedComputations.ComputationCatalog#of}) and {@code models} (loaded once per node by their
   * suppliers). A name in both is refused.
   */
  public static ModelCatalog of(Map<String, Program> programs, Map<String, Supplier<Model>> models) {
    return of(programs, models, Map.of());
  }

  /**
   * As {@link #of(Map, Map)}, with segmented models too ({@code SegmentedModel}: stages with host calls
   * between them, weights bound once), each loaded once per node by its supplier. {@link #close} closes
   * a loaded segmented model and its program (the supplier made both for this catalog). An id given twice
   * is refused.
   */
  public static ModelCatalog of(Map<String, Program> programs, Map<String, Supplier<Model>> models,
      Map<String, Supplier<SegmentedModel>> segmentedModels) {
    Map<String, Program> p = Map.copyOf(programs);
    Map<String, Supplier<Model>> m = Map.copyOf(models);
    Map<String, Supplier<SegmentedModel>> sm = Map.copyOf(segmentedModels);
    Set<String> ids = new TreeSet<>();
    Set<String> twice = new TreeSet<>();
    for (Set<String> names : List.of(p.keySet(), m.keySet(), sm.keySet())) {
      for (String n : names) {
        if (!ids.add(n)) {
          twice.add(n);
        }
      }
    }
    if (!twice.isEmpty()) {
      throw new InvalidArgumentException("ids " + twice + " are given more than once (as a program, a model or a "
          + "segmented model); give each id one of them");
    }
    return new ModelCatalog(p, m, sm, Collections.unmodifiableSet(ids));
  }

  @Override
  public Optional<Program> program(String id) {
    return Optional.ofNullable(programs.get(id));
  }

  @Override
  public Set<String> ids() {
    return ids;
  }

  /**
   * The model {@code id}, loaded on first use (the supplier's exceptions pass through; nothing is kept
   * then); empty for an id that names no model. Refused with FAILED_PRECONDITION once the catalog is closed.
   */
  @Override
  public Optional<Model> model(String id) {
    Supplier<Model> supplier = suppliers.get(id);
    return supplier == null ? Optional.empty() : Optional.of(load(id, supplier));
  }

  /** As {@link #model}, for the segmented models. */
  @Override
  public Optional<SegmentedModel> segmentedModel(String id) {
    Supplier<SegmentedModel> supplier = segmentedSuppliers.get(id);
    return supplier == null ? Optional.empty() : Optional.of(load(id, supplier));
  }

  @SuppressWarnings("unchecked") // the loaded value of an id is what that id's supplier returned
  private <M extends AutoCloseable> M load(String id, Supplier<M> supplier) {
    checkOpen(id);
    M model = (M) loaded.computeIfAbsent(id, name -> Objects.requireNonNull(supplier.get(),
        () -> "the supplier of model '" + name + "' returned null"));
    if (closed) { // closed while it loaded: do not keep it
      if (loaded.remove(id, model)) {
        closeLoaded(model);
      }
      checkOpen(id);
    }
    return model;
  }

  private static void closeLoaded(AutoCloseable model) {
    if (model instanceof SegmentedModel segmented) {
      segmented.close();
      segmented.program().close();
    } else if (model instanceof Model m) {
      m.close();
    }
  }

  /** Whether model {@code id} is loaded on this node now. */
  public boolean isLoaded(String id) {
    return loaded.containsKey(id);
  }

  /** Loads every model now, in name order (a node that should pay the loads at start, not at first use). */
  public ModelCatalog loadAll() {
    for (String id : new TreeSet<>(suppliers.keySet())) {
      model(id);
    }
    for (String id : new TreeSet<>(segmentedSuppliers.keySet())) {
      segmentedModel(id);
    }
    return this;
  }

  private void checkOpen(String id) {
    if (closed) {
      throw new XlaException(ErrorCode.FAILED_PRECONDITION, "model '" + id + "': the model catalog is closed");
    }
  }

  /**
   * Closes the loaded models (a model's runs in flight finish first: it closes when its last run ends;
   * a segmented model's program is closed at once, so close the catalog after the actor system).
   */
  @Override
  public void close() {
    closed = true;
    for (String id : Set.copyOf(loaded.keySet())) {
      AutoCloseable m = loaded.remove(id);
      if (m != null) {
        closeLoaded(m);
      }
    }
  }

  @Override
  public String toString() {
    return "ModelCatalog(programs " + new TreeSet<>(programs.keySet()) + ", models " + new TreeSet<>(suppliers.keySet())
        + ", segmented models " + new TreeSet<>(segmentedSuppliers.keySet()) + ")";
  }
}
