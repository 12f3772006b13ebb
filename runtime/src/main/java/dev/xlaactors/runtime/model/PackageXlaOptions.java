package dev.xlaactors.runtime.model;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigValue;
import com.typesafe.config.ConfigValueType;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.CompileOptions;
import dev.xlaactors.runtime.KnownConfigKeys;
import java.util.Collections;
import java.util.EnumMap;
import java.util.Map;
import java.util.Objects;
import java.util.SortedMap;
import java.util.TreeMap;

/**
 * The XLA options each program of a {@link ModelPackage} is compiled with, by its {@link Role}: XLA
 * option name to its value as text ({@link CompileOptions#xlaOptions()}). Read from {@value #KEY} (the
 * runtime's reference.conf gives the defaults and why; an option set to {@code null} there is unset) or made
 * directly. A program that calls the bridge's native kernels (a package imported with {@code --kernels
 * native}) takes its role's options from {@code nativeKernelsByRole} on top, name by name.
 *
 * @param byRole the options of each role; a role not in the map has none
 * @param nativeKernelsByRole what replaces a role's options, name by name, for a program that calls the bridge's
 *     native kernels; a name mapped to null is unset
 */
public record PackageXlaOptions(Map<Role, Map<String, String>> byRole, Map<Role, Map<String, String>> nativeKernelsByRole) {
  /** The config key the options are read from, named in error messages. */
  public static final String KEY = "xla-actors.runtime.model-package.xla-options";
  /** The config key of the options that replace a role's for programs that call the native kernels. */
  public static final String NATIVE_KERNELS_KEY = KEY + ".native-kernels";

  public PackageXlaOptions {
    byRole = copy(byRole, "byRole");
    nativeKernelsByRole = copy(nativeKernelsByRole, "nativeKernelsByRole");
  }

  /** {@code byRole} for every program, with no other options for programs that call the native kernels. */
  public PackageXlaOptions(Map<Role, Map<String, String>> byRole) {
    this(byRole, Map.of());
  }

  private static Map<Role, Map<String, String>> copy(Map<Role, Map<String, String>> byRole, String what) {
    Objects.requireNonNull(byRole, what);
    Map<Role, Map<String, String>> copy = new EnumMap<>(Role.class);
    byRole.forEach((role, options) -> copy.put(Objects.requireNonNull(role, "role"),
        Collections.unmodifiableSortedMap(new TreeMap<>(Objects.requireNonNull(options, "options of " + role)))));
    return Collections.unmodifiableMap(copy);
  }

  /** No XLA options for any role: every program compiles with the plugin's defaults. */
  public static PackageXlaOptions none() {
    return new PackageXlaOptions(Map.of());
  }

  /** The options of the application's config (application.conf, system properties, reference.conf). */
  public static PackageXlaOptions load() {
    return fromConfig(ConfigFactory.load());
  }

  /**
   * The options under {@value #KEY} in {@code config}; a role that is no role, an option that is not an
   * object of scalar values, or a name that is not an XLA option's is an {@link XlaException} naming the key.
   */
  public static PackageXlaOptions fromConfig(Config config) {
    KnownConfigKeys.check(config);
    try {
      return new PackageXlaOptions(roles(config, KEY, false), roles(config, NATIVE_KERNELS_KEY, true));
    } catch (ConfigException e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, "bad " + KEY + ": " + e.getMessage(), e);
    }
  }

  /** The roles' options under {@code key}; {@code keepNull}: an option set to null is kept (it unsets), else dropped. */
  private static Map<Role, Map<String, String>> roles(Config config, String key, boolean keepNull) {
    Map<Role, Map<String, String>> byRole = new EnumMap<>(Role.class);
    for (Role role : Role.values()) {
      String roleKey = key + "." + role.jsonName();
      if (!config.hasPath(roleKey)) {
        continue;
      }
      Map<String, String> options = new TreeMap<>();
      for (Map.Entry<String, ConfigValue> option : config.getObject(roleKey).entrySet()) {
        ConfigValue value = option.getValue();
        if (value.valueType() == ConfigValueType.NULL) {
          if (keepNull) {
            options.put(option.getKey(), null);
          }
          continue; // unsets a default
        }
        if (value.valueType() == ConfigValueType.OBJECT || value.valueType() == ConfigValueType.LIST) {
          throw new XlaException(ErrorCode.INVALID_ARGUMENT, roleKey + "." + option.getKey() + " is "
              + value.render() + " (" + value.origin().description() + "); an XLA option takes one value: a boolean, a"
              + " number or text, e.g. " + roleKey + " { xla_cpu_use_xnnpack = false }");
        }
        options.put(option.getKey(), String.valueOf(value.unwrapped()));
      }
      try {
        Map<String, String> names = new TreeMap<>();
        options.forEach((name, value) -> names.put(name, value == null ? "" : value)); // an unset one is named too
        CompileOptions.defaults().withXlaOptions(names); // checks the names
      } catch (XlaException e) {
        throw new XlaException(ErrorCode.INVALID_ARGUMENT, roleKey + ": " + e.getMessage(), e);
      }
      byRole.put(role, options);
    }
    return byRole;
  }

  /** The XLA options of {@code role}'s programs (empty when it has none). */
  public Map<String, String> of(Role role) {
    return byRole.getOrDefault(Objects.requireNonNull(role, "role"), Map.of());
  }

  /**
   * The XLA options of a program of {@code role}: {@link #of(Role)}, with {@link #nativeKernelsByRole()}'s for
   * the role on top when {@code callsNativeKernels}.
   */
  public Map<String, String> of(Role role, boolean callsNativeKernels) {
    Map<String, String> overlay = nativeKernelsByRole.get(Objects.requireNonNull(role, "role"));
    if (!callsNativeKernels || overlay == null || overlay.isEmpty()) {
      return of(role);
    }
    SortedMap<String, String> merged = new TreeMap<>(of(role));
    overlay.forEach((name, value) -> {
      if (value == null) {
        merged.remove(name);
      } else {
        merged.put(name, value);
      }
    });
    return Collections.unmodifiableMap(merged);
  }
}
