package dev.xlaactors.examples;

import java.util.Arrays;

/**
 * An example's command-line arguments, checked before anything starts: a bad one prints what was wrong
 * and the usage line to stderr and exits with status 2; {@code -h} or {@code --help} prints the usage
 * line and exits 0.
 */
final class ExampleArgs {
  private final String usage;
  private final String[] args;

  /** {@code usage} is the whole usage line ("examples/run.sh generation [max-chars] ..."). */
  ExampleArgs(String usage, String[] args, int maxCount) {
    this.usage = usage;
    this.args = args.clone();
    for (String a : args) {
      if (a.equals("-h") || a.equals("--help")) {
        System.out.println("usage: " + usage);
        System.exit(0);
      }
    }
    if (args.length > maxCount) {
      exit("too many arguments: at most " + maxCount + ", got " + args.length);
    }
  }

  /** Argument {@code i} as a string, or {@code otherwise} when absent. */
  String string(int i, String otherwise) {
    return i < args.length ? args[i] : otherwise;
  }

  /** Argument {@code i}, named {@code name} in messages, as a long of at least {@code min}. */
  long longAt(int i, String name, long otherwise, long min) {
    if (i >= args.length) {
      return otherwise;
    }
    long value;
    try {
      value = Long.parseLong(args[i]);
    } catch (NumberFormatException e) {
      exit(name + " must be an integer, got '" + args[i] + "'");
      return otherwise;
    }
    if (value < min) {
      exit(name + " must be at least " + min + ", got " + value);
    }
    return value;
  }

  /** Argument {@code i} as an int of at least {@code min}. */
  int intAt(int i, String name, int otherwise, int min) {
    long value = longAt(i, name, otherwise, min);
    if (value > Integer.MAX_VALUE) {
      exit(name + " must be at most " + Integer.MAX_VALUE + ", got " + value);
    }
    return (int) value;
  }

  /** Prints {@code problem} and the usage line, and exits with status 2. */
  void exit(String problem) {
    System.err.println("bad arguments " + Arrays.toString(args) + ": " + problem);
    System.err.println("usage: " + usage);
    System.exit(2);
  }
}
