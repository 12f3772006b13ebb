package dev.xlaactors.lm.text;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.List;
import java.util.Optional;

/**
 * Cuts a stream of text at the first stop string, which may arrive split over several pieces (tokens).
 *
 * <p>{@link #append(String)} returns the text that is safe to emit: everything except a tail that could
 * still grow into a stop string, which is held back until the next piece decides it. When a stop string
 * appears, the text before it is returned with the stop string that matched (the stop string and
 * anything after it are dropped, as OpenAI's {@code stop} does) and the matcher takes no more text. When
 * several stop strings match, the one that starts first wins (on a tie, the one listed first).
 * {@link #finish()} returns the held-back tail when the stream ends without a stop.
 *
 * <p>One per sequence; not thread-safe.
 */
public final class StopStringMatcher {
  /** What one {@link #append(String)} yields: text to emit and, when the stream stopped, the stop string. */
  public record Output(String text, Optional<String> stopString) {
    /** Validates the fields. */
    public Output {
      if (text == null || stopString == null) {
        throw new InvalidArgumentException("output text and stop string must not be null: use \"\" and Optional.empty()");
      }
    }

    /** Whether a stop string matched: the stream ends after {@link #text()}. */
    public boolean stopped() {
      return stopString.isPresent();
    }
  }

  private final List<String> stopStrings;
  private String heldBack = "";
  private boolean stopped;

  /**
   * A matcher for {@code stopStrings} (none: everything passes through at once).
   *
   * @throws InvalidArgumentException for a null or empty stop string
   */
  public StopStringMatcher(List<String> stopStrings) {
    if (stopStrings == null) {
      throw new InvalidArgumentException("stop strings are null: pass List.of() for none");
    }
    for (int i = 0; i < stopStrings.size(); i++) {
      String stop = stopStrings.get(i);
      if (stop == null || stop.isEmpty()) {
        throw new InvalidArgumentException("stop string " + i + " is " + (stop == null ? "null" : "empty")
            + ": every stop string needs at least one character; leave it out instead");
      }
    }
    this.stopStrings = List.copyOf(stopStrings);
  }

  /**
   * Takes the next piece of text; returns what may be emitted now, and the stop string if one matched.
   *
   * @throws IllegalStateException after a stop string matched
   */
  public Output append(String piece) {
    if (stopped) {
      throw new IllegalStateException("a stop string already ended this stream: stop feeding it text");
    }
    String text = heldBack + piece;
    int stopAt = -1;
    String stop = null;
    for (String candidate : stopStrings) {
      int at = text.indexOf(candidate);
      if (at >= 0 && (stopAt < 0 || at < stopAt)) {
        stopAt = at;
        stop = candidate;
      }
    }
    if (stop != null) {
      stopped = true;
      heldBack = "";
      return new Output(text.substring(0, stopAt), Optional.of(stop));
    }
    int hold = possibleStopStart(text);
    heldBack = text.substring(text.length() - hold);
    return new Output(text.substring(0, text.length() - hold), Optional.empty());
  }

  /** The held-back text, when the stream ends without a stop; empty after a stop. */
  public String finish() {
    String rest = heldBack;
    heldBack = "";
    return rest;
  }

  /** Whether a stop string has matched. */
  public boolean stopped() {
    return stopped;
  }

  /** The length of the longest tail of {@code text} that is a proper prefix of a stop string. */
  private int possibleStopStart(String text) {
    int longest = 0;
    for (String stop : stopStrings) {
      for (int length = Math.min(stop.length() - 1, text.length()); length > longest; length--) {
        if (text.regionMatches(text.length() - length, stop, 0, length)) {
          longest = length;
          break;
        }
      }
    }
    return longest;
  }
}
