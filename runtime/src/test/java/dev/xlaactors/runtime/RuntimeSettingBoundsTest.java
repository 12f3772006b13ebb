package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.typesafe.config.ConfigFactory;
import dev.xlaactors.error.XlaException;
import org.junit.jupiter.api.Test;

/** The runtime's numeric settings have ranges; a value outside is refused naming the key, the value and the range. */
class RuntimeSettingBoundsTest {
  private static XlaException refused(String hocon) {
    return assertThrows(XlaException.class,
        () -> RuntimeSettings.fromConfig(ConfigFactory.parseString(hocon).withFallback(ConfigFactory.defaultReference()).resolve()));
  }

  @Test
  void absurdCountsAndSizesAreRefused() {
    XlaException cache = refused("xla-actors.runtime.compile-cache-size = 2000000000");
    assertTrue(cache.getMessage().startsWith("xla-actors.runtime.compile-cache-size = 2000000000 is out of range: it must be from 0 to 100000"),
        cache.getMessage());
    XlaException pool = refused("xla-actors.runtime.host-memory.pool-bytes = 64 TiB");
    assertTrue(pool.getMessage().startsWith(RuntimeSettings.HOST_MEMORY_POOL_BYTES_KEY + " = \"64 TiB\" is out of range: it must be from 0 to "
        + (1L << 40)), pool.getMessage());
  }
}
