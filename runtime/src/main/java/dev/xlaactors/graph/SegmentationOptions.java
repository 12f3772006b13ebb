package dev.xlaactors.graph;

import dev.xlaactors.error.InvalidArgumentException;
import java.util.Set;
import java.util.TreeSet;

/**
 * How {@link Graph#segment} cuts a graph.
 *
 * @param inlineCallbacks compile callbacks away: pure host calls that carry a graph equivalent (see
 *     {@link GraphBuilder#pureHostCall(dev.xlaactors.runtime.HostCallback, java.util.function.BiFunction,
 *     Value...)}) are replaced by it, so they cost no stage boundary
 * @param donatedParameters the graph parameters (by position) a run may donate ({@code
 *     dev.xlaactors.runtime.model.Argument#donated}): each must be read by exactly one top-level stage and
 *     by nothing else, and that stage aliases it to its first output of the same type, so the output is
 *     written in the donated buffer's memory (a KV cache or optimizer state updated in place). A run that
 *     does not donate such a parameter pays one device copy of it.
 */
public record SegmentationOptions(boolean inlineCallbacks, Set<Integer> donatedParameters) {
  public SegmentationOptions {
    donatedParameters = Set.copyOf(new TreeSet<>(donatedParameters));
    for (int p : donatedParameters) {
      if (p < 0) {
        throw new InvalidArgumentException("donated parameter " + p + " is negative: parameters are numbered from 0");
      }
    }
  }

  /** Cuts as {@code inlineCallbacks} says; donates nothing. */
  public SegmentationOptions(boolean inlineCallbacks) {
    this(inlineCallbacks, Set.of());
  }

  /** Cut at every host call; inline nothing. */
  public static SegmentationOptions defaults() {
    return new SegmentationOptions(false);
  }

  /** Inline the pure callbacks that carry a graph equivalent. */
  public static SegmentationOptions inliningCallbacks() {
    return new SegmentationOptions(true);
  }

  /** These options, with graph parameters {@code parameters} donatable (see {@link #donatedParameters}). */
  public SegmentationOptions donating(int... parameters) {
    Set<Integer> all = new TreeSet<>(donatedParameters);
    for (int p : parameters) {
      all.add(p);
    }
    return new SegmentationOptions(inlineCallbacks, all);
  }
}
