package dev.xlaactors.error;

/** The PJRT plugin could not be found, loaded, initialised, or does not offer what the runtime needs. */
public class PluginException extends XlaException {
  public PluginException(ErrorCode code, String message) {
    super(code, message);
  }
}
