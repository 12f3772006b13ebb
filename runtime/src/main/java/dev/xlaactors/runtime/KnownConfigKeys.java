package dev.xlaactors.runtime;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigUtil;
import com.typesafe.config.ConfigValue;
import com.typesafe.config.ConfigValueType;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Refuses configuration keys under {@code xla-actors} that no module defines, so a misspelt key fails at
 * start instead of being silently ignored. A key is known when the reference configuration (every
 * module's reference.conf on the classpath) defines it, or when it lies inside an open section: one the
 * reference defines as an empty object (such as {@code callbacks.timeouts {}}, keyed by the user) or as a
 * Pekko dispatcher ({@code type = Dispatcher}, which takes Pekko's own dispatcher keys).
 */
public final class KnownConfigKeys {
  private static final String ROOT = "xla-actors";

  private KnownConfigKeys() {}

  /** Checks {@code config} against the reference configuration of the modules on the classpath. */
  public static void check(Config config) {
    check(config, ConfigFactory.defaultReference());
  }

  static void check(Config config, Config reference) {
    if (!config.hasPath(ROOT)) {
      return;
    }
    TreeSet<String> unknown = new TreeSet<>();
    for (Map.Entry<String, ConfigValue> entry : config.getConfig(ROOT).entrySet()) {
      String path = ROOT + "." + entry.getKey();
      if (!reference.hasPathOrNull(path) && !insideOpenSection(path, reference)) {
        unknown.add(path);
      }
    }
    if (!unknown.isEmpty()) {
      throw new XlaException(
          ErrorCode.INVALID_ARGUMENT,
          "unknown configuration key" + (unknown.size() > 1 ? "s " : " ") + String.join(", ", unknown)
              + ": no xla-actors module defines " + (unknown.size() > 1 ? "them" : "it")
              + " (check the spelling against the modules' reference.conf, listed in the README)");
    }
  }

  private static boolean insideOpenSection(String path, Config reference) {
    List<String> keys = ConfigUtil.splitPath(path); // keeps quoted keys such as "slow.model" whole
    for (int n = keys.size() - 1; n > 0; n--) {
      String ancestor = ConfigUtil.joinPath(keys.subList(0, n));
      if (!reference.hasPath(ancestor) || reference.getValue(ancestor).valueType() != ConfigValueType.OBJECT) {
        continue;
      }
      Config section = reference.getConfig(ancestor);
      boolean emptyMap = section.root().isEmpty();
      boolean dispatcher = section.hasPath("type") && section.getString("type").equals("Dispatcher");
      if (emptyMap || dispatcher) {
        return true;
      }
    }
    return false;
  }
}
