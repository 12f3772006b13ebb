package dev.xlaactors.runtime;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigResolveOptions;
import com.typesafe.config.ConfigUtil;
import com.typesafe.config.ConfigValue;
import com.typesafe.config.ConfigValueType;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Refuses configuration keys under {@code xla-actors} that no module defines, so a misspelt key fails at
 * start instead of being silently ignored. A key is known when the reference configuration (every
 * module's reference.conf on the classpath) defines it, or when it lies inside an open section: one the
 * reference defines as an empty object (such as {@code callbacks.timeouts {}}, keyed by the user), as a
 * Pekko dispatcher ({@code type = Dispatcher}, which takes Pekko's own dispatcher keys), or as a map of XLA
 * options (every key an XLA option name, {@code xla_...}, which no module's key is).
 */
public final class KnownConfigKeys {
  private static final String ROOT = "xla-actors";

  private KnownConfigKeys() {}

  /**
   * Checks {@code config} against the reference configuration of the modules on the classpath: their
   * reference.conf files alone, without system properties (ConfigFactory.defaultReference() includes
   * them, which would make a misspelt {@code -D} key look known).
   */
  public static void check(Config config) {
    check(config, ConfigFactory.defaultReferenceUnresolved().resolve(ConfigResolveOptions.defaults().setAllowUnresolved(true)));
  }

  static void check(Config config, Config reference) {
    checkRootSpelling(config);
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
      List<String> known = new ArrayList<>();
      reference.getConfig(ROOT).entrySet().forEach(e -> known.add(ROOT + "." + e.getKey()));
      List<String> described = new ArrayList<>();
      for (String key : unknown) {
        String origin = config.getValue(key).origin().description();
        String nearest = nearestModule(key, reference);
        if (nearest == null) {
          nearest = nearest(key, known);
        }
        described.add(key + " (" + origin + ")" + (nearest != null ? ", did you mean " + nearest + "?" : ""));
      }
      throw new XlaException(
          ErrorCode.INVALID_ARGUMENT,
          "unknown configuration key" + (unknown.size() > 1 ? "s " : " ") + String.join("; ", described)
              + ": no xla-actors module defines " + (unknown.size() > 1 ? "them" : "it")
              + " (check the spelling against the modules' reference.conf, listed in docs/configuration.md)");
    }
  }

  /**
   * Refuses a top-level key that is a misspelling of {@code xla-actors} ({@code xla-actor}, {@code
   * xla_actors}, ...): everything under it would otherwise be silently ignored.
   */
  private static void checkRootSpelling(Config config) {
    for (String top : config.root().keySet()) {
      if (!top.equals(ROOT) && distance(top, ROOT) <= 2) {
        String origin = config.root().get(top).origin().description();
        throw new XlaException(
            ErrorCode.INVALID_ARGUMENT,
            "unknown configuration key prefix " + top + " (" + origin + "), did you mean " + ROOT
                + "? Nothing reads the settings under " + top + "; write them under " + ROOT + ".");
      }
    }
  }

  /**
   * When {@code key}'s module segment ({@code xla-actors.<module>...}) is no module but close to one,
   * the same key under that module ({@code xla-actors.actorz.runs.timeout} -> {@code
   * xla-actors.actors.runs.timeout}); otherwise null.
   */
  private static String nearestModule(String key, Config reference) {
    List<String> keys = ConfigUtil.splitPath(key);
    if (keys.size() < 3 || reference.hasPath(ConfigUtil.joinPath(keys.subList(0, 2)))) {
      return null;
    }
    for (String module : reference.getConfig(ROOT).root().keySet()) {
      if (distance(keys.get(1), module) <= 2) {
        List<String> fixed = new ArrayList<>(keys);
        fixed.set(1, module);
        return ConfigUtil.joinPath(fixed);
      }
    }
    return null;
  }

  /** The known key closest to {@code key} by edit distance, if it is close enough to be a misspelling. */
  static String nearest(String key, List<String> known) {
    String best = null;
    int bestDistance = Integer.MAX_VALUE;
    for (String k : known) {
      int d = distance(key, k);
      if (d < bestDistance) {
        best = k;
        bestDistance = d;
      }
    }
    String last = key.substring(key.lastIndexOf('.') + 1);
    return best != null && bestDistance <= Math.max(2, last.length() / 3) ? best : null;
  }

  /** The edit (Levenshtein) distance between two strings: insertions, deletions and substitutions. */
  public static int distance(String a, String b) {
    int[] previous = new int[b.length() + 1];
    int[] current = new int[b.length() + 1];
    for (int j = 0; j <= b.length(); j++) {
      previous[j] = j;
    }
    for (int i = 1; i <= a.length(); i++) {
      current[0] = i;
      for (int j = 1; j <= b.length(); j++) {
        int substitute = previous[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
        current[j] = Math.min(substitute, Math.min(previous[j] + 1, current[j - 1] + 1));
      }
      int[] t = previous;
      previous = current;
      current = t;
    }
    return previous[b.length()];
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
      boolean xlaOptions = section.root().keySet().stream().allMatch(k -> k.startsWith("xla_"));
      if (emptyMap || dispatcher || xlaOptions) {
        return true;
      }
    }
    return false;
  }
}
