package dev.xlaactors.error;

/** XLA rejected a program: the message carries XLA's diagnostic (parse errors, type errors, unknown ops). */
public class CompileException extends XlaException {
  public CompileException(ErrorCode code, String message) {
    super(code, message);
  }
}
