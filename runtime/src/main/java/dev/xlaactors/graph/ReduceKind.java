package dev.xlaactors.graph;

/** The combining function of {@link GraphBuilder#reduce}, with its identity as the initial value. */
public enum ReduceKind {
  SUM("stablehlo.add"),
  MAX("stablehlo.maximum"),
  MIN("stablehlo.minimum");

  private final String mlirOp;

  ReduceKind(String mlirOp) {
    this.mlirOp = mlirOp;
  }

  String mlirOp() {
    return mlirOp;
  }
}
