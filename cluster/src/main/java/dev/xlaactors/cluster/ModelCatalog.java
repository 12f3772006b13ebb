package dev.xlaactors.cluster;

import dev.xlaactors.actors.jobs.Program;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.model.Model;
import java.util.Collections;
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
  private final Set<String> ids;
  private final Map<String, Model> loaded = new ConcurrentHashMap<>();
  private volatile boolean closed;

  private ModelCatalog(Map<String, Program> programs, Map<String, Supplier<Model>> suppliers, Set<String> ids) {
    this.programs = programs;
    this.suppliers = suppliers;
    this.ids = ids;
  }

  /**
   * A catalog of {@code programs} (compiled by each entity, as {@link
   * ShardedComputations.ComputationCatalog#of}) and {@code models} (loaded once per node by their
   * suppliers). A name in both is refused.
   */
  public static ModelCatalog of(Map<String, Program> programs, Map<String, Supplier<Model>> models) {
    Map<String, Program> p = Map.copyOf(programs);
    Map<String, Supplier<Model>> m = Map.copyOf(models);
    Set<String> both = new TreeSet<>(p.keySet());
    both.retainAll(m.keySet());
    if (!both.isEmpty()) {
      throw new InvalidArgumentException("ids " + both + " name both a program and a model; give each id one of them");
    }
    Set<String> ids = new TreeSet<>(p.keySet());
    ids.addAll(m.keySet());
    return new ModelCatalog(p, m, Collections.unmodifiableSet(ids));
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
    if (supplier == null) {
      return Optional.empty();
    }
    checkOpen(id);
    Model model = loaded.computeIfAbsent(id, name -> Objects.requireNonNull(supplier.get(),
        () -> "the supplier of model '" + name + "' returned null"));
    if (closed) { // closed while it loaded: do not keep it
      loaded.remove(id, model);
      model.close();
      checkOpen(id);
    }
    return Optional.of(model);
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
    return this;
  }

  private void checkOpen(String id) {
    if (closed) {
      throw new XlaException(ErrorCode.FAILED_PRECONDITION, "model '" + id + "': the model catalog is closed");
    }
  }

  /** Closes the loaded models (runs in flight finish first: a model closes when its last run ends). */
  @Override
  public void close() {
    closed = true;
    for (String id : Set.copyOf(loaded.keySet())) {
      Model m = loaded.remove(id);
      if (m != null) {
        m.close();
      }
    }
  }

  @Override
  public String toString() {
    return "ModelCatalog(programs " + new TreeSet<>(programs.keySet()) + ", models " + new TreeSet<>(suppliers.keySet()) + ")";
  }
}
