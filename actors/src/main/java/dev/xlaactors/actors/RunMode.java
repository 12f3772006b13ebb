package dev.xlaactors.actors;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import java.util.Locale;

/**
 * How {@link CallbackRuntime} runs a graph with host callbacks. Both give equal outputs, use the same
 * callback registry, timeouts and errors, and are supervised by one {@link RunSupervisor} per run.
 */
public enum RunMode {
  /**
   * Phase 1: one compiled program; each callback is an FFI custom call that blocks an XLA thread while
   * Java answers. Cheapest per callback; needs a plugin that runs the handler on the host; a run can be
   * cancelled only at its callbacks.
   */
  FUSED,
  /**
   * Phase 2: the graph is cut at its host calls into pure stages run one after another from Java, each
   * on its placed device; loops and conditionals that call the host are driven from Java. Works on any
   * plugin and device; cancel and the run timeout act between stages; costs an execute per stage.
   */
  SEGMENTED;

  /** {@code fused} or {@code segmented} (any case), as in {@code xla-actors.actors.runs.mode}. */
  public static RunMode parse(String text, String key) {
    try {
      return valueOf(text.trim().toUpperCase(Locale.ROOT));
    } catch (RuntimeException e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT,
          key + " must be fused or segmented, got '" + text + "'");
    }
  }
}
