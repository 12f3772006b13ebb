package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.PluginException;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The wire reader of {@link HloAliases} on hand-built bytes laid out as the real optimized module of
 * {@code jax.jit(f, donate_argnums=(1,))} (JAX 0.10.2, CPU): HloModuleProto field 8 holds one entry
 * {output_shape_index = [0] (packed), parameter_number = 1, kind = 4 (MAY_ALIAS)}.
 */
class HloAliasesTest {
  private static final byte[] ENTRY = {0x0a, 0x01, 0x00, 0x10, 0x01, 0x20, 0x01};

  private static byte[] module(byte[]... entries) {
    java.io.ByteArrayOutputStream alias = new java.io.ByteArrayOutputStream();
    for (byte[] e : entries) {
      alias.write(0x0a);
      alias.write(e.length);
      alias.writeBytes(e);
    }
    java.io.ByteArrayOutputStream m = new java.io.ByteArrayOutputStream();
    m.writeBytes(new byte[] {0x0a, 0x01, 'm'}); // name = "m", skipped
    m.writeBytes(new byte[] {0x29, 1, 2, 3, 4, 5, 6, 7, 8}); // field 5 fixed64, skipped
    m.write(0x42);
    m.write(alias.size());
    m.writeBytes(alias.toByteArray());
    m.writeBytes(new byte[] {0x58, 0x01}); // field 11 varint, skipped
    return m.toByteArray();
  }

  @Test
  void readsTheAliasedParameters() {
    assertEquals(Set.of(1), HloAliases.parameters(module(ENTRY)));
    byte[] second = {0x10, 0x03, 0x20, 0x01};
    assertEquals(Set.of(1, 3), HloAliases.parameters(module(ENTRY, second)));
  }

  @Test
  void noAliasIsEmpty() {
    assertTrue(HloAliases.parameters(new byte[] {0x0a, 0x01, 'm'}).isEmpty());
    assertTrue(HloAliases.parameters(new byte[0]).isEmpty());
  }

  @Test
  void malformedBytesAreRefused() {
    PluginException tooLong = assertThrows(PluginException.class,
        () -> HloAliases.parameters(new byte[] {0x42, 0x7f, 0x0a}));
    assertTrue(tooLong.getMessage().contains("exceeds"), tooLong.getMessage());
    PluginException unterminated = assertThrows(PluginException.class,
        () -> HloAliases.parameters(new byte[] {0x08, (byte) 0x80}));
    assertTrue(unterminated.getMessage().contains("past the end"), unterminated.getMessage());
    PluginException group = assertThrows(PluginException.class,
        () -> HloAliases.parameters(new byte[] {0x0b}));
    assertTrue(group.getMessage().contains("wire type 3"), group.getMessage());
  }

  /** PJRT's optimized program is an HloModuleProtoWithConfig: field 1 the module, field 2 the config. */
  @Test
  void readsTheModuleInsideTheOptimizedProgramsFormat() {
    byte[] module = module(ENTRY);
    java.io.ByteArrayOutputStream withConfig = new java.io.ByteArrayOutputStream();
    withConfig.write(0x0a);
    withConfig.write(module.length);
    withConfig.writeBytes(module);
    withConfig.writeBytes(new byte[] {0x12, 0x02, 0x08, 0x01}); // config, skipped
    assertEquals(Set.of(1), HloAliases.ofOptimizedProgram("hlo_with_config", withConfig.toByteArray()));
    assertEquals(Set.of(1), HloAliases.ofOptimizedProgram("hlo", module));
    PluginException other = assertThrows(PluginException.class, () -> HloAliases.ofOptimizedProgram("mlir", module));
    assertTrue(other.getMessage().contains("'mlir'"), other.getMessage());
  }
}
