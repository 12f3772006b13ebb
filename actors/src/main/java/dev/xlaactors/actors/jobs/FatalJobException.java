package dev.xlaactors.actors.jobs;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;

/**
 * A failure that retrying cannot fix: thrown by an item source, a sink or a host callback (anywhere in the
 * cause chain), it stops the job at once with a {@link JobResult.Failed} report instead of being retried.
 * {@link dev.xlaactors.error.CompileException} and {@link dev.xlaactors.error.InvalidArgumentException}
 * are fatal too.
 */
public class FatalJobException extends XlaException {
  public FatalJobException(String message) {
    super(ErrorCode.FAILED_PRECONDITION, message);
  }

  public FatalJobException(String message, Throwable cause) {
    super(ErrorCode.FAILED_PRECONDITION, message, cause);
  }
}
