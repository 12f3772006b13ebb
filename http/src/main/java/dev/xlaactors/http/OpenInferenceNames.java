package dev.xlaactors.http;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The names the Open Inference Protocol gives a model's inputs and outputs, made from what the model
 * calls them: a {@code jax.export} artifact knows each input and output by its path in the function's
 * argument and result trees (JAX's {@code keystr}: {@code [1]}, {@code ['y']}, {@code [0]['logits']}).
 * The rule, the same for inputs and outputs:
 * <ul>
 *   <li>a name that is no path (it does not start with {@code [}) is kept: {@code x}, {@code tokens} (a
 *       weights-style key {@code [i]['key']} is already made plain by {@code JaxExport.inputNames()});
 *   <li>a path's segments are joined with {@code .}, keys unquoted, indices as digits: {@code ['y']} is
 *       {@code y}, {@code ['a'][1]} is {@code a.1};
 *   <li>a path that starts with an index (a positional argument, a tuple element) starts with {@code input_}
 *       or {@code output_}: the second argument {@code [1]} is {@code input_1} (argument 0 is the weights
 *       dict), the first element of a returned tuple {@code [0]} is {@code output_0}, {@code [0]['y']} is
 *       {@code output_0.y};
 *   <li>the empty path (a function returning one array) and an output whose path is not known are
 *       {@code output_<position>};
 *   <li>a path that does not parse is kept as it is; names that would clash keep their paths (or, if those
 *       clash too, become {@code <kind>_<position>}).
 * </ul>
 * The names depend only on the paths, not on how the endpoint was built. Stateless and thread-safe.
 */
final class OpenInferenceNames {
  private OpenInferenceNames() {}

  /** The protocol's names of inputs named {@code modelNames} (paths or plain names), in order. */
  static List<String> inputs(List<String> modelNames) {
    return names(modelNames, "input");
  }

  /**
   * The protocol's names of {@code count} outputs whose paths are {@code paths} (one per output), or named by
   * position when {@code paths} is empty (not known).
   */
  static List<String> outputs(List<String> paths, int count) {
    List<String> given = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      given.add(paths.isEmpty() ? null : paths.get(i));
    }
    return names(given, "output");
  }

  private static List<String> names(List<String> paths, String kind) {
    List<String> readable = new ArrayList<>();
    Map<String, Integer> counts = new HashMap<>();
    for (int i = 0; i < paths.size(); i++) {
      String name = readable(paths.get(i), kind, i);
      readable.add(name);
      counts.merge(name, 1, Integer::sum);
    }
    List<String> out = new ArrayList<>();
    Map<String, Integer> fallbackCounts = new HashMap<>();
    for (int i = 0; i < paths.size(); i++) {
      String name = readable.get(i);
      String raw = paths.get(i);
      out.add(counts.get(name) > 1 && raw != null && !raw.isEmpty() ? raw : name);
      fallbackCounts.merge(out.get(i), 1, Integer::sum);
    }
    for (int i = 0; i < out.size(); i++) {
      if (fallbackCounts.get(out.get(i)) > 1) {
        out.set(i, kind + "_" + i);
      }
    }
    return List.copyOf(out);
  }

  /** The readable name of {@code path} (null: not known) for the input or output ({@code kind}) at {@code position}. */
  static String readable(String path, String kind, int position) {
    if (path == null || path.isEmpty()) {
      return kind + "_" + position;
    }
    if (!path.startsWith("[")) {
      return path;
    }
    List<String> segments = new ArrayList<>();
    boolean leadingIndex = false;
    int at = 0;
    while (at < path.length()) {
      char c = path.charAt(at);
      if (c == '.' && at + 1 < path.length() && segments.size() > 0) { // a dataclass or namedtuple field: .name
        int end = at + 1;
        while (end < path.length() && (Character.isLetterOrDigit(path.charAt(end)) || path.charAt(end) == '_')) {
          end++;
        }
        if (end == at + 1) {
          return path;
        }
        segments.add(path.substring(at + 1, end));
        at = end;
      } else if (c == '[' && at + 1 < path.length() && Character.isDigit(path.charAt(at + 1))) {
        int end = path.indexOf(']', at);
        if (end < 0 || !path.substring(at + 1, end).chars().allMatch(Character::isDigit)) {
          return path;
        }
        if (segments.isEmpty()) {
          leadingIndex = true;
        }
        segments.add(path.substring(at + 1, end));
        at = end + 1;
      } else if (c == '[' && at + 1 < path.length() && (path.charAt(at + 1) == '\'' || path.charAt(at + 1) == '"')) {
        char quote = path.charAt(at + 1);
        StringBuilder key = new StringBuilder();
        int i = at + 2;
        for (; i < path.length() && path.charAt(i) != quote; i++) {
          char k = path.charAt(i);
          if (k == '\\' && i + 1 < path.length() && "\\'\"".indexOf(path.charAt(i + 1)) >= 0) {
            key.append(path.charAt(++i));
          } else if (k == '\\') {
            return path; // other escapes (\n, \x..) are rare: keep the path rather than guess
          } else {
            key.append(k);
          }
        }
        if (i + 1 >= path.length() || path.charAt(i + 1) != ']') {
          return path;
        }
        segments.add(key.toString());
        at = i + 2;
      } else {
        return path;
      }
    }
    String joined = String.join(".", segments);
    return leadingIndex ? kind + "_" + joined : joined;
  }
}
