package dev.xlaactors.cli;

/**
 * A command line that cannot be run as given: a missing or unknown argument, a value out of range, a
 * package that cannot be used. The message names what is wrong; the command prints it with its usage line
 * and exits with status 2.
 */
public final class UsageException extends Exception {
  private static final long serialVersionUID = 1L;

  /** A usage error saying {@code message}. */
  public UsageException(String message) {
    super(message);
  }
}
