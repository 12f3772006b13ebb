package dev.xlaactors.graph;

/** The predicate of {@link GraphBuilder#compare}: StableHLO's {@code comparison_direction}. */
public enum ComparisonDirection {
  EQ,
  NE,
  LT,
  LE,
  GT,
  GE
}
