package dev.xlaactors.runtime;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import java.util.Arrays;
import java.util.stream.Collectors;

/**
 * Element types the runtime supports, with their PJRT buffer-type ordinal, size in bytes and StableHLO
 * spelling. Complex numbers are stored as interleaved (real, imaginary) pairs; the two float8 types are
 * opaque bytes on the host. Types XLA has but the runtime does not (other float8 and 4-bit types,
 * tokens) are rejected in Java: creating a PJRT buffer of an invalid type aborts the process inside the
 * plugin.
 */
public enum DType {
  PRED(1, 1, "i1"),
  S8(2, 1, "i8"),
  S16(3, 2, "i16"),
  S32(4, 4, "i32"),
  S64(5, 8, "i64"),
  U8(6, 1, "ui8"),
  U16(7, 2, "ui16"),
  U32(8, 4, "ui32"),
  U64(9, 8, "ui64"),
  F16(10, 2, "f16"),
  F32(11, 4, "f32"),
  F64(12, 8, "f64"),
  BF16(13, 2, "bf16"),
  C64(14, 8, "complex<f32>"),
  C128(15, 16, "complex<f64>"),
  F8E5M2(16, 1, "f8E5M2"),
  F8E4M3FN(17, 1, "f8E4M3FN");

  private final int pjrtType;
  private final int byteSize;
  private final String mlirName;

  DType(int pjrtType, int byteSize, String mlirName) {
    this.pjrtType = pjrtType;
    this.byteSize = byteSize;
    this.mlirName = mlirName;
  }

  /** The {@code PJRT_Buffer_Type} ordinal. */
  public int pjrtType() {
    return pjrtType;
  }

  /** Bytes per element. */
  public int byteSize() {
    return byteSize;
  }

  /** The StableHLO element type, e.g. {@code f32}, {@code ui8}, {@code i1}. */
  public String mlirName() {
    return mlirName;
  }

  public boolean isFloating() {
    return this == F16 || this == F32 || this == F64 || this == BF16;
  }

  /** Complex: c64 (two f32) or c128 (two f64), interleaved. */
  public boolean isComplex() {
    return this == C64 || this == C128;
  }

  /** An 8-bit float (f8E5M2, f8E4M3FN), held on the host as raw bytes. */
  public boolean isFloat8() {
    return this == F8E5M2 || this == F8E4M3FN;
  }

  public boolean isSignedInteger() {
    return this == S8 || this == S16 || this == S32 || this == S64;
  }

  public boolean isUnsignedInteger() {
    return this == U8 || this == U16 || this == U32 || this == U64;
  }

  public boolean isInteger() {
    return isSignedInteger() || isUnsignedInteger();
  }

  /** Lower-case short name used in messages and shapes, e.g. {@code f32[2,3]}. */
  public String shortName() {
    return name().toLowerCase(java.util.Locale.ROOT);
  }

  /** The dtype for a PJRT buffer-type ordinal; an {@link XlaException} for types the runtime lacks. */
  public static DType fromPjrtType(int pjrtType) {
    for (DType t : values()) {
      if (t.pjrtType == pjrtType) {
        return t;
      }
    }
    throw new XlaException(
        ErrorCode.UNIMPLEMENTED,
        "PJRT buffer type " + pjrtType + " is not supported; supported: " + supportedNames());
  }

  /** The dtype for a StableHLO element type name, e.g. {@code f32} or {@code ui8}. */
  public static DType fromMlirName(String name) {
    for (DType t : values()) {
      if (t.mlirName.equals(name)) {
        return t;
      }
    }
    throw new InvalidArgumentException(
        "element type '" + name + "' is not supported; supported: " + supportedNames());
  }

  static String supportedNames() {
    return Arrays.stream(values()).map(DType::shortName).collect(Collectors.joining(", "));
  }
}
