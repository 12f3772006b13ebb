package dev.xlaactors.runtime.model;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.PluginException;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.CompileOptions;
import dev.xlaactors.runtime.Device;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A {@link ModelPackage} on one device: every program compiled for the device's client (or those of the roles
 * it was loaded for, see {@link ModelPackage#load(Device, PackageXlaOptions, Set)}), each weight uploaded
 * once and bound ({@link Model#bind}, sharing the buffers) to every program that takes it, so a package of a
 * prefill and a decode program holds one copy of its weights.
 *
 * <p>Lifetime: the package owns its {@link Model}s and its weight buffers; {@link #model} and {@link
 * #weight} lend them (do not close them). {@link #close()} closes the models and the weight buffers; runs in
 * flight finish (each model keeps its own shares of the buffers, see {@link Model}), and later runs are
 * refused. Thread-safe; {@link #close()} is idempotent.
 */
public final class LoadedPackage implements AutoCloseable {
  private final ModelPackage modelPackage;
  private final Device device;
  private final Map<Role, SortedMap<Integer, Model>> models;
  private final Map<ProgramSpec, Model> bySpec;
  private final Map<String, DeviceBuffer> weights;
  private final Set<Role> roles;
  private final AtomicBoolean closed = new AtomicBoolean();

  private LoadedPackage(ModelPackage modelPackage, Device device, Map<Role, SortedMap<Integer, Model>> models,
      Map<ProgramSpec, Model> bySpec, Map<String, DeviceBuffer> weights, Set<Role> roles) {
    this.modelPackage = modelPackage;
    this.device = device;
    this.models = models;
    this.bySpec = bySpec;
    this.weights = weights;
    this.roles = roles;
  }

  /** See {@link ModelPackage#load(Device, PackageXlaOptions, Set)}. */
  static LoadedPackage load(ModelPackage pkg, Device device, PackageXlaOptions xlaOptions, Set<Role> roles) {
    Objects.requireNonNull(pkg, "pkg");
    Objects.requireNonNull(device, "device");
    Objects.requireNonNull(xlaOptions, "xlaOptions");
    Objects.requireNonNull(roles, "roles");
    Set<Role> loadedRoles = roles.isEmpty() ? EnumSet.noneOf(Role.class) : EnumSet.copyOf(roles);
    List<ProgramSpec> programs = pkg.programs().stream().filter(p -> loadedRoles.contains(p.role())).toList();
    if (programs.isEmpty()) {
      throw new InvalidArgumentException("model package '" + pkg.name() + "' has no program of the roles " + names(loadedRoles)
          + " it was asked to load; it has " + names(EnumSet.copyOf(pkg.programs().stream().map(ProgramSpec::role).toList())));
    }
    XlaClient client = device.client();
    List<Executable> compiled = new ArrayList<>();
    Map<String, DeviceBuffer> weights = new LinkedHashMap<>();
    Map<Role, SortedMap<Integer, Model>> models = new EnumMap<>(Role.class);
    Map<ProgramSpec, Model> bySpec = new LinkedHashMap<>();
    boolean loaded = false;
    try (WeightFiles files = pkg.openWeights()) {
      if (!files.types().equals(pkg.weightTypes())) {
        throw new InvalidArgumentException("model package " + pkg.directory() + ": the weights changed since the "
            + "package was opened (they hold " + files.types() + ", it checked " + pkg.weightTypes() + "): open it again");
      }
      // Compile everything first: a program that does not compile fails before anything is uploaded.
      for (ProgramSpec p : programs) {
        compiled.add(compile(pkg, p, client, xlaOptions, callsNativeKernels(p.export().module())));
      }
      for (String name : pkg.weightTypes().keySet()) {
        try (HostTensor tensor = files.tensor(name)) { // an in-place upload keeps the mapping itself
          weights.put(name, client.upload(tensor, device));
        }
      }
      for (int i = 0; i < compiled.size(); i++) {
        ProgramSpec p = programs.get(i);
        Model model = bind(pkg, p, compiled.get(i), weights, device);
        bySpec.put(p, model);
        // Roles with several programs per size (chunk lengths, decode windows) are reached by their spec only.
        if (pkg.programs().stream().filter(q -> q.role() == p.role() && q.size() == p.size()).count() == 1) {
          models.computeIfAbsent(p.role(), r -> new TreeMap<>()).put(p.size(), model);
        }
      }
      loaded = true;
    } finally {
      compiled.forEach(Executable::close); // each model keeps its own view
      if (!loaded) {
        bySpec.values().forEach(Model::close);
        weights.values().forEach(DeviceBuffer::close);
      }
    }
    // Loading leaves freed native memory behind in the allocator's arenas (a compile's working memory, a
    // tokenizer's parse): give it back to the system, so that it does not stay resident for the process's life.
    org.bytedeco.javacpp.Pointer.trimMemory();
    Map<Role, SortedMap<Integer, Model>> byRole = new EnumMap<>(Role.class);
    models.forEach((role, bySize) -> byRole.put(role, Collections.unmodifiableSortedMap(bySize)));
    return new LoadedPackage(pkg, device, Collections.unmodifiableMap(byRole), Collections.unmodifiableMap(bySpec),
        Collections.unmodifiableMap(weights), Collections.unmodifiableSet(loadedRoles));
  }

  private static List<String> names(Set<Role> roles) {
    return roles.stream().map(Role::jsonName).toList();
  }

  /**
   * Whether {@code module} (a program's bytes) calls one of the bridge's native kernels ({@code xla_actors.*}
   * other than host callbacks): custom-call targets are plain strings inside bytecode too.
   */
  static boolean callsNativeKernels(byte[] module) {
    String text = new String(module, java.nio.charset.StandardCharsets.ISO_8859_1);
    String bridge = XlaClient.BRIDGE_TARGET_PREFIX;
    for (int at = text.indexOf(bridge); at >= 0; at = text.indexOf(bridge, at + 1)) {
      if (!text.startsWith(HostCallback.TARGET, at)) {
        return true;
      }
    }
    return false;
  }

  private static Executable compile(ModelPackage pkg, ProgramSpec p, XlaClient client, PackageXlaOptions options,
      boolean nativeKernels) {
    Map<String, String> xlaOptions = options.of(p.role(), nativeKernels);
    try {
      return p.export().compile(client, CompileOptions.defaults().withXlaOptions(xlaOptions));
    } catch (PluginException e) { // an XLA option the build refuses: name where it was set
      if (xlaOptions.isEmpty()) {
        throw e;
      }
      PluginException named = new PluginException(e.code(), "program " + p.describe() + " of model package '"
          + pkg.name() + "' is compiled with " + PackageXlaOptions.KEY + "." + p.role().jsonName()
          + (nativeKernels && !xlaOptions.equals(options.of(p.role())) ? " (with " + PackageXlaOptions.NATIVE_KERNELS_KEY + "."
              + p.role().jsonName() + " on top, as it calls the native kernels)" : "") + " = " + xlaOptions
          + ": " + e.getMessage());
      named.initCause(e);
      throw named;
    }
  }

  private static Model bind(ModelPackage pkg, ProgramSpec p, Executable exe, Map<String, DeviceBuffer> weights,
      Device device) {
    Map<String, DeviceBuffer> bound = new LinkedHashMap<>();
    List<DeviceBuffer> constants = new ArrayList<>();
    try {
      for (Map.Entry<String, HostTensor> c : p.export().constants(device.client()).entrySet()) {
        DeviceBuffer b = device.client().upload(c.getValue(), device);
        constants.add(b);
        bound.put(c.getKey(), b);
      }
      for (String name : pkg.weightParameters(p)) {
        bound.put(name, weights.get(name));
      }
      return Model.bind(exe, p.export().parameterNames(), bound);
    } finally {
      constants.forEach(DeviceBuffer::close); // the model holds its own share
    }
  }

  /** The package this is a load of. */
  public ModelPackage modelPackage() {
    return modelPackage;
  }

  /** The device everything lives on. */
  public Device device() {
    return device;
  }

  /**
   * The model of {@code role} at {@code size} (its batch or slots), lent: the package closes it. Refused
   * naming the role and the sizes there are.
   */
  public Model model(Role role, int size) {
    Model model = models(role).get(size);
    if (model == null) {
      throw new InvalidArgumentException("model package '" + modelPackage.name() + "' has no " + role.jsonName()
          + " program at " + role.sizeKey() + " " + size + "; it has " + role.jsonName() + " at "
          + (models(role).isEmpty() ? "no " + role.sizeKey() : role.sizeKey() + " " + models(role).keySet()));
    }
    return model;
  }

  /**
   * The model of program {@code spec} (one of {@link ModelPackage#programs()}), lent: the package closes it. The
   * way to reach a role that has several programs per size (prefill_chunk, decode_batch, score_chunk).
   */
  public Model model(ProgramSpec spec) {
    checkOpen();
    checkLoaded(Objects.requireNonNull(spec, "spec").role());
    Model model = bySpec.get(spec);
    if (model == null) {
      throw new InvalidArgumentException("model package '" + modelPackage.name() + "' has no program " + spec.describe());
    }
    return model;
  }

  /**
   * The models of {@code role} by size (empty when the package has none), lent: the package closes them. A role
   * with several programs of one size (chunk lengths, decode windows) is not here at that size: see {@link
   * #model(ProgramSpec)}.
   */
  public SortedMap<Integer, Model> models(Role role) {
    Objects.requireNonNull(role, "role");
    checkOpen();
    checkLoaded(role);
    return models.getOrDefault(role, Collections.emptySortedMap());
  }

  /**
   * The roles it was loaded for: every role unless {@link ModelPackage#load(Device, PackageXlaOptions, Set)} named
   * some. Of those, it holds the programs the package has.
   */
  public Set<Role> roles() {
    return roles;
  }

  /** Refuses {@code role} when the package was loaded without its programs, naming the roles it has and the fix. */
  private void checkLoaded(Role role) {
    if (!roles.contains(role)) {
      throw new XlaException(ErrorCode.FAILED_PRECONDITION, "model package '" + modelPackage.name() + "' on " + device
          + " was loaded with the programs of " + names(roles) + " only, not " + role.jsonName()
          + ": load it with that role too (ModelPackage.load(device, xlaOptions, roles))");
    }
  }

  /** The weight called {@code name} on the device, lent: the package closes it. Refused for a name it lacks. */
  public DeviceBuffer weight(String name) {
    checkOpen();
    DeviceBuffer b = weights.get(Objects.requireNonNull(name, "name"));
    if (b == null) {
      throw new InvalidArgumentException("model package '" + modelPackage.name() + "' has no weight '" + name
          + "'; it has " + weights.size() + ": " + weights.keySet().stream().limit(20).toList());
    }
    return b;
  }

  /** The weights' types, as {@link ModelPackage#weightTypes()}. */
  public Map<String, TensorType> weightTypes() {
    return modelPackage.weightTypes();
  }

  private void checkOpen() {
    if (closed.get()) {
      throw new XlaException(ErrorCode.FAILED_PRECONDITION, "model package '" + modelPackage.name() + "' on " + device
          + " is closed: load it again");
    }
  }

  /** Closes the models and the weight buffers (runs in flight finish); idempotent and thread-safe. */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    bySpec.values().forEach(Model::close);
    weights.values().forEach(DeviceBuffer::close);
  }

  @Override
  public String toString() {
    return "LoadedPackage(" + modelPackage.name() + " on " + device + (closed.get() ? ", closed)" : ")");
  }
}
