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
import java.util.TreeMap;

/**
 * The XLA options each program of a {@link ModelPackage} is compiled with, by its {@link Role}: XLA
 * option name to its value as text ({@link CompileOptions#xlaOptions()}). Read from {@value #KEY} (the
 * runtime's reference.conf gives the defaults and why; an option set to {@code null} there is unset) or made
 * directly.
 *
 * @param byRole the options of each role; a role not in the map has none
 */
public record PackageXlaOptions(Map<Role, Map<String, String>> byRole) {
  /** The config key the options are read from, named in error messages. */
  public static final String KEY = "xla-actors.runtime.model-package.xla-options";

  public PackageXlaOptions {
    Objects.requireNonNull(byRole, "byRole");
    Map<Role, Map<String, String>> copy = new EnumMap<>(Role.class);
    byRole.forEach((role, options) -> copy.put(Objects.requireNonNull(role, "role"),
        Collections.unmodifiableSortedMap(new TreeMap<>(Objects.requireNonNull(options, "options of " + role)))));
    byRole = Collections.unmodifiableMap(copy);
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
    Map<Role, Map<String, String>> byRole = new EnumMap<>(Role.class);
    try {
      for (Role role : Role.values()) {
        String roleKey = KEY + "." + role.jsonName();
        if (!config.hasPath(roleKey)) {
          continue;
        }
        Map<String, String> options = new TreeMap<>();
        for (Map.Entry<String, ConfigValue> option : config.getObject(roleKey).entrySet()) {
          ConfigValue value = option.getValue();
          if (value.valueType() == ConfigValueType.NULL) {
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
          CompileOptions.defaults().withXlaOptions(options); // checks the names
        } catch (XlaException e) {
          throw new XlaException(ErrorCode.INVALID_ARGUMENT, roleKey + ": " + e.getMessage(), e);
        }
        byRole.put(role, options);
      }
    } catch (ConfigException e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, "bad " + KEY + ": " + e.getMessage(), e);
    }
    return new PackageXlaOptions(byRole);
  }

  /** The XLA options of {@code role}'s programs (empty when it has none). */
  public Map<String, String> of(Role role) {
    return byRole.getOrDefault(Objects.requireNonNull(role, "role"), Map.of());
  }
}
