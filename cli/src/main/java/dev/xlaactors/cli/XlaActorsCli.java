package dev.xlaactors.cli;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;

/**
 * The command line, {@code bin/xla-actors <command> ...}: {@code import}, {@code generate}, {@code score},
 * {@code embed}, {@code serve}, {@code help}. Exit status: 0 done, 2 a bad argument or package (the
 * message names what is wrong, with the command's usage line), 1 a failure while running.
 */
public final class XlaActorsCli {
  static final String USAGE = String.join("\n",
      "usage: bin/xla-actors <command> [arguments]",
      "  " + ImportCommand.USAGE.substring("usage: bin/xla-actors ".length()),
      "  " + GenerateCommand.USAGE.substring("usage: bin/xla-actors ".length()),
      "  " + ScoreCommand.USAGE.substring("usage: bin/xla-actors ".length()),
      "  " + EmbedCommand.USAGE.substring("usage: bin/xla-actors ".length()),
      "  " + ServeCommand.USAGE.substring("usage: bin/xla-actors ".length()),
      "  help [command]",
      "docs: docs/models.md (checkpoints and packages), docs/model-package.md (the package format)");

  private XlaActorsCli() {}

  /** Runs the command line and exits with its status. */
  public static void main(String[] args) {
    int status = run(Arrays.asList(args), System.out, System.err);
    System.out.flush();
    System.exit(status);
  }

  /**
   * Runs {@code args} (the command and its arguments), printing results to {@code out} and messages to
   * {@code err}; returns the exit status. The repository root (for {@code import}'s scripts) is the
   * system property {@code dev.xlaactors.cli.home}, set by {@code bin/xla-actors}, else the working directory.
   */
  public static int run(List<String> args, PrintStream out, PrintStream err) {
    if (args.isEmpty()) {
      err.println(USAGE);
      return 2;
    }
    String command = args.get(0);
    List<String> rest = args.subList(1, args.size());
    Path home = Path.of(System.getProperty("dev.xlaactors.cli.home", "")).toAbsolutePath();
    try {
      return switch (command) {
        case "import" -> ImportCommand.run(rest, home, out, err);
        case "generate" -> GenerateCommand.run(rest, out, err);
        case "score" -> ScoreCommand.run(rest, out);
        case "embed" -> EmbedCommand.run(rest, out);
        case "serve" -> ServeCommand.run(rest, out, err);
        case "help", "--help", "-h" -> help(rest, out);
        default -> throw new UsageException("unknown command '" + command + "'");
      };
    } catch (UsageException e) {
      err.println(e.getMessage());
      err.println(usageOf(command));
      return 2;
    } catch (InvalidArgumentException e) {
      err.println(command + ": " + e.getMessage());
      err.println(usageOf(command));
      return 2;
    } catch (XlaException e) {
      err.println(command + ": " + e.getMessage());
      return 1;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      err.println(command + ": interrupted");
      return 1;
    } catch (Exception e) {
      err.println(command + ": " + e);
      return 1;
    }
  }

  private static int help(List<String> rest, PrintStream out) {
    out.println(rest.isEmpty() ? USAGE : usageOf(rest.get(0)));
    return 0;
  }

  private static String usageOf(String command) {
    return switch (command) {
      case "import" -> ImportCommand.USAGE;
      case "generate" -> GenerateCommand.USAGE;
      case "score" -> ScoreCommand.USAGE;
      case "embed" -> EmbedCommand.USAGE;
      case "serve" -> ServeCommand.USAGE;
      default -> USAGE;
    };
  }
}
