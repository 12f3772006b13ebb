package dev.xlaactors.runtime;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.PluginException;
import java.util.Set;
import java.util.TreeSet;

/**
 * Reads which entry parameters a compiled program aliases from a serialized {@code xla.HloModuleProto} (what
 * {@code PJRT_Executable_OptimizedProgram} returns, inside an HloModuleProtoWithConfig). A minimal, strict protobuf wire
 * reader: it walks only HloModuleProto field 8 ({@code input_output_alias}), its repeated field 1
 * ({@code entries}) and in each entry field 2 ({@code parameter_number}); every other field is skipped by
 * its wire type. Field numbers checked against a real optimized module compiled by JAX 0.10.2 with
 * {@code donate_argnums}: the entry holds output_shape_index = 1 (packed), parameter_number = 2 and
 * kind = 4 (not 5). Malformed bytes give a {@link PluginException} (DATA_LOSS); lengths are bounded by the
 * input, so nothing loops or allocates beyond it.
 *
 * <p>{@link LoadedProgram#donors()} reads them for programs compiled from bytes (a jax.export artifact or
 * MLIR bytecode), whose text the runtime cannot read: {@code PJRT_Executable_OptimizedProgram} answers in
 * format {@code "hlo_with_config"} (an {@code xla.HloModuleProtoWithConfig}, whose field 1 is the
 * HloModuleProto; checked on the pinned CPU plugin), see {@link #ofOptimizedProgram}.
 */
final class HloAliases {
  private static final int MODULE_INPUT_OUTPUT_ALIAS = 8;
  private static final int ALIAS_ENTRIES = 1;
  private static final int ENTRY_PARAMETER_NUMBER = 2;

  private static final int WITH_CONFIG_MODULE = 1; // HloModuleProtoWithConfig.hlo_module

  private HloAliases() {}

  /**
   * The aliased parameters of the program {@code PJRT_Executable_OptimizedProgram} returned in {@code
   * format}: {@code "hlo_with_config"} (what XLA's PJRT C API writes) or {@code "hlo"}; any other format
   * is a {@link PluginException} (UNIMPLEMENTED) naming it.
   */
  static Set<Integer> ofOptimizedProgram(String format, byte[] program) {
    if (format.equals("hlo")) {
      return parameters(program);
    }
    if (!format.equals("hlo_with_config")) {
      throw new PluginException(ErrorCode.UNIMPLEMENTED, "PJRT_Executable_OptimizedProgram answered in format '" + format
          + "', expected \"hlo_with_config\" or \"hlo\": the parameters the program aliases cannot be read");
    }
    Reader withConfig = new Reader(program, 0, program.length);
    Set<Integer> result = new TreeSet<>();
    while (withConfig.more()) {
      long key = withConfig.varint();
      if (key >>> 3 == WITH_CONFIG_MODULE && (key & 7) == 2) {
        Reader module = withConfig.message();
        result.addAll(parameters(program, module.at, module.end));
      } else {
        withConfig.skip(key);
      }
    }
    return result;
  }

  /** The parameter numbers that some output aliases, ascending; empty when the module has no alias. */
  static Set<Integer> parameters(byte[] hloModuleProto) {
    return parameters(hloModuleProto, 0, hloModuleProto.length);
  }

  private static Set<Integer> parameters(byte[] bytes, int from, int end) {
    Set<Integer> result = new TreeSet<>();
    Reader module = new Reader(bytes, from, end);
    while (module.more()) {
      long key = module.varint();
      if (key >>> 3 == MODULE_INPUT_OUTPUT_ALIAS && (key & 7) == 2) {
        Reader alias = module.message();
        while (alias.more()) {
          long aliasKey = alias.varint();
          if (aliasKey >>> 3 == ALIAS_ENTRIES && (aliasKey & 7) == 2) {
            Reader entry = alias.message();
            while (entry.more()) {
              long entryKey = entry.varint();
              if (entryKey >>> 3 == ENTRY_PARAMETER_NUMBER && (entryKey & 7) == 0) {
                long p = entry.varint();
                if (p < 0 || p > Integer.MAX_VALUE) {
                  throw malformed("parameter_number " + p + " out of range [0, " + Integer.MAX_VALUE + "]");
                }
                result.add((int) p);
              } else {
                entry.skip(entryKey);
              }
            }
          } else {
            alias.skip(aliasKey);
          }
        }
      } else {
        module.skip(key);
      }
    }
    return result;
  }

  private static PluginException malformed(String what) {
    return new PluginException(ErrorCode.DATA_LOSS, "the optimized program (xla.HloModuleProto) is malformed: "
        + what + "; expected the serialized module PJRT_Executable_OptimizedProgram returns (format hlo_with_config or hlo)");
  }

  private static final class Reader {
    private final byte[] bytes;
    private int at;
    private final int end;

    Reader(byte[] bytes, int from, int end) {
      this.bytes = bytes;
      this.at = from;
      this.end = end;
    }

    boolean more() {
      return at < end;
    }

    long varint() {
      long value = 0;
      for (int shift = 0; shift < 64; shift += 7) {
        if (at >= end) {
          throw malformed("varint runs past the end at byte " + at);
        }
        byte b = bytes[at++];
        value |= (long) (b & 0x7f) << shift;
        if (b >= 0) {
          return value;
        }
      }
      throw malformed("varint longer than 10 bytes before byte " + at);
    }

    Reader message() {
      int length = length();
      Reader inner = new Reader(bytes, at, at + length);
      at += length;
      return inner;
    }

    private int length() {
      long length = varint();
      if (length < 0 || length > end - at) {
        throw malformed("length " + length + " at byte " + at + " exceeds the " + (end - at) + " bytes left");
      }
      return (int) length;
    }

    void skip(long key) {
      int type = (int) (key & 7);
      if (key >>> 3 == 0) {
        throw malformed("field number 0 at byte " + at);
      }
      switch (type) {
        case 0 -> varint();
        case 1 -> advance(8);
        case 2 -> advance(length()); // not `at += length()`: Java reads `at` before length() moves it
        case 5 -> advance(4);
        default -> throw malformed("unsupported wire type " + type + " at byte " + at + " (expected 0, 1, 2 or 5)");
      }
    }

    private void advance(int n) {
      if (n > end - at) {
        throw malformed(n + " bytes wanted at byte " + at + " but " + (end - at) + " left");
      }
      at += n;
    }
  }
}
