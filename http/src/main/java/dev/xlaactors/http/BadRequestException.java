package dev.xlaactors.http;

import dev.xlaactors.error.InvalidArgumentException;

/**
 * A request the endpoint refuses before anything reaches a server: {@link #field()} names the part of the
 * request that is wrong ({@code inputs[0].shape}, {@code max_tokens}, {@code body}) and the message starts
 * with it, then says what was expected and what came. Answered with 400 (413 for an oversize body).
 */
public class BadRequestException extends InvalidArgumentException {
  private final String field;

  public BadRequestException(String field, String message) {
    super(field + ": " + message);
    this.field = field;
  }

  /** The JSON path of the offending field, or {@code body} for the request as a whole. */
  public String field() {
    return field;
  }
}
