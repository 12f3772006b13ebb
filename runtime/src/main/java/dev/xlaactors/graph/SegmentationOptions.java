package dev.xlaactors.graph;

/**
 * How {@link Graph#segment} cuts a graph.
 *
 * @param inlineCallbacks compile callbacks away: pure host calls that carry a graph equivalent (see
 *     {@link GraphBuilder#pureHostCall(dev.xlaactors.runtime.HostCallback, java.util.function.BiFunction,
 *     Value...)}) are replaced by it, so they cost no stage boundary
 */
public record SegmentationOptions(boolean inlineCallbacks) {
  /** Cut at every host call; inline nothing. */
  public static SegmentationOptions defaults() {
    return new SegmentationOptions(false);
  }

  /** Inline the pure callbacks that carry a graph equivalent. */
  public static SegmentationOptions inliningCallbacks() {
    return new SegmentationOptions(true);
  }
}
