package dev.xlaactors.cluster;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.jobs.Program;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.LoadedPackage;
import dev.xlaactors.runtime.model.Model;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.Role;
import dev.xlaactors.runtime.model.SegmentedModel;
import java.nio.file.Path;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

/**
 * A {@link ShardedComputations.ComputationCatalog} of programs and of models bound on this node. The usual
 * model is a model package ({@link #ofPackages}): each id names a package directory, opened, checked and
 * loaded ({@code ModelPackage.open(dir).load(device)}: weights uploaded once to this node's first device)
 * the first time an entity of the id starts on this node (or at once, {@link #loadAll}); a run of the id
 * runs the package's {@code main} program at its smallest batch. Models that are not packages (a
 * segmented model, a program bound by hand) are given by suppliers ({@link #of(Map, Map, Map)}). A load
 * happens at most once per node while it succeeds; the model is then kept, across entity restarts and
 * passivation, until {@link #close}. A load that throws is tried again by the next entity start. On a
 * node that only sends runs (no role) nothing is opened or loaded: the ids serve to refuse unknown ids at
 * once.
 *
 * <pre>{@code
 * ModelCatalog catalog = ModelCatalog.ofPackages(Map.of(), Map.of("dense", Path.of("models/dense")), client, callbacks);
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
  private final Map<String, Supplier<LoadedPackage>> packageSuppliers;
  private final Set<String> ids;
  // A Model, a SegmentedModel or a LoadedPackage, by id.
  private final Map<String, AutoCloseable> loaded = new ConcurrentHashMap<>();
  private volatile boolean closed;

  private ModelCatalog(Map<String, Program> programs, Map<String, Supplier<Model>> suppliers,
      Map<String, Supplier<SegmentedModel>> segmentedSuppliers, Map<String, Supplier<LoadedPackage>> packageSuppliers,
      Set<String> ids) {
    this.programs = programs;
    this.suppliers = suppliers;
    this.segmentedSuppliers = segmentedSuppliers;
    this.packageSuppliers = packageSuppliers;
    this.ids = ids;
  }

  /**
   * A catalog of {@code programs} (compiled by each entity, as {@link
   * ShardedComputations.ComputationCatalog#of}) and of model packages, by id: {@code packages} maps each id
   * to a package directory (as this node sees it; the id need not be the package's name). On a node that
   * serves an id, its first entity opens the package, refuses it while any of its {@code host_callbacks} is
   * not registered on {@code callbacks} ({@link CallbackRuntime#checkCallbacks}; a package that calls none
   * may have null {@code callbacks}), loads it on {@code client}'s first device (null on a node that only
   * sends runs: it never loads), and runs its {@code main}
   * program at the smallest batch (a package without one is refused naming its programs). {@link #close}
   * closes the loaded packages. An id given twice is refused.
   */
  public static ModelCatalog ofPackages(Map<String, Program> programs, Map<String, Path> packages, XlaClient client,
      CallbackRuntime callbacks) {
    Map<String, Supplier<LoadedPackage>> suppliers = new TreeMap<>();
    packages.forEach((id, dir) -> suppliers.put(id, () -> loadPackage(id, dir, client, callbacks)));
    return of(programs, Map.of(), Map.of(), suppliers);
  }

  private static LoadedPackage loadPackage(String id, Path dir, XlaClient client, CallbackRuntime callbacks) {
    if (client == null) {
      throw new XlaException(ErrorCode.FAILED_PRECONDITION, "model '" + id + "': this node's catalog was given no "
          + "XlaClient (ModelCatalog.ofPackages), so it cannot load package " + dir + ": give one on the nodes that serve it");
    }
    ModelPackage pkg = ModelPackage.open(dir);
    if (pkg.programs(Role.MAIN).isEmpty()) {
      throw new InvalidArgumentException("model '" + id + "': package " + dir + " (kind " + pkg.kind().jsonName()
          + ") has no main program, which a run of the catalog runs; its programs are "
          + pkg.programs().stream().map(p -> p.describe()).toList());
    }
    if (!pkg.hostCallbacks().isEmpty()) {
      if (callbacks == null) {
        throw new XlaException(ErrorCode.FAILED_PRECONDITION, "model '" + id + "': package " + dir + " calls host callbacks "
            + pkg.hostCallbacks() + ", but the catalog was given no CallbackRuntime (ModelCatalog.ofPackages)");
      }
      callbacks.checkCallbacks(pkg);
    }
    return pkg.load(client.devices().get(0));
  }

  /**
   * A catalog of {@code programs} (compiled by each entity, as {@link
   * ShardedComputations.ComputationCatalog#of}) and of models that are not packages, each loaded once per
   * node by its supplier: {@code models} bound by hand, and {@code segmentedModels} ({@code
   * SegmentedModel}: stages with host calls between them, weights bound once). {@link #close} closes a
   * loaded model, and a loaded segmented model and its program (the supplier made both for this catalog).
   * An id given twice is refused. A model that is a package belongs in {@link #ofPackages}.
   */
  public static ModelCatalog of(Map<String, Program> programs, Map<String, Supplier<Model>> models,
      Map<String, Supplier<SegmentedModel>> segmentedModels) {
    return of(programs, models, segmentedModels, Map.of());
  }

  private static ModelCatalog of(Map<String, Program> programs, Map<String, Supplier<Model>> models,
      Map<String, Supplier<SegmentedModel>> segmentedModels, Map<String, Supplier<LoadedPackage>> packages) {
    Map<String, Program> p = Map.copyOf(programs);
    Map<String, Supplier<Model>> m = Map.copyOf(models);
    Map<String, Supplier<SegmentedModel>> sm = Map.copyOf(segmentedModels);
    Map<String, Supplier<LoadedPackage>> pk = Map.copyOf(packages);
    Set<String> ids = new TreeSet<>();
    Set<String> twice = new TreeSet<>();
    for (Set<String> names : List.of(p.keySet(), m.keySet(), sm.keySet(), pk.keySet())) {
      for (String n : names) {
        if (!ids.add(n)) {
          twice.add(n);
        }
      }
    }
    if (!twice.isEmpty()) {
      throw new InvalidArgumentException("ids " + twice + " are given more than once (as a program, a model, a "
          + "segmented model or a package); give each id one of them");
    }
    return new ModelCatalog(p, m, sm, pk, Collections.unmodifiableSet(ids));
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
   * The model {@code id}, loaded on first use (the supplier's or the package's exceptions pass through;
   * nothing is kept then); for a package, its {@code main} program at the smallest batch, lent by the
   * package this catalog keeps. Empty for an id that names no model. Refused with FAILED_PRECONDITION once
   * the catalog is closed.
   */
  @Override
  public Optional<Model> model(String id) {
    Supplier<LoadedPackage> pkg = packageSuppliers.get(id);
    if (pkg != null) {
      SortedMap<Integer, Model> main = load(id, pkg).models(Role.MAIN);
      return Optional.of(main.get(main.firstKey()));
    }
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
    } else if (model instanceof LoadedPackage p) {
      p.close();
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
    for (String id : new TreeSet<>(packageSuppliers.keySet())) {
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
        + ", segmented models " + new TreeSet<>(segmentedSuppliers.keySet()) + ", packages "
        + new TreeSet<>(packageSuppliers.keySet()) + ")";
  }
}
