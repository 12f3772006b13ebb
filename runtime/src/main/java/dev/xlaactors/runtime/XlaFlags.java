package dev.xlaactors.runtime;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.PluginException;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;

/**
 * Checks the {@code XLA_FLAGS} environment variable before a plugin reads it. XLA parses it when the
 * first client is created, and ends the process (exit 1, no Java exception) on a flag it does not know, a
 * value it cannot parse, or a flags file it cannot open; some accepted values crash the process later, at a
 * run. Everything measured to end the process is refused here with a {@link PluginException} naming the
 * variable, the flag, its value, why and the fix.
 *
 * <p>For every plugin: the syntax (a token starting with a single {@code -}, an unreadable flags file) and
 * the {@link #CRASHES known crashes} (a copy of a supported build without its pin is the same build). For a
 * supported build ({@link PluginBuild}, identified by its pin) also each flag's name and value, from its table
 * {@code <build>-<version>.flags} (measured on that build by {@code tools/xla_flags_table.py}).
 */
final class XlaFlags {
  /** The environment variable XLA reads its debug flags from. */
  static final String ENV = "XLA_FLAGS";

  /** One {@code --name[=value]} token, as XLA splits the variable; {@code value} is null for a bare {@code --name}. */
  record Token(String name, String value, String text) {}

  /**
   * A list flag whose value, once it holds all of {@code together} (upper case), crashes the supported builds
   * named in {@code builds} (and any plugin that is not a known build).
   */
  record Crash(String flag, Set<String> together, Set<String> builds, String why, String fix) {}

  /**
   * The accepted values measured to crash the pinned CPU plugin; only those seen to crash. {@code
   * ynn_fusion_type} with eltwise and reduce: the first run of any program with a reduce (a plain row sum
   * of f32[8,8] is enough) dies with SIGSEGV in {@code ynn_set_external_value_data}; with either alone, or
   * with dot, it runs (and so do the xnn and onednn fusion types with both).
   */
  static final List<Crash> CRASHES = List.of(new Crash("xla_cpu_experimental_ynn_fusion_type",
      Set.of("ELTWISE", "REDUCE"), Set.of("xla-cpu-pjrt"),
      "with both eltwise and reduce, xla-cpu-pjrt 0.0.1 crashes the process (SIGSEGV in ynn_set_external_value_data)"
          + " at the first run of a program with a reduce",
      "drop reduce or eltwise from it (dot,eltwise and dot,reduce run)"));

  private static final Map<String, Map<String, String[]>> TABLES = new ConcurrentHashMap<>();

  private XlaFlags() {}

  /**
   * Throws a {@link PluginException} (INVALID_ARGUMENT) when this process's {@code XLA_FLAGS} would end the
   * process inside {@code plugin}; does nothing when it is unset.
   */
  static void checkEnvironment(Plugin plugin) {
    String value = System.getenv(ENV);
    if (value != null) {
      check(value, plugin.build());
    }
  }

  /**
   * As {@link #checkEnvironment}, for the variable's value {@code value}: names and values only when the
   * plugin is a supported {@code build}; the known crashes of that build, or all of them for another plugin.
   */
  static void check(String value, Optional<PluginBuild> build) {
    String text = value;
    String where = ENV + "='" + value + "'";
    String trimmed = value.replaceAll("^[ \\t\\n\\r]+|[ \\t\\n\\r]+$", "");
    if (!value.isEmpty() && trimmed.isEmpty()) {
      throw refused(ENV + " is only whitespace, which XLA takes for the name of a flags file it cannot open; the"
          + " plugin would end the process. Fix: unset " + ENV + " or set it to flags, e.g. " + ENV
          + "=--xla_cpu_enable_fast_math=false");
    }
    if (!trimmed.isEmpty() && !trimmed.startsWith("-")) {
      // XLA reads the flags from the file the variable names when it does not start with '-'.
      Path file = Path.of(trimmed);
      try {
        text = Files.readString(file, StandardCharsets.UTF_8);
      } catch (IOException | RuntimeException e) {
        throw refused(where + " names a flags file (it does not start with '-'), but " + file + " cannot be read ("
            + e + "); the plugin would end the process. Fix: make it a readable file of --name=value flags, or set "
            + ENV + " to the flags themselves, e.g. " + ENV + "=--xla_cpu_enable_fast_math=false");
      }
      where = ENV + " (the file " + file + ")";
    }
    Map<String, Set<String>> lists = new HashMap<>();
    for (Token token : tokens(text)) {
      if (token.name() == null) {
        throw refused(where + ": '" + token.text() + "' starts with a single '-'; XLA knows only '--name=value' (and"
            + " '--name' for a boolean), and ends the process on this. Fix: write --" + token.text().replaceFirst("^-+", ""));
      }
      if (build.isPresent()) {
        checkKnown(where, token, lists, build.get());
      } else if (token.value() != null && CRASHES.stream().anyMatch(c -> c.flag().equals(token.name()))) {
        // A plugin that is not the pinned file may still be that build (a copy without its pin crashed a JVM
        // so): follow the crash flags' lists for every plugin; an unparsable list is the plugin's to judge.
        applyList(token, table(PluginBuild.defaultBuild()).get(token.name()), lists);
      }
    }
    for (Crash crash : CRASHES) {
      if (build.isPresent() && !crash.builds().contains(build.get().name())) {
        continue;
      }
      Set<String> types = lists.get(crash.flag());
      if (types != null && types.containsAll(crash.together())) {
        throw refused(where + " sets --" + crash.flag() + " so that it holds " + types + ": " + crash.why()
            + ". Fix: " + crash.fix());
      }
    }
  }

  private static void checkKnown(String where, Token token, Map<String, Set<String>> lists, PluginBuild build) {
    String[] entry = table(build).get(token.name());
    if (entry == null) {
      throw refused(where + ": --" + token.name() + " is not a flag of " + build + ", and the plugin ends the"
          + " process on an unknown flag (\"Unknown flag in XLA_FLAGS\"). Fix: remove it or correct its name");
    }
    String kind = entry[0];
    if (kind.equals("unmeasured")) {
      throw refused(where + ": --" + token.name() + " is a flag of " + build + ", but none of the values"
          + " tools/xla_flags_table.py tried (booleans, integers, numbers, text) parses, so its syntax is not known"
          + " and a wrong value would end the process. Fix: remove it");
    }
    String value = token.value();
    if (value == null) {
      if (!kind.equals("bool")) {
        throw refused(where + ": --" + token.name() + " has no value, but it is a " + kind + " flag (only a boolean"
            + " flag may stand alone), and the plugin ends the process on this. Fix: write --" + token.name() + "=<value>");
      }
      return;
    }
    String expected = expected(kind, entry, token, lists);
    if (expected != null) {
      throw refused(where + ": --" + token.name() + "=" + value + " is not a value the plugin can parse (expected "
          + expected + "), and it ends the process on this (\"Flag parsing failed\"). Fix: give --" + token.name()
          + " " + expected);
    }
  }

  /**
   * What {@code token}'s value must be for a flag of {@code kind} (table {@code entry}), or null when it is
   * one; a list flag's items are added to its set in {@code lists}.
   */
  private static String expected(String kind, String[] entry, Token token, Map<String, Set<String>> lists) {
    String value = token.value();
    return switch (kind) {
      case "bool" -> value.equalsIgnoreCase("true") || value.equalsIgnoreCase("false") || value.equals("1")
          || value.equals("0") ? null : "true, false, 1 or 0";
      case "int32" -> integer(value, Integer.MIN_VALUE, Integer.MAX_VALUE) ? null : "a decimal integer from "
          + Integer.MIN_VALUE + " to " + Integer.MAX_VALUE;
      case "int64" -> integer(value, Long.MIN_VALUE, Long.MAX_VALUE) ? null : "a decimal integer from "
          + Long.MIN_VALUE + " to " + Long.MAX_VALUE;
      case "float" -> decimal(value) ? null : "a decimal or hexadecimal number, inf or nan";
      case "false" -> value.equalsIgnoreCase("false") || value.equals("0") ? null
          : "false or 0 (this plugin build has no libnvptxcompiler)";
      case "enum" -> values(entry, 1).contains(value) ? null : "one of " + String.join(", ", values(entry, 1));
      case "enum-any-case" -> values(entry, 1).contains(value.toUpperCase(Locale.ROOT)) ? null
          : "one of " + String.join(", ", values(entry, 1)) + " (any case)";
      case "list" -> applyList(token, entry, lists);
      case "names" -> names(value, values(entry, 1));
      case "fuel" -> fuel(value) ? null : "comma-separated pass=N items, N a decimal integer from "
          + Long.MIN_VALUE + " to " + Long.MAX_VALUE;
      default -> null; // string
    };
  }

  /**
   * Throws a {@link PluginException} (INVALID_ARGUMENT) when an XLA option of one compilation ({@link
   * CompileOptions#xlaOptions()}) is not an option of the plugin {@code build}, has a value the option cannot
   * take, or is a value measured to crash the build ({@link #CRASHES}). Without a known build only the
   * crashes are checked; the plugin answers the rest with a compile error.
   *
   * @return the options as the plugin parses them: a list option's items in full ({@code
   *     LIBRARY_FUSION_TYPE_DOT,...}), an enum's name in upper case, a boolean as {@code true} or {@code false};
   *     the values unchanged without a known build
   */
  static Map<String, String> checkOptions(Map<String, String> options, Optional<PluginBuild> build) {
    Map<String, Set<String>> lists = new HashMap<>();
    Map<String, String> parsed = new TreeMap<>(options);
    for (Map.Entry<String, String> option : options.entrySet()) {
      Token token = new Token(option.getKey(), option.getValue(), option.getKey() + "=" + option.getValue());
      String where = "XLA option " + token.text() + " (CompileOptions.xlaOptions)";
      if (build.isEmpty()) {
        if (CRASHES.stream().anyMatch(c -> c.flag().equals(token.name()))) {
          applyList(token, table(PluginBuild.defaultBuild()).get(token.name()), lists);
        }
        continue;
      }
      String[] entry = table(build.get()).get(token.name());
      if (entry == null) {
        throw refused(where + ": " + token.name() + " is not an XLA option of " + build.get() + ". Fix: remove it or"
            + " correct its name (the options are XLA's DebugOptions fields, as XLA_FLAGS names them without --)");
      }
      if (entry[0].equals("unmeasured")) {
        throw refused(where + ": the syntax of " + token.name() + " on " + build.get() + " is not known (none of the"
            + " values tools/xla_flags_table.py tried parses). Fix: remove it");
      }
      String expected = expected(entry[0], entry, token, lists);
      if (expected != null) {
        throw refused(where + ": " + token.value() + " is not a value " + token.name() + " takes (expected " + expected
            + "). Fix: give it " + expected);
      }
      String value = token.value();
      parsed.put(token.name(), switch (entry[0]) {
        case "bool", "false" -> Boolean.toString(value.equalsIgnoreCase("true") || value.equals("1"));
        case "enum-any-case" -> value.toUpperCase(Locale.ROOT);
        case "list" -> lists.get(token.name()).stream().map(item -> (entry[1].equals("-") ? "" : entry[1]) + item)
            .collect(Collectors.joining(","));
        default -> value;
      });
    }
    for (Crash crash : CRASHES) {
      Set<String> types = lists.get(crash.flag());
      if ((build.isEmpty() || crash.builds().contains(build.get().name())) && types != null
          && types.containsAll(crash.together())) {
        throw refused("XLA option " + crash.flag() + " (CompileOptions.xlaOptions) holds " + types + ": " + crash.why()
            + ". Fix: " + crash.fix());
      }
    }
    return parsed;
  }

  /** The kind of XLA option {@code name} on {@code build} ({@code bool}, {@code int32}, ...), or null when not known. */
  static String kind(Optional<PluginBuild> build, String name) {
    String[] entry = build.map(b -> table(b).get(name)).orElse(null);
    return entry == null ? null : entry[0];
  }

  /** Applies a list flag's value (table {@code entry}: kind, prefix or '-', items) to its set in {@code lists}; see {@link #list}. */
  private static String applyList(Token token, String[] entry, Map<String, Set<String>> lists) {
    return list(token.value(), entry[1].equals("-") ? "" : entry[1], values(entry, 2),
        lists.computeIfAbsent(token.name(), k -> new TreeSet<>()));
  }

  private static List<String> values(String[] entry, int from) {
    return List.of(entry).subList(from, entry.length);
  }

  /**
   * Applies a list value to {@code current} as the plugin does (measured): items of {@code values} in any case,
   * optionally with {@code prefix}; with no +/- the list replaces the current value (empty items skipped), with
   * +x and -y on every item it adds and removes. Returns null, or what was expected when the plugin cannot parse it.
   */
  static String list(String value, String prefix, List<String> values, Set<String> current) {
    String expected = "a comma-separated list of " + String.join(", ", values) + " (any case"
        + (prefix.isEmpty() ? "" : ", optionally with " + prefix) + "), each with a + or - prefix or none with one";
    List<String> items = new ArrayList<>(List.of(value.split(",", -1)));
    long modified = items.stream().filter(i -> i.startsWith("+") || i.startsWith("-")).count();
    if (modified == 0) {
      items.removeIf(String::isEmpty); // "eltwise,,reduce," is accepted; "+eltwise," is not
    }
    if (modified != 0 && modified != items.size()) {
      return expected + " (here some have a prefix and some not)";
    }
    Set<String> next = new TreeSet<>();
    if (modified != 0) {
      next.addAll(current);
    }
    for (String item : items) {
      String name = (modified == 0 ? item : item.substring(1)).toUpperCase(Locale.ROOT);
      if (!prefix.isEmpty() && name.startsWith(prefix)) {
        name = name.substring(prefix.length());
      }
      if (!values.contains(name)) {
        return expected + " ('" + item + "' is none of them)";
      }
      if (item.startsWith("-")) {
        next.remove(name);
      } else {
        next.add(name);
      }
    }
    current.clear();
    current.addAll(next);
    return null;
  }

  /** A comma-separated list of {@code values} in any case, with no empty item and no +/- (measured). */
  private static String names(String value, List<String> values) {
    for (String item : value.split(",", -1)) {
      if (!values.contains(item.toUpperCase(Locale.ROOT))) {
        return "a comma-separated list of " + String.join(", ", values) + " (any case; '" + item + "' is none of them)";
      }
    }
    return null;
  }

  /** {@code xla_fuel}: comma-separated {@code pass=N}, the pass possibly empty, N an int64 (measured). */
  private static boolean fuel(String value) {
    for (String item : value.split(",", -1)) {
      int equals = item.indexOf('=');
      if (equals < 0 || !integer(item.substring(equals + 1), Long.MIN_VALUE, Long.MAX_VALUE)) {
        return false;
      }
    }
    return true;
  }

  private static boolean integer(String value, long min, long max) {
    if (!value.matches("[+-]?[0-9]+")) {
      return false;
    }
    try {
      long parsed = Long.parseLong(value);
      return parsed >= min && parsed <= max;
    } catch (NumberFormatException e) {
      return false;
    }
  }

  /** What the plugin parses as a float: a decimal or hexadecimal number, inf or nan (measured). */
  private static boolean decimal(String value) {
    return value.matches("[+-]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?")
        || value.matches("(?i)[+-]?(inf|infinity|nan)")
        || value.matches("[+-]?0[xX]([0-9a-fA-F]+\\.?[0-9a-fA-F]*|\\.[0-9a-fA-F]+)([pP][+-]?[0-9]+)?");
  }

  /**
   * Splits the variable's text as XLA does: tokens separated by whitespace; a value ({@code --name=value})
   * that starts with a single or double quote runs to the matching quote, whitespace included, and loses its
   * quotes; a token not starting with '-' is ignored by XLA and left out. A token starting with a single '-'
   * comes back with a null name.
   */
  static List<Token> tokens(String text) {
    List<Token> tokens = new ArrayList<>();
    int i = 0;
    int n = text.length();
    while (i < n) {
      if (space(text.charAt(i))) {
        i++;
        continue;
      }
      int start = i;
      int equals = -1;
      StringBuilder value = null;
      while (i < n && !space(text.charAt(i))) {
        char c = text.charAt(i);
        if (c == '=' && equals < 0) {
          equals = i;
          value = new StringBuilder();
          i++;
          if (i < n && (text.charAt(i) == '"' || text.charAt(i) == '\'')) {
            char quote = text.charAt(i++);
            while (i < n && text.charAt(i) != quote) {
              if (quote == '"' && text.charAt(i) == '\\' && i + 1 < n) {
                i++;
              }
              value.append(text.charAt(i++));
            }
            i++; // the closing quote
          }
          continue;
        }
        if (value != null) {
          value.append(c);
        }
        i++;
      }
      String token = text.substring(start, Math.min(i, n));
      if (!token.startsWith("-")) {
        continue;
      }
      if (!token.startsWith("--")) {
        tokens.add(new Token(null, null, token));
        continue;
      }
      String name = token.substring(2, equals < 0 ? token.length() : equals - start);
      tokens.add(new Token(name, value == null ? null : value.toString(), token));
    }
    return tokens;
  }

  /** What XLA splits on (measured: not \f, \v or Unicode spaces, which Java's Character.isWhitespace takes). */
  private static boolean space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
  }

  /** The measured table of {@code build}: flag name to kind and values. */
  private static Map<String, String[]> table(PluginBuild build) {
    return TABLES.computeIfAbsent(build.flagsTable(), XlaFlags::readTable);
  }

  private static Map<String, String[]> readTable(String name) {
    Map<String, String[]> loaded = new HashMap<>();
    try (InputStream in = XlaFlags.class.getResourceAsStream(name)) {
      if (in == null) {
        throw new IllegalStateException(name + " is missing from the runtime jar");
      }
      for (String line : new String(in.readAllBytes(), StandardCharsets.UTF_8).split("\n")) {
        if (line.isBlank() || line.startsWith("#")) {
          continue;
        }
        String[] words = line.strip().split("\\s+");
        loaded.put(words[0], List.of(words).subList(1, words.length).toArray(String[]::new));
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return Map.copyOf(loaded);
  }

  /** The flags of {@code build} its table knows (for tests). */
  static Set<String> knownFlags(PluginBuild build) {
    return table(build).keySet();
  }

  private static PluginException refused(String message) {
    return new PluginException(ErrorCode.INVALID_ARGUMENT, message);
  }
}
