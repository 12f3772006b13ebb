package dev.xlaactors.runtime;

/** Conversions between float and the 16-bit float formats f16 (IEEE binary16) and bf16. */
public final class HalfFloats {
  private HalfFloats() {}

  static float bfloat16ToFloat(short bits) {
    return Float.intBitsToFloat((bits & 0xffff) << 16);
  }

  /** Round-to-nearest-even truncation of a float to its upper 16 bits; NaN stays NaN. */
  public static short floatToBFloat16(float value) {
    int bits = Float.floatToRawIntBits(value);
    if (Float.isNaN(value)) {
      return (short) ((bits >>> 16) | 0x40);
    }
    int rounding = 0x7fff + ((bits >>> 16) & 1);
    return (short) ((bits + rounding) >>> 16);
  }

  static float halfToFloat(short half) {
    int h = half & 0xffff;
    int sign = (h & 0x8000) << 16;
    int exponent = (h >>> 10) & 0x1f;
    int mantissa = h & 0x3ff;
    if (exponent == 0x1f) {
      return Float.intBitsToFloat(sign | 0x7f800000 | (mantissa << 13));
    }
    if (exponent == 0) {
      if (mantissa == 0) {
        return Float.intBitsToFloat(sign);
      }
      float magnitude = mantissa / 1024f / 16384f; // subnormal: mantissa * 2^-24
      return sign != 0 ? -magnitude : magnitude;
    }
    return Float.intBitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  }

  /** IEEE round-to-nearest-even conversion; overflow becomes infinity, NaN stays NaN. */
  public static short floatToHalf(float value) {
    int bits = Float.floatToRawIntBits(value);
    int sign = (bits >>> 16) & 0x8000;
    int exponent = ((bits >>> 23) & 0xff) - 127 + 15;
    int mantissa = bits & 0x7fffff;
    if (((bits >>> 23) & 0xff) == 0xff) {
      return (short) (sign | 0x7c00 | (mantissa != 0 ? 0x200 : 0));
    }
    if (exponent >= 0x1f) {
      return (short) (sign | 0x7c00);
    }
    if (exponent <= 0) {
      if (exponent < -10) {
        return (short) sign;
      }
      mantissa |= 0x800000;
      int shift = 14 - exponent;
      int halfMantissa = mantissa >>> shift;
      int remainder = mantissa & ((1 << shift) - 1);
      int halfway = 1 << (shift - 1);
      if (remainder > halfway || (remainder == halfway && (halfMantissa & 1) != 0)) {
        halfMantissa++;
      }
      return (short) (sign | halfMantissa);
    }
    int half = sign | (exponent << 10) | (mantissa >>> 13);
    int remainder = mantissa & 0x1fff;
    if (remainder > 0x1000 || (remainder == 0x1000 && (half & 1) != 0)) {
      half++; // may carry into the exponent, which is the correct rounding up to the next binade/infinity
    }
    return (short) half;
  }
}
