package dev.xlaactors.lm.structured;

import dev.xlaactors.error.InvalidArgumentException;

/**
 * A JSON schema outside the subset structured output compiles (OpenAI's strict subset, see
 * {@link JsonSchemaAutomaton}), or malformed: names the keyword, its value, and what to do instead.
 */
public final class UnsupportedSchemaException extends InvalidArgumentException {
  private final String keyword;

  /** The schema's {@code keyword} with {@code value} cannot be compiled: {@code why} (what is supported, the fix). */
  public UnsupportedSchemaException(String keyword, Object value, String why) {
    super("JSON schema keyword '" + keyword + "' (" + value + ") is not supported: " + why);
    this.keyword = keyword;
  }

  /** The schema keyword refused. */
  public String keyword() {
    return keyword;
  }
}
