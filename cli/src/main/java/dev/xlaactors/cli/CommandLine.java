package dev.xlaactors.cli;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * The arguments of one command: positional arguments, options that take a value ({@code --port 8080} or
 * {@code --port=8080}, repeatable) and flags ({@code --json}). Anything the command does not declare is
 * refused naming it. Immutable.
 */
final class CommandLine {
  private final String command;
  private final List<String> positional;
  private final Map<String, List<String>> values;
  private final Set<String> flags;

  private CommandLine(String command, List<String> positional, Map<String, List<String>> values, Set<String> flags) {
    this.command = command;
    this.positional = positional;
    this.values = values;
    this.flags = flags;
  }

  /**
   * Parses {@code args} of command {@code command}, which takes the options {@code valueOptions} (each
   * followed by a value) and the flags {@code flagOptions}; {@code --} ends the options.
   */
  static CommandLine parse(String command, List<String> args, Set<String> valueOptions, Set<String> flagOptions)
      throws UsageException {
    List<String> positional = new ArrayList<>();
    Map<String, List<String>> values = new LinkedHashMap<>();
    Set<String> flags = new java.util.HashSet<>();
    boolean optionsEnded = false;
    for (int i = 0; i < args.size(); i++) {
      String a = args.get(i);
      if (optionsEnded || !a.startsWith("--") || a.length() == 2) {
        if (a.equals("--") && !optionsEnded) {
          optionsEnded = true;
        } else {
          positional.add(a);
        }
        continue;
      }
      int eq = a.indexOf('=');
      String name = eq > 0 ? a.substring(0, eq) : a;
      if (flagOptions.contains(name)) {
        if (eq > 0) {
          throw new UsageException(command + ": " + name + " is a flag and takes no value, got '" + a + "'");
        }
        flags.add(name);
      } else if (valueOptions.contains(name)) {
        String value;
        if (eq > 0) {
          value = a.substring(eq + 1);
        } else if (i + 1 < args.size()) {
          value = args.get(++i);
        } else {
          throw new UsageException(command + ": " + name + " needs a value");
        }
        values.computeIfAbsent(name, k -> new ArrayList<>()).add(value);
      } else {
        List<String> known = new ArrayList<>(valueOptions);
        known.addAll(flagOptions);
        java.util.Collections.sort(known);
        throw new UsageException(command + ": unknown option '" + name + "'" + (known.isEmpty() ? " (it takes none)"
            : "; it takes " + String.join(", ", known)));
      }
    }
    return new CommandLine(command, List.copyOf(positional), values, Set.copyOf(flags));
  }

  /** The positional arguments. */
  List<String> positional() {
    return positional;
  }

  /** Refused unless there are between {@code min} and {@code max} positional arguments, named {@code what}. */
  void expectPositional(int min, int max, String what) throws UsageException {
    if (positional.size() < min) {
      throw new UsageException(command + ": missing " + what);
    }
    if (positional.size() > max) {
      throw new UsageException(command + ": unexpected argument '" + positional.get(max) + "' (it takes " + what + ")");
    }
  }

  /** Whether flag {@code name} was given. */
  boolean flag(String name) {
    return flags.contains(name);
  }

  /** Every value given to option {@code name}, in order. */
  List<String> all(String name) {
    return values.getOrDefault(name, List.of());
  }

  /** The value of option {@code name}; refused when it was given twice. */
  Optional<String> value(String name) throws UsageException {
    List<String> given = all(name);
    if (given.size() > 1) {
      throw new UsageException(command + ": " + name + " was given " + given.size() + " times; give it once");
    }
    return given.stream().findFirst();
  }

  /** The whole number of option {@code name} in {@code min..max}, or {@code fallback} when absent. */
  Integer integer(String name, Integer fallback, long min, long max) throws UsageException {
    Optional<String> v = value(name);
    if (v.isEmpty()) {
      return fallback;
    }
    long n;
    try {
      n = Long.parseLong(v.get().trim());
    } catch (NumberFormatException e) {
      throw new UsageException(command + ": " + name + " takes a whole number, got '" + v.get() + "'");
    }
    if (n < min || n > max) {
      throw new UsageException(command + ": " + name + " " + n + " is outside " + min + ".." + max);
    }
    return (int) n;
  }

  /** The number of option {@code name} in {@code min..max}, or {@code fallback} when absent. */
  Double number(String name, Double fallback, double min, double max) throws UsageException {
    Optional<String> v = value(name);
    if (v.isEmpty()) {
      return fallback;
    }
    double x;
    try {
      x = Double.parseDouble(v.get().trim());
    } catch (NumberFormatException e) {
      throw new UsageException(command + ": " + name + " takes a number, got '" + v.get() + "'");
    }
    if (!(x >= min && x <= max)) {
      throw new UsageException(command + ": " + name + " " + v.get() + " is outside " + min + ".." + max);
    }
    return x;
  }

  /**
   * Token id lists: {@code "5,17,2"} is one sequence, {@code "5,17,2;9,4"} two. Refused naming the bad
   * entry; every sequence must hold at least one id.
   */
  static List<int[]> tokenLists(String command, String option, String text) throws UsageException {
    List<int[]> sequences = new ArrayList<>();
    for (String sequence : text.split(";", -1)) {
      String[] parts = sequence.split(",", -1);
      int[] ids = new int[parts.length];
      for (int i = 0; i < parts.length; i++) {
        try {
          ids[i] = Integer.parseInt(parts[i].trim());
        } catch (NumberFormatException e) {
          throw new UsageException(command + ": " + option + " takes comma-separated token ids (sequences separated by ';'), got '"
              + parts[i].trim() + "' in '" + text + "'");
        }
        if (ids[i] < 0) {
          throw new UsageException(command + ": " + option + " holds the negative token id " + ids[i]);
        }
      }
      sequences.add(ids);
    }
    return sequences;
  }
}
